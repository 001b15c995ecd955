"""Authorization of resource requests."""

from .errors import forbidden


def rule_matches(rule, req):
    def ok(key, val):
        want = rule.get(key)
        return want is None or "*" in want or val in want
    res = req["resource"] + ("/" + req["subresource"] if req.get("subresource") else "")
    return (ok("verbs", req["verb"]) and ok("apiGroups", req["group"]) and
            (ok("resources", res)) and ok("namespaces", req["namespace"]) and
            ok("users", req["user"]) and
            (not rule.get("resourceNames") or req["name"] in rule["resourceNames"]))


class RbacMixin:
    """ApiServer's authorizer."""

    def authorize(self, req):
        with self.tokens_lock:
            deny, allow = self.rbac["deny"], self.rbac["allow"]
        if any(rule_matches(r, req) for r in deny) or \
                (allow is not None and not any(rule_matches(r, req) for r in allow)):
            raise forbidden(req["res"], req["verb"], req["user"], req["namespace"],
                            req["name"], req["subresource"])

    def set_rbac(self, rbac):
        with self.tokens_lock:
            self.rbac = {"deny": list(rbac.get("deny") or []), "allow": rbac.get("allow")}
