"""The command line: python3 -m tools.kubeapi --state-dir DIR [options]."""

import argparse
import json
import os
import signal
import sys
import threading

from .core import ApiServer
from .errors import ApiError


def _json_arg(text):
    if text.startswith("@"):
        with open(text[1:]) as f:
            return json.load(f)
    return json.loads(text)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python3 -m tools.kubeapi", description="Test Kubernetes API server (pods, events, namespaces, "
        "batch/v1 jobs; watch, selectors, patches, fault injection). See README.md.")
    ap.add_argument("--listen", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    ap.add_argument("--state-dir", required=True, help="where ca.crt, token, admin-token, "
                    "kubeconfig, serviceaccount/ and ready are written")
    ap.add_argument("--san", action="append", default=[], help="extra certificate SAN "
                    "(IP or DNS name); repeatable")
    ap.add_argument("--token", help="the default bearer token (random if not given)")
    ap.add_argument("--user", default="system:serviceaccount:default:default",
                    help="identity of the default token")
    ap.add_argument("--tokens", type=_json_arg, help='more tokens: JSON {"token": "user"} '
                    "or @file")
    ap.add_argument("--admin-token", help="token for /_admin (random if not given)")
    ap.add_argument("--namespace", default="default", help="namespace written to "
                    "kubeconfig and serviceaccount/namespace")
    ap.add_argument("--history", type=int, default=5000, help="watch history length in "
                    "events (default 5000); older resourceVersions get 410 Expired")
    ap.add_argument("--bookmark-interval", type=float, default=None,
                    help="seconds between BOOKMARK events (default 60, as kube-apiserver's "
                    "bookmarkFrequency)")
    ap.add_argument("--watch-timeout", type=float, default=1800.0,
                    help="watch duration when the client gives no timeoutSeconds")
    ap.add_argument("--fault", action="append", type=_json_arg, default=[],
                    help="a fault as JSON (see README); repeatable")
    ap.add_argument("--rbac", type=_json_arg, help='RBAC rules: JSON {"deny": [...], '
                    '"allow": [...]} or @file')
    ap.add_argument("--compact-interval", type=float, default=0.0,
                    help="compact the watch history every S seconds, keeping the last "
                    "interval, as kube-apiserver compacts etcd (default 0: never)")
    ap.add_argument("--authorization-mode", choices=["RBAC"], help="RBAC: enforce the "
                    "stored Roles, ClusterRoles and bindings (seed them with --seed)")
    ap.add_argument("--history-seconds", type=float, default=None,
                    help="also drop watch history older than S seconds, as the watch "
                    "cache keeps 75 s (eventFreshDuration; the default); 0: no time limit")
    ap.add_argument("--anonymous-auth", action="store_true", default=None, help="a request without a "
                    "token is system:anonymous and gets 403, as kube-apiserver's default "
                    "(without it: 401, as --anonymous-auth=false)")
    ap.add_argument("--graceful-delete", action="store_true", default=None, help="delete scheduled pods "
                    "gracefully: deletionTimestamp, removal after the grace period")
    ap.add_argument("--realistic-pods", action="store_true", default=None, help="created pods carry "
                    "managedFields, full defaults and a running status, as a real pod")
    ap.add_argument("--managed-fields-opt-out", action="store_true", default=None,
                    help="honour Accept's drop=metadata.managedFields, as kube-apiserver "
                    "with the ManagedFieldsOptOut feature gate (alpha, v1.38; default: "
                    "the parameter is ignored, as without the gate)")
    ap.add_argument("--no-event-namespace-rule", action="store_false", default=None,
                    dest="event_namespace_rule", help="accept a core/v1 Event without "
                    "eventTime and involvedObject.namespace in any namespace (real: only "
                    "in default, legacyValidateEvent)")
    ap.add_argument("--no-http2", action="store_false", default=None, dest="http2",
                    help="serve HTTP/1.1 only: ALPN offers no h2 (real: "
                    "--disable-http2-serving); default: h2 and http/1.1, as kube-apiserver")
    ap.add_argument("--seed", type=lambda p: _json_arg("@" + p), dest="seed_file", metavar="FILE",
                    help="JSON file of objects to create at start (see README)")
    ap.add_argument("--seed-json", type=_json_arg, help=argparse.SUPPRESS)
    ap.add_argument("--max-lifetime", type=float, default=0,
                    help="exit after this many seconds (0: never)")
    ap.add_argument("--lifeline-stdin", action="store_true",
                    help="exit when standard input reaches EOF (parent died)")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    a = ap.parse_args(argv)
    if a.seed_file is not None and not isinstance(a.seed_file, dict):
        ap.error("--seed wants a JSON object")
    seed = a.seed_json or {}
    if a.seed_file:
        seed = dict(seed, **a.seed_file)
    try:
        api = ApiServer(a.state_dir, a.listen, a.port, a.san, a.token, a.user, a.tokens,
                        a.admin_token, a.history, a.bookmark_interval, a.watch_timeout,
                        a.fault, a.rbac, seed, a.verbose, namespace=a.namespace,
                        authorization=a.authorization_mode,
                        compact_interval=a.compact_interval,
                        anonymous_auth=a.anonymous_auth, graceful_delete=a.graceful_delete,
                        history_seconds=a.history_seconds, realistic_pods=a.realistic_pods,
                        event_namespace_rule=a.event_namespace_rule,
                        managed_fields_opt_out=a.managed_fields_opt_out,
                        http2=a.http2).start()
    except (ApiError, RuntimeError, OSError) as e:
        print(f"kubeapi: {e}", file=sys.stderr)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    if a.lifeline_stdin:
        def lifeline():
            try:   # raw reads: a thread blocked in sys.stdin would stall interpreter exit
                while os.read(0, 4096):
                    pass
            except OSError:
                pass
            done.set()
        threading.Thread(target=lifeline, daemon=True).start()
    print(f"READY port={api.port} url={api.url} kubeconfig={api.kubeconfig_path}", flush=True)
    done.wait(a.max_lifetime if a.max_lifetime > 0 else None)
    api.stop()
    return 0
