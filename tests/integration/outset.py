"""The output set as nicpick writes it (lib/outputs/write.c):

    DIR/decision-ID/{nccl.env,nccl.conf,decision.json}   one set per decision
    DIR/current -> decision-ID                          the set in force
    DIR/nccl.env -> current/nccl.env (and the other two)
    DIR/.nicpick.lock                                   writers take turns on it

and the decision id each of the three files names."""
import json
import os
import re

OUT_FILES = ("nccl.env", "nccl.conf", "decision.json")
LOCK = ".nicpick.lock"
ID_LINE = re.compile(r"^# decision (\S+)$", re.M)


def ids(paths):
    """The decision id in each of nccl.env, nccl.conf, decision.json
    (None where the file is missing or names none)."""
    out = []
    for name, path in zip(OUT_FILES, paths):
        try:
            text = open(path).read()
        except FileNotFoundError:
            out.append(None)
            continue
        if name == "decision.json":
            out.append(json.loads(text).get("decision_id"))
        else:
            m = ID_LINE.search(text)
            out.append(m.group(1) if m else None)
    return out


def set_id(out_dir):
    """The id of the set in force, read through the documented paths; all
    three files must name it.  None when no set is in force."""
    got = ids([os.path.join(out_dir, f) for f in OUT_FILES])
    assert len(set(got)) == 1, f"{out_dir}: the three files name different decisions: {got}"
    return got[0]


def assert_one_set(out_dir, extra=()):
    """One whole set in force and nothing else left (a killed or earlier
    run's set, a temporary); returns its id."""
    d = str(out_dir)
    sid = set_id(d)
    assert sid, f"{d}: no set in force: {sorted(os.listdir(d))}"
    want = {*OUT_FILES, "current", LOCK, f"decision-{sid}", *extra}
    assert set(os.listdir(d)) == want, sorted(os.listdir(d))
    assert os.readlink(os.path.join(d, "current")) == f"decision-{sid}"
    for f in OUT_FILES:
        assert os.readlink(os.path.join(d, f)) == f"current/{f}", f
    return sid


def documented(out_dir):
    """The documented paths that exist (a dangling link does not)."""
    return {f for f in OUT_FILES if os.path.exists(os.path.join(str(out_dir), f))}
