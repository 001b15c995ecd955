"""Shared by every Python test: under CI=true a skipped test is a failure.

Tests skip, and say why, when a prerequisite is missing on a developer's
machine (kubectl or helm not fetched, no root for network namespaces, nicpick
not built). CI installs and builds everything itself, so there a missing
prerequisite means a broken pipeline, and a skip must not pass for a pass.
A skip that is not about a missing prerequisite (valgrind cannot run an ASan
build) says so with a reason starting "not applicable".
"""
import os

import pytest

NOT_APPLICABLE = "not applicable"


def _ci():
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not _ci() or not rep.skipped or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if reason.startswith("Skipped: "):
        reason = reason[len("Skipped: "):]
    if reason.startswith(NOT_APPLICABLE):
        return
    rep.outcome = "failed"
    rep.longrepr = f"CI=true, so a missing prerequisite fails the run: {reason}"
