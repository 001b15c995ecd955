"""Label and field selectors, parsed and matched as k8s.io/apimachinery does."""

import re

from .errors import ApiError
from .resources import field_value

QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def qualified_name_error(key):
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not DNS1123.match(prefix)):
        return "prefix part a lowercase RFC 1123 subdomain must consist of lower case " \
               "alphanumeric characters, '-' or '.', and must start and end with an " \
               "alphanumeric character"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not QUALIFIED_NAME.match(name):
        return "name part must consist of alphanumeric characters, '-', '_' or '.', and " \
               "must start and end with an alphanumeric character (e.g. 'MyName',  or " \
               "'my.name',  or '123-abc', regex used for validation is " \
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    return None


class LabelSelector:
    """Real: k8s.io/apimachinery/pkg/labels.Parse. Terms are ANDed:
    k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k, k>N, k<N.
    Real: != and notin also match objects that do not have the key."""
    TOKEN = re.compile(r"\s*(!=|==|=|>|<|\(|\)|,|!|[^\s!=<>(),]+)")

    def __init__(self, text):
        self.reqs = []
        text = text or ""
        toks, pos = [], 0
        while pos < len(text):
            m = self.TOKEN.match(text, pos)
            if not m:
                if text[pos:].strip() == "":
                    break
                raise ApiError(400, f"unable to parse requirement: invalid label selector: {text!r}")
            toks.append(m.group(1))
            pos = m.end()
        i = 0

        def bad(why):
            return ApiError(400, f"unable to parse requirement: {why}")
        while i < len(toks):
            neg = toks[i] == "!"
            if neg:
                i += 1
            if i >= len(toks) or toks[i] in "!=,()<>" or toks[i] in ("==", "!="):
                raise bad(f"found '{toks[i] if i < len(toks) else ''}', expected: identifier")
            key = toks[i]
            err = qualified_name_error(key)
            if err:
                raise bad(f'key: Invalid value: "{key}": {err}')
            i += 1
            op, vals = ("!" if neg else "exists"), []
            if not neg and i < len(toks) and toks[i] != ",":
                op = toks[i]
                i += 1
                if op in ("in", "notin"):
                    if i >= len(toks) or toks[i] != "(":
                        raise bad("found '', expected: '('")
                    i += 1
                    while i < len(toks) and toks[i] != ")":
                        if toks[i] != ",":
                            vals.append(toks[i])
                        i += 1
                    if i >= len(toks):
                        raise bad("found '', expected: ')'")
                    i += 1
                elif op in ("=", "==", "!=", ">", "<"):
                    if i < len(toks) and toks[i] not in ",()":
                        vals.append(toks[i])
                        i += 1
                    else:
                        vals.append("")
                    if op in (">", "<") and not re.match(r"^-?\d+$", vals[0]):
                        raise bad("for 'Gt', 'Lt' operators, the value must be an integer")
                else:
                    raise bad(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
            for v in vals:
                if len(v) > 63 or not LABEL_VALUE.match(v):
                    raise bad(f'values[0][{key}]: Invalid value: "{v}": a valid label must '
                              "be an empty string or consist of alphanumeric characters, "
                              "'-', '_' or '.', and must start and end with an alphanumeric "
                              "character")
            self.reqs.append((key, op, vals))
            if i < len(toks):
                if toks[i] != ",":
                    raise bad(f"found '{toks[i]}', expected: ',' or 'end of string'")
                i += 1

    def matches(self, labels):
        labels = labels or {}
        for key, op, vals in self.reqs:
            have = key in labels
            v = labels.get(key)
            if op == "exists" and not have or op == "!" and have:
                return False
            if op in ("=", "==", "in") and (not have or v not in vals):
                return False
            if op in ("!=", "notin") and have and v in vals:
                return False
            if op in (">", "<"):
                try:
                    n = int(v)
                except (TypeError, ValueError):
                    return False
                if (op == ">" and not n > int(vals[0])) or (op == "<" and not n < int(vals[0])):
                    return False
        return True


class FieldSelector:
    """Real: k8s.io/apimachinery/pkg/fields.ParseSelector: k=v, k==v, k!=v, ANDed by
    commas; backslash escapes ',', '=', '!' and '\\'. Unknown labels are a 400."""

    def __init__(self, res, text):
        self.reqs = []
        for term in self._split(text or "", ","):
            if not term:
                continue
            m = re.match(r"^(.*?)(!=|==|=)(.*)$", term.replace("\\=", "\x00").replace("\\!", "\x01"))
            if not m:
                raise ApiError(400, f"invalid selector: '{text}'; can't understand '{term}'")
            key, op, val = (s.replace("\x00", "=").replace("\x01", "!").replace("\\\\", "\\")
                            for s in m.groups())
            if key not in res.fields:
                raise ApiError(400, f'field label not supported: {key}')
            self.reqs.append((key, op != "!=", val))

    @staticmethod
    def _split(text, sep):
        out, cur, esc = [], "", False
        for ch in text:
            if esc:
                cur += ("\\" + ch) if ch in "=!\\" else ch
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == sep:
                out.append(cur)
                cur = ""
            else:
                cur += ch
        out.append(cur)
        return out

    def exact(self, key):
        for k, eq, v in self.reqs:
            if k == key and eq:
                return v
        return None

    def matches(self, res, obj):
        return all((field_value(res, obj, k) == v) == eq for k, eq, v in self.reqs)
