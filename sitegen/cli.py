"""Command line: ``sitegen build``, ``sitegen export``. Errors become one line and an exit code."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from . import __version__
from .config import load_config
from .errors import SitegenError

log = logging.getLogger("sitegen")

EXIT_OK, EXIT_WARNINGS, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sitegen", description="Turn an archive of ML training logs into a static website.")
    p.add_argument("--version", action="version", version=f"sitegen {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the site of an archive")
    b.add_argument("archive", type=Path)
    b.add_argument("--out", type=Path, required=True, help="site folder (replaced atomically)")
    b.add_argument("--config", type=Path, help="sitegen.toml")
    b.add_argument("--strict", action="store_true", help="exit 1 when anything was damaged or skipped")
    b.add_argument("--no-verify", action="store_true", help="skip payload checksums (faster)")
    b.add_argument("--quiet", action="store_true", help="print errors only")
    e = sub.add_parser("export", help="write every scalar of an archive to .parquet or .csv")
    e.add_argument("archive", type=Path)
    e.add_argument("--out", type=Path, required=True, help="FILE.parquet or FILE.csv")
    e.add_argument("--no-verify", action="store_true")
    e.add_argument("--quiet", action="store_true")
    return p


def _build(args: argparse.Namespace) -> int:
    from .build import build

    config = load_config(args.config)
    result = build(args.archive, args.out, config=config, verify=not args.no_verify)
    log.info("built %d runs, %d files into %s; %d problems", result.runs, result.files, result.out, len(result.problems))
    return EXIT_WARNINGS if args.strict and result.problems else EXIT_OK


def _export(args: argparse.Namespace) -> int:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from .api import read_scalars
    from .model import ReadOptions

    table = read_scalars(args.archive, options=ReadOptions(verify=not args.no_verify))
    out: Path = args.out
    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise SitegenError(f"{out}: the output must end in .parquet or .csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if suffix == ".parquet":
        pq.write_table(table, tmp)
    else:
        pacsv.write_csv(table, tmp)
    tmp.replace(out)
    log.info("wrote %d scalars to %s", table.num_rows, out)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.ERROR if getattr(args, "quiet", False) else logging.INFO,
        format="%(levelname)s: %(message)s" if sys.stderr.isatty() else "sitegen: %(levelname)s: %(message)s",
    )
    try:
        return {"build": _build, "export": _export}[args.command](args)
    except SitegenError as exc:
        print(f"sitegen: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("sitegen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
