#!/usr/bin/python3
"""Change the code on purpose, one security-relevant condition at a time,
and run the tests that should catch it.  Prints, per mutation, the tests
that failed; a mutation that no test catches is a gap.  The source is
restored after each mutation (git checkout of the file).

    tests/mutate.py            every mutation
    tests/mutate.py NAME...    some of them
Run as root (the integration tests use network namespaces)."""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PY = "/usr/bin/python3"

# name: (file, old, new, pytest selections)
MUTATIONS = {
    "source-check": ("lib/exchange/plumbing.c", "t->ok = pr.connected && pr.source_ok;",
                     "t->ok = pr.connected;", ["tests/integration/test_agree_e2e.py"]),
    "route-device": ("lib/exchange/plumbing.c", "} else if (strcmp(dev, p->ifname) != 0) {",
                     "} else if (0 && strcmp(dev, p->ifname) != 0) {",
                     ["tests/integration/test_agree_e2e.py"]),
    "duplicate-address": ("lib/agree/decide.c", "if (c->e[a].pod != c->e[b - 1].pod) {",
                          "if (0 && c->e[a].pod != c->e[b - 1].pod) {",
                          ["tests/integration/test_agree_e2e.py"]),
    "quoting": ("lib/outputs/env.c", "if (*p == '\\'') {", "if (0) {",
                ["tests/integration/test_netns_select.py", "tests/integration/test_cli.py"]),
    "report-size-bound": ("lib/agree/report.c", "if (len > AGREE_REPORT_MAX_BYTES) {",
                          "if (0 && len > AGREE_REPORT_MAX_BYTES) {",
                          ["tests/integration/test_agree_e2e.py"]),
    # The probe listener's authentication and bounds (docs/security.md).
    "probe-token": ("lib/probe/probe.c", "\treturn diff == 0;", "\treturn diff == 0 || a != b;",
                    ["tests/integration/test_probe_hostile.py"]),
    "probe-peer-address": ("lib/probe/probe.c",
                           "if (o->peer_addr && o->peer_addr[0] && !probe_same_addr(seen, o->peer_addr))",
                           "if (0 && o->peer_addr && o->peer_addr[0] && !probe_same_addr(seen, o->peer_addr))",
                           ["tests/integration/test_probe_hostile.py"]),
    "probe-payload-bound": ("lib/probe/probe.c",
                            "if (payload > 0 && (o->max_payload <= 0 || payload > o->max_payload))",
                            "if (0 && payload > 0)", ["tests/integration/test_probe_hostile.py"]),
    "probe-min-rate": ("lib/probe/listen.c",
                       "int64_t t = c->payload_start + PROBE_RATE_GRACE_MS + c->got / (PROBE_MIN_RATE_BPS / 1000);",
                       "int64_t t = INT64_MAX;", ["tests/integration/test_probe_hostile.py"]),
    "routed-interface": ("lib/agree/decide.c", "\tif (a->route != b->route)\n\t\treturn a->route < b->route ? -1 : 1;\n",
                         "", ["tests/integration/test_probe_hostile.py"]),
    "route-retry": ("lib/exchange/gather.c", "\t\tif (route_only) {", "\t\tif (0 && route_only) {",
                    ["tests/integration/test_probe_hostile.py"]),
}

# The e2e tests that exercise these conditions; the others only take time.
E2E_K = "happy_path or nat_on or route_to or routed_fabric or no_common or firewalled"


def sh(*argv, **kw):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, **kw)


def unit_failures():
    bins = sorted(p for p in (ROOT / "build" / "tests").glob("test_*")
                  if not p.name.endswith("_live") and os.access(p, os.X_OK))
    failed = []
    for b in bins:
        p = sh(str(b), timeout=300)
        if p.returncode != 0:
            names = re.findall(r"\[  FAILED  \] ([A-Za-z_]\w*)", p.stdout + p.stderr)
            failed += [f"{b.name}:{n}" for n in dict.fromkeys(names)] or [f"{b.name} (rc {p.returncode})"]
    return failed


def pytest_failures(paths):
    args = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *paths]
    if any("e2e" in p for p in paths):
        args += ["-k", E2E_K]
    p = sh(*args, timeout=1800, env={**os.environ,
                                      "NICPICK": str(ROOT / "build" / "nicpick")})
    return re.findall(r"^FAILED (\S+)", p.stdout, re.M)


def main(names):
    for name in names or MUTATIONS:
        path, old, new, tests = MUTATIONS[name]
        src = (ROOT / path).read_text()
        if src.count(old) != 1:
            print(f"{name}: the code to mutate is not in {path} (once): update tests/mutate.py")
            continue
        (ROOT / path).write_text(src.replace(old, new))
        try:
            b = sh("make", "-s", "all", *[f"build/tests/{t.stem}" for t in
                                          sorted((ROOT / "tests" / "unit").glob("test_*.c"))])
            if b.returncode != 0:
                print(f"{name}: build failed: {b.stderr[-400:]}")
                continue
            caught = unit_failures() + pytest_failures(tests)
        finally:
            sh("git", "checkout", "--", path)
        print(f"{name}: " + (", ".join(caught) if caught else "NOT CAUGHT"), flush=True)
    sh("make", "-s", "all")


if __name__ == "__main__":
    main(sys.argv[1:])
