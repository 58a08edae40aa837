"""Decode TensorFlow ``TensorProto`` messages (TF2 and PyTorch new-style summaries) to numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sitegen.ingest.protowire import LEN, WireError, iter_fields, packed

DT_STRING = 7
#: TensorFlow DataType -> numpy dtype of tensor_content (little-endian, row-major).
_CONTENT_DTYPES = {
    1: "<f4",
    2: "<f8",
    3: "<i4",
    4: "u1",
    5: "<i2",
    6: "i1",
    9: "<i8",
    10: "?",
    17: "<u2",
    19: "<f2",
    22: "<u4",
    23: "<u8",
}
#: typed repeated field -> (struct format, dtypes it may carry)
_TYPED_FIELDS = {5: "f", 6: "d", 7: "v", 10: "v", 11: "v", 13: "v", 16: "v", 17: "v"}


@dataclass
class Tensor:
    dtype: int
    shape: tuple[int, ...]
    values: np.ndarray | None  # numeric tensors
    strings: list[bytes] | None  # DT_STRING tensors (each cut to ``max_string`` bytes, see :func:`decode_tensor`)
    sizes: list[int] | None = None  # each string's length before it was cut


def _shape(buf: memoryview) -> tuple[int, ...]:
    dims = []
    for field, wt, value in iter_fields(buf):
        if field == 2 and wt == LEN:
            size = 0
            for f2, wt2, v2 in iter_fields(value):  # type: ignore[arg-type]
                if f2 == 1 and wt2 == 0:
                    size = v2 if v2 < 1 << 63 else v2 - (1 << 64)  # type: ignore[operator, assignment]  # a varint: an int
            dims.append(int(size))
    return tuple(dims)


def decode_tensor(buf: memoryview, max_string: int | None = None) -> Tensor:
    """A TensorProto; strings longer than ``max_string`` bytes are cut there (a text or image of
    gigabytes is never copied whole: it is over every limit anyway)."""
    shape: tuple[int, ...]
    content: bytes | None
    dtype, shape, content = 0, (), None
    typed: list = []
    strings: list[bytes] = []
    sizes: list[int] = []
    for field, wt, value in iter_fields(buf):
        if field == 1 and wt == 0:
            dtype = int(value)
        elif field == 2 and wt == LEN:
            shape = _shape(value)  # type: ignore[arg-type]
        elif field == 4 and wt == LEN:
            content = bytes(value)
        elif field == 8 and wt == LEN:
            sizes.append(len(value))  # type: ignore[arg-type]
            strings.append(bytes(value[:max_string] if max_string is not None else value))  # type: ignore[index]
        elif field in _TYPED_FIELDS:
            typed.extend(packed(value, wt, _TYPED_FIELDS[field]))
    size = int(np.prod(shape)) if shape else 1
    if any(d < 0 for d in shape):
        raise WireError(f"negative dimension in tensor shape {shape}")
    if dtype == DT_STRING:
        return Tensor(dtype, shape, None, strings, sizes)
    if content is not None:
        np_dtype = _CONTENT_DTYPES.get(dtype)
        if np_dtype is None:
            raise WireError(f"unsupported tensor dtype {dtype}")
        item = np.dtype(np_dtype).itemsize
        if len(content) != size * item:
            raise WireError(f"tensor_content holds {len(content)} bytes, shape {shape} needs {size * item}")
        values = np.frombuffer(content, dtype=np_dtype).astype(np.float64)
    else:
        if dtype == 19:  # DT_HALF: half_val holds the bit patterns
            values = np.array(typed, dtype=np.uint16).view("<f2").astype(np.float64)
        else:
            values = np.array(typed, dtype=np.float64)
        if len(values) == 1 and size > 1:
            values = np.full(size, values[0])
        elif len(values) != size:
            if size == 0 or (len(values) == 0):
                values = np.zeros(size)
            else:
                raise WireError(f"tensor holds {len(values)} values, shape {shape} needs {size}")
    return Tensor(dtype, shape, values.reshape(shape) if shape else values.reshape(()), None)
