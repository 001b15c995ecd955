# Sourced by the GPU scripts.
#
# make_nodes: two network namespaces $A and $B as two nodes,
# joined by one veth link (va 10.9.0.1 / vb 10.9.0.2), each with a decoy cni0
# bridge at the same address (10.244.0.1/24) that holds a veth pair, as a CNI
# leaves it.  Needs ip() defined and A, B set; the fast link is created first,
# so NCCL's default lists it before the decoy.
make_nodes() {
	ip netns add "$A" && ip netns add "$B" || return 1
	ip link add va netns "$A" type veth peer name vb netns "$B"
	ip -n "$A" addr add 10.9.0.1/24 dev va; ip -n "$B" addr add 10.9.0.2/24 dev vb
	for ns in "$A" "$B"; do
		ip -n "$ns" link set lo up
		ip -n "$ns" link add cni0 type bridge
		ip -n "$ns" addr add 10.244.0.1/24 dev cni0
		ip -n "$ns" link add vc0 type veth peer name vc1
		ip -n "$ns" link set vc0 master cni0
		for l in cni0 vc0 vc1; do ip -n "$ns" link set "$l" up; done
	done
	ip -n "$A" link set va up; ip -n "$B" link set vb up
}

# check NAME EXPECTED-EXIT ACTUAL-EXIT [PATTERN FILE]: a PASS/FAIL line;
# counts failures in $fails.
check() {
	if [ "$2" = "$3" ] && { [ $# -lt 5 ] || grep -q -- "$4" "$5"; }; then
		echo "PASS: $1 (exit $3)"
	else
		echo "FAIL: $1: expected exit $2${4:+ and /$4/}, got $3"
		fails=$((fails + 1))
	fi
}

# make_switch: namespace $S with a bridge br0 at 192.168.100.1/24, and in
# each of $A and $B a management port mgmt0 (192.168.100.11, .12) on it.
make_switch() {
	ip netns add "$S" || return 1
	ip -n "$S" link set lo up
	ip -n "$S" link add br0 type bridge; ip -n "$S" addr add 192.168.100.1/24 dev br0; ip -n "$S" link set br0 up
	local i=11 ns
	for ns in "$A" "$B"; do
		ip link add mgmt0 netns "$ns" type veth peer name "p$i" netns "$S"
		ip -n "$ns" addr add 192.168.100.$i/24 dev mgmt0; ip -n "$ns" link set mgmt0 up
		ip -n "$S" link set "p$i" master br0; ip -n "$S" link set "p$i" up
		i=$((i + 1))
	done
}

# start_api DIR PODS LIFETIME: the test API server (tools/kubeapi) in $S on
# 192.168.100.1, its state in DIR/api (emptied first: a warm machine keeps
# /tmp, never read another run's server), one token per pod (tok-R, also
# written to DIR/token-R).  Needs ROOT and PYTHON, and the Python h2
# library: on the GPU machine, which has none, PYTHONPATH naming Debian's
# python3-h2, -hpack and -hyperframe unpacked.  Sets APIPID, URL, ADMIN.
start_api() {
	local d=$1 n=$2 life=$3 r
	rm -rf "$d/api"; mkdir -p "$d/api"
	"$PYTHON" -c "import json,sys; print(json.dumps({f'tok-{i}': 'system:serviceaccount:train:nicpick' for i in range(int(sys.argv[1]))}))" \
		"$n" >"$d/tokens.json"
	ip netns exec "$S" env PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m tools.kubeapi --state-dir "$d/api" \
		--listen 192.168.100.1 --san 192.168.100.1 --namespace train --tokens @"$d/tokens.json" \
		--max-lifetime "$life" >"$d/api.log" 2>&1 &
	APIPID=$!
	for _ in $(seq 100); do [ -f "$d/api/ready" ] && break; sleep 0.2; done
	[ -f "$d/api/ready" ] || { echo "FAIL: the API server did not start"; cat "$d/api.log"; return 1; }
	URL=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['url'])" "$d/api/ready")
	ADMIN=$(cat "$d/api/admin-token")
	for r in $(seq 0 $((n - 1))); do echo "tok-$r" >"$d/token-$r"; done
}

# stop_api: the server and, when ip is a shell function (then $! is the
# subshell that runs `ip netns exec`), the server under it.
stop_api() {
	[ -n "${APIPID:-}" ] || return 0
	pkill -P "$APIPID" 2>/dev/null
	kill "$APIPID" 2>/dev/null
	APIPID=
}

# seed_pods DIR JOB PODS [FILES]: PODS pods of the Indexed Job JOB in the
# server start_api DIR started.  With FILES (a directory), every pod is of
# the file-only pattern: an emptyDir at FILES/out-R for nicpick, and a
# training container that reads it through NCCL_CONF_FILE alone.
seed_pods() {
	ip netns exec "$S" "$PYTHON" - "$URL" "$ADMIN" "$1/api/ca.crt" "$2" "$3" "${4:-}" <<'PY'
import json, ssl, sys, urllib.request
url, admin, ca, job, n, files = sys.argv[1:]
def spec(i):
    if not files:
        return {"nodeName": f"node-{i}", "containers": [{"name": "main", "image": "x"}]}
    return {"nodeName": f"node-{i}",
            "initContainers": [{"name": "nicpick", "image": "nicpick",
                                "volumeMounts": [{"name": "nicpick", "mountPath": f"{files}/out-{i}"}]}],
            "containers": [{"name": "train", "image": "pytorch", "command": ["torchrun", "train.py"],
                            "env": [{"name": "NCCL_CONF_FILE", "value": "/nicpick/nccl.conf"}],
                            "volumeMounts": [{"name": "nicpick", "mountPath": "/nicpick"}]}],
            "volumes": [{"name": "nicpick", "emptyDir": {}}]}
pods = [{"metadata": {"name": f"{job}-{i}", "namespace": "train",
         "labels": {"batch.kubernetes.io/job-name": job, "job-name": job,
                    "batch.kubernetes.io/job-completion-index": str(i)}},
         "spec": spec(i), "status": {"phase": "Running"}} for i in range(int(n))]
req = urllib.request.Request(url + "/_admin/seed", json.dumps({"pods": pods}).encode(),
                             {"Authorization": "Bearer " + admin, "Content-Type": "application/json"})
urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca)).read()
PY
}

# select_alone DIR: `nicpick select --peers none --smoke off` in $A and in $B,
# outputs in DIR/<namespace>, logs beside them; 1 when either fails.
select_alone() {
	local ns rc=0
	for ns in "$A" "$B"; do
		ip netns exec "$ns" "$NICPICK" select --peers none --smoke off --out-dir "$1/$ns" \
			>"$1/$ns.select.log" 2>&1 || rc=1
	done
	return $rc
}
