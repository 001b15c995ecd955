"""Merge patch (RFC 7386), JSON patch (RFC 6902) and a subset of strategic merge
patch."""

import copy

PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"]


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (null deletes a key, arrays are replaced)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# Real: patchMergeKey of the core/v1 and batch/v1 list fields nicpick's objects carry.
SMP_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
            "volumes": "name", "env": "name", "volumeMounts": "mountPath",
            "ports": "containerPort", "conditions": "type", "containerStatuses": "name",
            "initContainerStatuses": "name", "ephemeralContainerStatuses": "name",
            "ownerReferences": "uid", "imagePullSecrets": "name", "podIPs": "ip",
            "hostIPs": "ip", "readinessGates": "conditionType", "resourceClaims": "name"}
SMP_SETS = {"finalizers"}


def strategic_merge_patch(target, patch):
    """A subset of strategic merge patch: maps merge as in RFC 7386; lists with a known
    patchMergeKey merge by that key ($patch: delete removes an element); finalizers merge
    as a set; $patch: replace/delete on maps and $deleteFromPrimitiveList/ are honoured;
    other lists are replaced; other directives ($retainKeys, $setElementOrder) ignored."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            out[f] = [x for x in out.get(f) or [] if x not in v]
        elif k.startswith("$"):
            continue
        elif v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                out.pop(k, None)
            else:
                out[k] = strategic_merge_patch(out.get(k), v)
        elif isinstance(v, list) and isinstance(out.get(k), list) and k in SMP_KEYS:
            mk, merged = SMP_KEYS[k], [copy.deepcopy(x) for x in out[k]]
            for item in v:
                if not isinstance(item, dict) or mk not in item:
                    merged = copy.deepcopy(v)
                    break
                idx = next((i for i, x in enumerate(merged)
                            if isinstance(x, dict) and x.get(mk) == item[mk]), None)
                if item.get("$patch") == "delete":
                    if idx is not None:
                        del merged[idx]
                elif idx is None:
                    merged.append(strategic_merge_patch({}, item))
                else:
                    merged[idx] = strategic_merge_patch(merged[idx], item)
            out[k] = merged
        elif isinstance(v, list) and isinstance(out.get(k), list) and k in SMP_SETS:
            out[k] = list(out[k]) + [x for x in v if x not in out[k]]
        else:
            out[k] = copy.deepcopy(v)
    return out


def json_patch(doc, ops):
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    doc = copy.deepcopy(doc)

    def parse(ptr):
        if ptr == "":
            return []
        if not ptr.startswith("/"):
            raise ValueError(f"invalid JSON pointer {ptr!r}")
        return [p.replace("~1", "/").replace("~0", "~") for p in ptr[1:].split("/")]

    def walk(parts):
        cur = doc
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur, parts[-1]

    def get(parts):
        cur = doc
        for p in parts:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur

    def add(parts, val):
        parent, last = walk(parts)
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), val)
        else:
            parent[last] = val

    def remove(parts):
        parent, last = walk(parts)
        return parent.pop(int(last) if isinstance(parent, list) else last)

    if not isinstance(ops, list):
        raise ValueError("json patch must be a list of operations")
    for op in ops:
        kind, path = op.get("op"), parse(op.get("path", ""))
        try:
            if kind == "add":
                add(path, copy.deepcopy(op["value"]))
            elif kind == "remove":
                remove(path)
            elif kind == "replace":
                get(path)
                remove(path)
                add(path, copy.deepcopy(op["value"]))
            elif kind == "move":
                add(path, remove(parse(op["from"])))
            elif kind == "copy":
                add(path, copy.deepcopy(get(parse(op["from"]))))
            elif kind == "test":
                if get(path) != op.get("value"):
                    raise ValueError(f"testing value {op.get('path')} failed")
            else:
                raise ValueError(f"Unexpected kind: {kind}")
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{kind} operation does not apply: doc is missing path: "
                             f"\"{op.get('path')}\": missing value") from e
    return doc
