"""A real S3 endpoint (a moto server on 127.0.0.1) and an empty cache home for the remote tests."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.moto import MotoServer


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server and the AWS environment pointing at it (dummy keys, no real config)."""
    tmp = tmp_path_factory.mktemp("moto")
    server = MotoServer(tmp)
    env = {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": server.url, "AWS_CONFIG_FILE": str(tmp / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none"),
    }
    saved = {k: os.environ.get(k) for k in [*env, "AWS_PROFILE", "AWS_SESSION_TOKEN"]}
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3fs_client(s3):
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


@pytest.fixture
def fresh_home(tmp_path, monkeypatch) -> Path:
    """An empty XDG cache home: where mirrors and pulled caches go."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home
