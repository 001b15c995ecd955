"""Errors as kube-apiserver writes them: metav1.Status bodies with the real
reasons and messages."""

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}


class ApiError(Exception):
    def __init__(self, code, message, reason=None, details=None, headers=None):
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details, self.headers = details, headers or {}
        self.list_meta = {}

    def status(self):
        # Real: metav1.Status, fields in the order kube-apiserver's encoder emits them.
        st = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta),
              "status": "Failure",
              "message": self.message, "reason": self.reason}
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(res, name=None, **extra):
    d = {}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    d["kind"] = res.plural
    d.update(extra)
    return d


def not_found(res, name):
    return ApiError(404, f'{res.key} "{name}" not found', details=_details(res, name))


def already_exists(res, name):
    return ApiError(409, f'{res.key} "{name}" already exists', "AlreadyExists",
                    _details(res, name))


def conflict(res, name, why="the object has been modified; please apply your changes "
             "to the latest version and try again"):
    return ApiError(409, f'Operation cannot be fulfilled on {res.key} "{name}": {why}',
                    details=_details(res, name))


def invalid(res, name, causes):
    """Real: NewInvalid uses the Kind (not the resource) and lists causes."""
    msgs = [f"{f}: {m}" for f, m, _ in causes]
    msg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    det = {"name": name} if name else {}
    if res.group:
        det["group"] = res.group
    det["kind"] = res.kind
    det["causes"] = [{"reason": r, "message": m, "field": f} for f, m, r in causes]
    return ApiError(422, f'{res.kind} "{name}" is invalid: {msg}', "Invalid", det)


def expired(message):
    return ApiError(410, message, "Expired")


def forbidden(res, verb, user, ns, name, sub="", reason=""):
    """Real: k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.forbiddenMessage,
    with the authorizer's reason after a colon (ForbiddenStatusError)."""
    what = res.plural + ("/" + sub if sub else "")
    where = f'in the namespace "{ns}"' if ns else "at the cluster scope"
    why = f'User "{user}" cannot {verb} resource "{what}" in API group "{res.group}" {where}'
    if reason:
        why += ": " + reason
    head = f'{res.key} "{name}"' if name else res.key
    return ApiError(403, f"{head} is forbidden: {why}", details=_details(res, name))
