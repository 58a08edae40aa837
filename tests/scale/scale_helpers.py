"""Helpers for tests/scale (a plain module, importable by Dask workers: they are spawned with
this process's ``sys.path``)."""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import time
from pathlib import Path

import pytest

from sitegen.config import Config

CONFIG = Config(title="Scale runs")


def need(module: str):
    """Import an optional test dependency; FAIL (never skip) when it is missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{module} is missing ({exc}): pip install -e '.[test]' (dask[distributed], s3fs, moto[server])")


# --------------------------------------------------------------------------- job functions


def slow_process(job):
    """build.process, slowly: keeps tasks on the workers long enough to kill one mid-build."""
    from sitegen.pipeline.build import process

    time.sleep(float(os.environ.get("SITEGEN_TEST_SLEEP", "0.6")))
    return process(job)


def _attempt_file(job) -> Path:
    name = hashlib.sha256(job.family[0].name.encode()).hexdigest()[:16]
    return Path(os.environ["SITEGEN_TEST_FLAKY_DIR"]) / name


def flaky_process(job):
    """Raises on the first attempt of each job (a transient error), then works."""
    from sitegen.pipeline.build import process

    marker = _attempt_file(job)
    with marker.open("a") as f:
        f.write("x")
    if marker.stat().st_size == 1:
        raise RuntimeError(f"transient failure of {job.family[0].name}")
    return process(job)


def broken_process(job):
    """Always raises: the build must fail (after the retries), not hang."""
    marker = _attempt_file(job).with_suffix(".broken")
    with marker.open("a") as f:
        f.write("x")
    raise RuntimeError(f"permanent failure of {job.family[0].name}")


# --------------------------------------------------------------------------- building


@contextlib.contextmanager
def run_all_via(run_all):
    """Build with ``sitegen.pipeline.build.run_all`` replaced (restored afterwards)."""
    import sitegen.pipeline.build as B

    saved = B.run_all
    B.run_all = run_all
    try:
        yield
    finally:
        B.run_all = saved


def build_supports_executor() -> bool:
    """True once build() takes ``executor=``/``scheduler=`` itself."""
    from sitegen.pipeline.build import BuildOptions, build
from sitegen.pipeline.executors import executor_for

    return "executor" in inspect.signature(build).parameters


def build_supports_urls() -> bool:
    """True once build() localizes URL archives and caches itself (through sitegen.tools.remote)."""
    import sitegen.pipeline.build as B

    return hasattr(B, "_localize")


def build_site(archive, out: Path, *, cache: Path, executor: str = "local", scheduler: str | None = None,
               workers: int = 0, fn=None):
    """``build(..., executor=, scheduler=)``; before build() takes those, the same through
    ``run_all`` replaced by ``map_jobs``."""
    from sitegen.pipeline.build import BuildOptions, build
    from sitegen.pipeline.executors import map_jobs

    if fn is None and not workers and build_supports_executor():
        return build(archive, out, BuildOptions(config=CONFIG, cache=cache, executor=executor_for(executor, scheduler=scheduler)))

    def run_all(jobs, *, workers, **_kw):  # build()'s own worker count is ignored: ours decides
        return map_jobs(jobs, executor=executor, scheduler=scheduler, workers=wk, fn=fn)

    wk = workers
    with run_all_via(run_all):
        return build(archive, out, BuildOptions(config=CONFIG, cache=cache))


def build_remote(archive_url: str, out: Path, *, cache_url: str):
    """A build from a URL archive with a URL cache: build() itself once it takes URLs, else
    exactly what it will do (sitegen.tools.remote.localize, build on the local folders, push)."""
    from sitegen.tools import remote
    from sitegen.pipeline.build import BuildOptions, build

    if build_supports_urls():
        return build(archive_url, out, BuildOptions(config=CONFIG, cache=cache_url))
    loc = remote.localize(archive_url, cache_url)
    result = build(loc.archive, out, BuildOptions(config=CONFIG, cache=loc.cache))
    loc.push()
    return result


# --------------------------------------------------------------------------- comparing


def site_files(site: Path) -> dict[str, bytes]:
    root = Path(site).resolve()
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def assert_same_site(a: Path, b: Path, *, same_paths: bool = True) -> None:
    """Every file byte for byte. ``same_paths=False`` (archives at different local paths, e.g.
    disk vs an S3 mirror): the manifest's ``runs`` (input keys of the incremental build, made
    of absolute paths and mtimes) and ``site`` (the key of them all) may differ; its ``files`` and
    ``sources`` may not."""
    fa, fb = site_files(a), site_files(b)
    ma, mb = json.loads(fa["manifest.json"]), json.loads(fb["manifest.json"])
    assert ma["files"] == mb["files"], "manifest 'files' differ"
    assert ma.get("sources") == mb.get("sources"), "manifest 'sources' differ"
    assert sorted(fa) == sorted(fb), f"different file sets: {sorted(set(fa) ^ set(fb))[:10]}"
    skip = set() if same_paths else {"manifest.json", "manifest.json.gz"}
    differ = [rel for rel in fa if rel not in skip and fa[rel] != fb[rel]]
    assert not differ, f"{len(differ)} files differ, e.g. {differ[:5]}"
    if not same_paths:
        for m in (ma, mb):
            m.pop("runs", None), m.pop("site", None)
        assert ma == mb, "manifests differ beyond their input keys"
    assert len(fa) > 10


async def die() -> None:
    """Run on a worker with ``client.run(die, wait=False)``: the process ends at once."""
    os._exit(1)
