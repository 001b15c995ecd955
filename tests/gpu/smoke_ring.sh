#!/bin/bash
# On the GPU machine: the slow-node verdict with real NCCL.  N network
# namespaces are N nodes (all ranks on GPU 0 with distinct NCCL_HOSTID on
# the one-GPU kind), each with a decoy cni0 bridge at 10.244.0.1, a fast
# port on a bridge in a switch namespace (10.9.0.0/24) and a management
# port on another (the test API server).  Every pod runs
# `nicpick select --peers k8s --smoke required`; lib/gpu/run.c times each
# ring link on its own and the verdict names the slow node.
#
# Every pod's training container reads nicpick's nccl.conf through
# NCCL_CONF_FILE alone (the file-only pattern), so every run also proves
# file delivery: the companion gets only NCCL_CONF_FILE, and NCCL's own log
# must show the agreed interface (fast0) for sockets and bootstrap.
#
# Cases for each N in $RING_SIZES (default "3 4"), each asserted; the script
# exits with the number that failed:
#   throttled node 1's fast port throttled to 2 Gbit/s both ways (tc tbf on
#             its side and on the switch's side of the veth): every pod
#             names node 1's pod (pod, node and address), within the
#             smoke deadline
#   healthy   $RUNS runs (default 5) without a throttle: every pod passes
#             and names nobody
# Printed per run: the links (GB/s each way), the time the link phases took
# on the slowest rank, and the time to verdict.  Logs go to $OUT.
#
#   NICPICK=build/nicpick IP=ip TC=tc PYTHON=python3 OUT=dir tests/gpu/smoke_ring.sh
set -u
: "${NICPICK:?}" "${IP:?}" "${TC:?}" "${PYTHON:?}" "${OUT:?}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ip() { "$IP" "$@"; }
RUNS=${RUNS:-5}
SMOKE_TIMEOUT=${SMOKE_TIMEOUT:-60}
S=npgs-$$
fails=0
APIPID=
NODES=
cleanup() {
	stop_api
	for ns in $NODES "$S"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
. "$(dirname "$0")/nodes.sh"

ip netns add "$S" || exit 1
ip -n "$S" link set lo up
ip -n "$S" link add brf type bridge; ip -n "$S" link set brf up
ip -n "$S" link add brm type bridge; ip -n "$S" addr add 192.168.100.1/24 dev brm; ip -n "$S" link set brm up
MAXN=0
for n in ${RING_SIZES:-3 4}; do [ "$n" -gt "$MAXN" ] && MAXN=$n; done
for i in $(seq 0 $((MAXN - 1))); do
	ns=npg$i-$$
	NODES="$NODES $ns"
	ip netns add "$ns" || exit 1
	ip -n "$ns" link set lo up
	ip link add fast0 netns "$ns" type veth peer name f$i netns "$S"
	ip -n "$ns" addr add 10.9.0.$((i + 1))/24 dev fast0
	ip link add mgmt0 netns "$ns" type veth peer name m$i netns "$S"
	ip -n "$ns" addr add 192.168.100.$((i + 11))/24 dev mgmt0
	ip -n "$ns" link add cni0 type bridge
	ip -n "$ns" addr add 10.244.0.1/24 dev cni0
	ip -n "$ns" link add vc0 type veth peer name vc1
	ip -n "$ns" link set vc0 master cni0
	for l in fast0 mgmt0 cni0 vc0 vc1; do ip -n "$ns" link set "$l" up; done
	ip -n "$S" link set f$i master brf; ip -n "$S" link set m$i master brm
	ip -n "$S" link set f$i up; ip -n "$S" link set m$i up
done
sleep 2

start_api "$OUT" "$MAXN" 1800 || exit 1
seed() { seed_pods "$OUT" "$1" "$2" "$OUT/$1"; } # job name, pods: file-only training containers

pod() { # job rank pods, extra args
	local job=$1 r=$2 n=$3; shift 3
	mkdir -p "$OUT/$job" ${FAKEGPU_DIR:+"$FAKEGPU_DIR/$job"}
	ip netns exec npg$r-$$ env -i PATH="$PATH" HOME=/root LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
		CUDA_VISIBLE_DEVICES=0 NCCL_HOSTID=node$r NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
		NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 \
		${NICPICK_NCCL_LIB:+NICPICK_NCCL_LIB=$NICPICK_NCCL_LIB} ${NICPICK_CUDART_LIB:+NICPICK_CUDART_LIB=$NICPICK_CUDART_LIB} \
		${FAKEGPU_DIR:+FAKEGPU_DIR=$FAKEGPU_DIR/$job} ${FAKEGPU_MODE:+FAKEGPU_MODE=$FAKEGPU_MODE} \
		${FAKEGPU_SLOW_RANK:+FAKEGPU_SLOW_RANK=$FAKEGPU_SLOW_RANK} ${FAKEGPU_LINK_GBPS:+FAKEGPU_LINK_GBPS=$FAKEGPU_LINK_GBPS} \
		timeout "${POD_LIMIT:-200}" "$NICPICK" select --peers k8s --smoke required --cidr 10.9.0.0/24 --expect "$n" \
		--api-server "$URL" --ca-file "$OUT/api/ca.crt" --token-file "$OUT/token-$r" \
		--namespace train --pod-name "$job-$r" --out-dir "$OUT/$job/out-$r" --log-interval 5 \
		--timeout "${POD_TIMEOUT:-150}" --smoke-timeout "$SMOKE_TIMEOUT" ${SMOKE_ARGS:-} "$@" >/dev/null 2>"$OUT/$job/pod-$r.log"
}

job() { # job pods: every pod at once; exit codes in $codes
	local j=$1 n=$2 pids= r
	seed "$j" "$n"
	for r in $(seq 0 $((n - 1))); do pod "$j" "$r" "$n" & pids="$pids $!"; done
	codes=
	for p in $pids; do wait "$p"; codes="$codes $?"; done
}

# verdict JOB PODS WANT: WANT is "" (nobody named) or the rank of the slow
# node; prints the figures, returns 1 on a mismatch
verdict() {
	"$PYTHON" - "$OUT/$1" "$2" "$3" "$SMOKE_TIMEOUT" <<'PY'
import json, sys
d, n, want, deadline = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
bad = 0
links_ms, verdict_ms = [], []
for r in range(n):
    try:
        s = json.load(open(f"{d}/out-{r}/decision.json"))["smoke"]
    except Exception as e:
        print(f"  FAIL: pod {r}: no decision.json ({e})"); bad += 1; continue
    L = s.get("links", {})
    named = [x["rank"] for x in L.get("named", [])]
    labels = [x["label"] for x in L.get("named", [])]
    links_ms.append(L.get("time_ms", -1)); verdict_ms.append(s["time_to_verdict_ms"])
    exp = [] if want == "" else [int(want)]
    log = s.get("nccl_log", {})
    used = [e["interface"] for e in log.get("net_socket", [])]
    boot = log.get("bootstrap", {}).get("interface")
    dl = s.get("delivery", {})
    ok = s["status"] == "passed" and named == exp and len(L.get("ring", [])) == n \
        and dl.get("tested") == "file" and used == ["fast0"] and boot == "fast0"
    if exp:
        ok = ok and f"-{want} (node node-{want}, 10.9.0.{int(want) + 1})" in labels[0] \
            and s["time_to_verdict_ms"] < deadline * 1000
    if r == 0 or not ok:
        # '*': a link that looked slow, or the fastest, timed again (median of 3)
        figs = ", ".join(f"{l['from']}>{l['to']} {l['gbps']:.2f} {l['to']}>{l['from']} {l['back_gbps']:.2f}"
                         f"{'*' if l.get('rechecked') else ''}" for l in L.get("ring", []))
        print(f"  {'PASS' if ok else 'FAIL'}: pod {r}: {s['status']}, {dl.get('tested')} delivery, "
              f"NCCL used {used}, bootstrap {boot}; named {labels or 'nobody'}; "
              f"links GB/s {figs}; busbw {s['sizes'][-1]['busbw_gbps']:.2f} GB/s at "
              f"{s['sizes'][-1]['bytes'] >> 20} MiB; NCCL {s['nccl']['version']}")
    bad += not ok
print(f"  link phases {max(links_ms)} ms (slowest rank, rechecks included), verdict {max(verdict_ms)} ms")
sys.exit(1 if bad else 0)
PY
}

throttled() { # n
	local n=$1 j=ring$1-slow
	ip netns exec npg1-$$ "$TC" qdisc add dev fast0 root tbf rate 2gbit burst 256kb latency 50ms
	ip netns exec "$S" "$TC" qdisc add dev f1 root tbf rate 2gbit burst 256kb latency 50ms
	job "$j" "$n"
	echo "ring of $n, node 1 at 2 Gbit/s: exits$codes"
	verdict "$j" "$n" 1 || { echo "FAIL: ring of $n throttled"; fails=$((fails + 1)); }
	grep -h "slow node" "$OUT/$j/pod-0.log" | head -1
	ip netns exec npg1-$$ "$TC" qdisc del dev fast0 root
	ip netns exec "$S" "$TC" qdisc del dev f1 root
}

healthy() { # n run
	local n=$1 j=ring$1-ok$2
	job "$j" "$n"
	echo "ring of $n, healthy, run $2: exits$codes"
	verdict "$j" "$n" "" || { echo "FAIL: ring of $n healthy run $2"; fails=$((fails + 1)); }
}

# The throttled cases first, then the healthy runs taking turns: a run cut
# short by its time limit still has some of each.
for n in ${RING_SIZES:-3 4}; do throttled "$n"; done
for run in $(seq 1 "$RUNS"); do
	for n in ${RING_SIZES:-3 4}; do healthy "$n" "$run"; done
done

echo "failures: $fails"
exit $fails
