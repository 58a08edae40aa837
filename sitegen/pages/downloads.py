"""The run page's downloads: every scalar record as columns the page script turns into a CSV,
a Parquet file, and the environment as JSON."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

from sitegen.model import Environment
from sitegen.pages.charts import numbers, run_length, runs_of


def csv_columns(table: pa.Table) -> dict:
    """The download table as compact columns (``scalars.js``): the page script writes the CSV
    from them when asked. Writing a CSV per run here cost more than decoding the run, and the
    CSVs were most of the site's size; the script's CSV has every record, exactly."""

    def labels(col: str) -> dict:
        enc = table.column(col).combine_chunks()
        if not pa.types.is_dictionary(enc.type):
            enc = enc.dictionary_encode()
        codes = enc.indices.to_numpy(zero_copy_only=False)
        starts, counts = runs_of(codes)
        names = enc.dictionary.to_pylist()
        return run_length([(names[c], n) for c, n in zip(codes[starts].tolist(), counts.tolist())])

    return {
        "series": labels("series"),
        "tag": labels("tag"),
        "step": numbers(table.column("step").to_numpy()),
        "wall_time": numbers(table.column("wall_time").to_numpy()),
        "value": numbers(table.column("value").to_numpy()),
    }


def to_parquet(table: pa.Table) -> bytes:
    """The Parquet download: dictionaries only for the text columns, no statistics (numbers
    rarely repeat, and statistics of one file help nobody), steps delta-coded and floats
    byte-stream-split before zstd (Parquet 2.8 encodings, read by pyarrow, DuckDB, polars and
    Spark 3.2+): faster to write than the defaults, and smaller."""
    buf = io.BytesIO()
    strings = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)]
    encodings = {
        f.name: "DELTA_BINARY_PACKED" if pa.types.is_integer(f.type) else "BYTE_STREAM_SPLIT"
        for f in table.schema
        if f.name not in strings and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    }
    pq.write_table(table, buf, compression="zstd", use_dictionary=strings, write_statistics=False, column_encoding=encodings)
    return buf.getvalue()


def env_json(env: Environment) -> str:
    return json.dumps(env.items, ensure_ascii=False, sort_keys=True, indent=1)
