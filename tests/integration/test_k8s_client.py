"""lib/k8s against the test API server.

The C side is tests/live/test_k8s_live.c (built by `make unit` and
`make integration` as build/tests/test_k8s_live; `make unit` does not run
it, since it needs a server).  This file starts tools/kubeapi,
runs that binary once per named case with the server's address, CA and
tokens in its environment, and checks that the case ran and passed (a
skipped or missing case fails here).  Faults, RBAC and token changes are
injected by the C test itself through the server's /_admin endpoint.
"""
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

NS = "nicpick-test"

CASES = [
    "test_get_patch_list_with_selectors",
    "test_get_job_completions",
    "test_create_event_on_pod",
    "test_list_pages_deliver_every_pod_once",
    "test_list_expired_continue_lists_again_from_the_start",
    "test_watch_sees_modified_after_patch",
    "test_watch_metadata_only_carries_metadata_and_annotations",
    "test_watch_bookmarks_advance_resource_version",
    "test_watch_dropped_resumes_without_losing_events",
    "test_watch_410_relists_and_continues",
    "test_twins_share_one_h2_connection_with_a_watch_that_writes",
    "test_twins_over_http1_keep_a_connection_each",
    "test_watch_retries_5xx",
    "test_watch_stops_at_deadline",
    "test_watch_side_work_runs_beside_the_stream",
    "test_watch_side_work_runs_while_the_watch_waits_to_reconnect",
    "test_500_three_times_then_success",
    "test_connection_reset_is_retried",
    "test_429_honours_retry_after",
    "test_403_names_the_missing_rule",
    "test_wrong_token_is_401_with_file_name",
    "test_rotated_token_file_is_used",
    "test_deadline_beats_slow_server",
    "test_tls_is_verified",
]


@pytest.fixture(scope="module")
def live_bin():
    env = os.environ.get("NICPICK_K8S_LIVE")
    if env:
        path = pathlib.Path(env)
    else:
        nicpick = os.environ.get("NICPICK") or str(ROOT / "build" / "nicpick")
        path = pathlib.Path(nicpick).parent / "tests" / "test_k8s_live"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} not built: run `make unit` first (or set NICPICK_K8S_LIVE)")
    return str(path)


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory):
    try:
        from tools import kubeapi
    except ImportError as e:
        pytest.fail(f"tools/kubeapi cannot be imported: {e}")
    srv = kubeapi.Server(state_dir=str(tmp_path_factory.mktemp("kubeapi")),
                         namespace=NS).start()
    try:
        yield srv
    finally:
        srv.stop()


def live_env(srv):
    env = dict(os.environ)
    env.update(NICPICK_TEST_API=srv.url, NICPICK_TEST_CA=srv.ca_path,
               NICPICK_TEST_TOKEN_FILE=os.path.join(srv.state_dir, "token"),
               NICPICK_TEST_ADMIN_TOKEN_FILE=os.path.join(srv.state_dir, "admin-token"),
               NICPICK_TEST_NS=NS)
    return env


def run_live(live_bin, env, case=None, timeout=90):
    if case:
        env = dict(env, NICPICK_TEST_CASE=case)
    p = subprocess.run([live_bin], env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("case", CASES)
def test_k8s_client_live(live_bin, apiserver, case):
    rc, out = run_live(live_bin, live_env(apiserver), case)
    assert rc == 0, out
    assert f"[       OK ] {case}\n" in out, out
    assert "[  PASSED  ] 1 test(s)." in out, out
    assert "SKIPPED" not in out, out


def test_every_live_case_is_listed_here():
    """A case added to test_k8s_live.c but not to CASES would never run."""
    src = (ROOT / "tests" / "live" / "test_k8s_live.c").read_text()
    in_c = re.findall(r"cmocka_unit_test_setup\((test_\w+),", src)
    assert sorted(in_c) == sorted(CASES)


def test_live_binary_skips_loudly_without_server(live_bin):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICPICK_TEST_")}
    rc, out = run_live(live_bin, env)
    assert rc == 0, out
    assert "[  SKIPPED ] k8s_live: NICPICK_TEST_API is unset" in out, out
