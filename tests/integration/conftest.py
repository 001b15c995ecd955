"""Shared fixtures for the integration tests.

nicpick_bin   the binary under test: env NICPICK, else build/nicpick
nicpick       a netns.Nicpick wrapper around it (runs with a timeout)
netns         a NetnsFactory; every namespace it makes is deleted at the end
              of the test, pass or fail.  Skips loudly without root.
out_dir       an empty directory for select's outputs
clusters      clusters(seed=False, **kw): a built cluster.Cluster (the test
              topology) with its API server running, the job's pods seeded
              with seed=True; every one is closed after the test, pass or fail
"""
import os
import pathlib
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import cluster as cluster_mod  # noqa: E402
import netns as netns_mod  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def nicpick_bin():
    path = os.environ.get("NICPICK") or str(ROOT / "build" / "nicpick")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        if os.environ.get("NICPICK"):
            pytest.fail(f"NICPICK={path} is not an executable file")
        pytest.skip(f"nicpick binary not found at {path}: run `make integration` "
                    f"or set NICPICK")
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def nicpick(nicpick_bin):
    return netns_mod.Nicpick(nicpick_bin)


@pytest.fixture(scope="session")
def _netns_available():
    reason = netns_mod.netns_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def netns(_netns_available):
    f = netns_mod.NetnsFactory()
    try:
        yield f
    finally:
        f.cleanup()


@pytest.fixture
def out_dir(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture
def node(netns):
    """A namespace with one usable interface (eth1, 10.77.0.1/24, a veth to
    a peer namespace): a node that nicpick can always decide on, whatever
    the machine running the tests has."""
    n = netns.new("node")
    peer = netns.new("switch")
    netns_mod.veth(n, "eth1", peer, "sw0", cidr_a="10.77.0.1/24", cidr_b="10.77.0.254/24")
    return n


@pytest.fixture
def clusters(netns, nicpick_bin, tmp_path):
    made = []

    def make(seed=False, **kw):
        c = cluster_mod.Cluster(netns, tmp_path, nicpick_bin, **kw)
        made.append(c)
        c.build().start_api()
        if seed:
            c.seed_pods()
        return c

    yield make
    for c in made:
        c.close()
