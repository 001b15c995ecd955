"""Authorization of resource requests.

Two layers, applied in this order:
- injected rules (`set_rbac`): a request matching a `deny` rule, or, when `allow` is a
  list, matching no `allow` rule, is forbidden;
- with authorization mode "RBAC" (`--authorization-mode RBAC`), the stored Roles,
  ClusterRoles and their bindings, evaluated as kube-apiserver's RBAC authorizer does
  (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac). Users in SUPERUSERS stand for
  the system:masters group and are never checked.
"""

from .errors import ApiError, forbidden
from .resources import BY_PATH, RBAC

# Real: system:masters bypasses authorization; the tests' admin identity is in it.
SUPERUSERS = ("system:admin",)


def rule_matches(rule, req):
    def ok(key, val):
        want = rule.get(key)
        return want is None or "*" in want or val in want
    res = req["resource"] + ("/" + req["subresource"] if req.get("subresource") else "")
    return (ok("verbs", req["verb"]) and ok("apiGroups", req["group"]) and
            (ok("resources", res)) and ok("namespaces", req["namespace"]) and
            ok("users", req["user"]) and
            (not rule.get("resourceNames") or req["name"] in rule["resourceNames"]))


def policy_rule_allows(rule, req):
    """Real: rbac.RuleAllows (validation.go): verbs, apiGroups, resources (with `*` and
    `*/subresource`) and resourceNames; a rule with nonResourceURLs only matches none."""
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    if "*" not in verbs and req["verb"] not in verbs:
        return False
    if "*" not in groups and req["group"] not in groups:
        return False
    sub = req.get("subresource") or ""
    combined = req["resource"] + ("/" + sub if sub else "")
    if not any(r == "*" or r == combined or (sub and r == "*/" + sub)
               for r in rule.get("resources") or []):
        return False
    names = rule.get("resourceNames") or []
    return not names or req["name"] in names


def groups_of(user):
    """Real: the groups a service-account token authenticates with."""
    groups = ["system:authenticated"]
    if user.startswith("system:serviceaccount:"):
        ns = user.split(":")[2]
        groups += ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
    return groups


def subject_applies(subject, user, binding_ns):
    """Real: appliesToUser. A ServiceAccount subject without a namespace, in a
    RoleBinding, means the binding's own namespace."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups_of(user)
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return bool(ns) and user == f"system:serviceaccount:{ns}:{name}"
    return False


class RbacMixin:
    """ApiServer's authorizer."""

    def authorize(self, req):
        with self.tokens_lock:
            deny, allow = self.rbac["deny"], self.rbac["allow"]
        if any(rule_matches(r, req) for r in deny) or \
                (allow is not None and not any(rule_matches(r, req) for r in allow)):
            raise forbidden(req["res"], req["verb"], req["user"], req["namespace"],
                            req["name"], req["subresource"])
        if self.authorization == "RBAC" and req["user"] not in SUPERUSERS:
            allowed, errors = self.rbac_allows(req)
            if not allowed:
                # Real: errors met while looking (a binding to a missing role) are
                # the reason appended to the message, "RBAC: ..." (an Aggregate).
                reason = ""
                if errors:
                    reason = "RBAC: " + (errors[0] if len(errors) == 1 else
                                         "[" + ", ".join(errors) + "]")
                raise forbidden(req["res"], req["verb"], req["user"], req["namespace"],
                                req["name"], req["subresource"], reason)

    def rbac_allows(self, req):
        """Real: rbac.RBACAuthorizer.Authorize via VisitRulesFor: cluster role bindings
        first, then the role bindings of the request's namespace."""
        user, ns, errors = req["user"], req["namespace"], []
        store = self.store

        def rules_of(ref, binding_ns):
            kind, name = ref.get("kind"), ref.get("name", "")
            if kind == "ClusterRole":
                role = store.get(BY_PATH[RBAC, "clusterroles"], "", name)
                what = "clusterrole"
            else:
                role = store.get(BY_PATH[RBAC, "roles"], binding_ns, name)
                what = "role"
            if role is None:
                errors.append(f'{what}.{RBAC} "{name}" not found')
                return []
            return role.get("rules") or []

        with store.lock:
            bindings = [(b, "") for b in store.items(BY_PATH[RBAC, "clusterrolebindings"])]
            if ns:
                bindings += [(b, ns) for b in store.items(BY_PATH[RBAC, "rolebindings"], ns)]
            for b, bns in bindings:
                if not any(subject_applies(s, user, bns) for s in b.get("subjects") or []):
                    continue
                if any(policy_rule_allows(r, req) for r in rules_of(b.get("roleRef") or {},
                                                                     bns)):
                    return True, []
        return False, errors

    @staticmethod
    def check_mode(mode):
        if mode not in (None, "", "RBAC"):
            raise ApiError(400, f"unknown authorization mode {mode!r} (RBAC or none)")
        return mode or None

    def set_rbac(self, rbac):
        with self.tokens_lock:
            self.rbac = {"deny": list(rbac.get("deny") or []), "allow": rbac.get("allow")}


def load_manifests(path):
    """The objects of a YAML manifest (deploy/rbac.yaml, say), for `seed`. Needs
    PyYAML (python3-yaml); the server itself does not."""
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]
