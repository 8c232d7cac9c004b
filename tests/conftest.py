import os
import sys

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Compiled artifacts of the test run go to a private cache, never the user's: one for the
    run, shared by pytest-xdist's workers (each artifact is built once, not once a worker; the
    cache's writes are atomic renames, so concurrent builders of one key both succeed)."""
    # a test that reruns tests in a subprocess hands its cache on (the kernel is built once)
    parent = os.environ.get("TREECOMP_TEST_PARENT_CACHE")
    if not parent and os.environ.get("PYTEST_XDIST_WORKER"):
        # the workers' base temp folders share this run's folder (pytest-of-<user>/pytest-<n>)
        parent = str(tmp_path_factory.getbasetemp().parent / "treecomp-cache")
    os.environ["TREECOMP_CACHE_DIR"] = parent or str(tmp_path_factory.mktemp("treecomp-cache"))
    yield
