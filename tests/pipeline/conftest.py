"""A real Dask cluster for the executor tests: LocalCluster, 2 worker processes."""
from __future__ import annotations

import pytest

from tests.support import need


@pytest.fixture(scope="module")
def cluster():
    """LocalCluster(n_workers=2, processes=True, threads_per_worker=1) and a client on it."""
    distributed = need("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        yield cl, client
