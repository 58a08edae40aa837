"""Fixtures of the fault corpus: small real-writer logs and what each of their records holds."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import corpus


class Original:
    """An intact log file, its record boundaries and what the reference decoder gets from each record."""

    def __init__(self, path: Path, offsets, per_record, decode) -> None:
        self.path, self.data, self.offsets, self.per_record, self.decode = path, path.read_bytes(), offsets, per_record, decode

    def expected(self, keep) -> list:
        """The items of the records ``keep`` (indices), as a decode of the whole file lists them."""
        return corpus.group([it for i in keep for it in self.per_record[i]])


def _original(tmp: Path, path: Path, offsets_of, decode) -> Original:
    data = path.read_bytes()
    offsets = offsets_of(data)
    per = corpus.per_record_items(data, offsets, decode, tmp)
    orig = Original(path, offsets, per, decode)
    # the oracle is consistent: the records one by one add up to the whole file
    whole, _ = decode(path)
    assert whole.problems == [] and corpus.items(whole) == orig.expected(range(len(offsets)))
    return orig


@pytest.fixture(scope="session")
def tbx(tmp_path_factory) -> Original:
    tmp = tmp_path_factory.mktemp("tbx")
    path = corpus.write_tbx(tmp / "run")
    assert 2000 <= path.stat().st_size <= 5000
    return _original(tmp, path, corpus.tf_offsets, lambda p: corpus.tf_decode(p, fast=False))


@pytest.fixture(scope="session")
def vdl(tmp_path_factory) -> Original:
    tmp = tmp_path_factory.mktemp("vdl")
    path = corpus.write_vdl(tmp / "run")
    assert 1500 <= path.stat().st_size <= 5000
    return _original(tmp, path, corpus.vdl_offsets, lambda p: corpus.vdl_decode(p, fast=False))
