#!/bin/bash
# On the GPU machine: the whole select flow with real NCCL.  Two network
# namespaces are two nodes (one GPU each, or both ranks on GPU 0 with
# different NCCL_HOSTID); each has a decoy cni0 bridge at 10.244.0.1, a
# management link to a switch, and the fast veth link between them.  The
# test API server (tools/kubeapi) runs in a third namespace on the switch.
# Every pod runs `nicpick select --peers k8s --smoke required`.
#
# Cases, each asserted; the script exits with the number that failed:
#   pass      both pods exit 0; decision.json says passed, exact sums, and
#             NCCL's own log names each pod's agreed interface
#   slow      the fast link throttled with tc tbf: both exit 6, "slow network"
#   missing   one pod dies right after the agreement (at its smoke step):
#             the other exits 6 in init, before its deadline
#   reference torch/NCCL with no NCCL_SOCKET_IFNAME in the same topology
#             gives no result (NCCL's default choice)
# Figures (time to verdict, busbw) are printed; logs go to $OUT.
#
#   NICPICK=build/nicpick IP=ip TC=tc PYTHON=python3 OUT=dir tests/gpu/smoke_k8s.sh
set -u
: "${NICPICK:?}" "${IP:?}" "${TC:?}" "${PYTHON:?}" "${OUT:?}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ip() { "$IP" "$@"; }
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
A=npka-$$ B=npkb-$$ S=npks-$$
fails=0
APIPID=
cleanup() {
	stop_api
	for ns in "$A" "$B" "$S"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
. "$(dirname "$0")/nodes.sh"
make_nodes || exit 1
make_switch || exit 1
sleep 2

# The API server, in its own namespace.
start_api "$OUT" 2 900 || exit 1
seed() { seed_pods "$OUT" "$1" 2; } # job name: two pods of an Indexed Job

# pod R of job J in its node; extra args follow; env SMOKE_BIN_1 replaces pod 1's companion
pod() {
	local job=$1 r=$2; shift 2
	local ns=$A; [ "$r" = 1 ] && ns=$B
	local gpu=0; [ "$NGPU" -ge 2 ] && gpu=$r
	local bin=; [ "$r" = 1 ] && bin=${SMOKE_BIN_1:-}
	mkdir -p "$OUT/$job" ${FAKEGPU_DIR:+"$FAKEGPU_DIR/$job"}
	ip netns exec "$ns" env -i PATH="$PATH" HOME=/root LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
		CUDA_VISIBLE_DEVICES=$gpu NCCL_HOSTID=node$r NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
		NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 ${bin:+NICPICK_SMOKE_BIN=$bin} \
		${NICPICK_NCCL_LIB:+NICPICK_NCCL_LIB=$NICPICK_NCCL_LIB} ${NICPICK_CUDART_LIB:+NICPICK_CUDART_LIB=$NICPICK_CUDART_LIB} \
		${FAKEGPU_DIR:+FAKEGPU_DIR=$FAKEGPU_DIR/$job} \
		timeout 200 "$NICPICK" select --peers k8s --smoke required --cidr 10.9.0.0/24 --expect 2 \
		--api-server "$URL" --ca-file "$OUT/api/ca.crt" --token-file "$OUT/token-$r" \
		--namespace train --pod-name "$job-$r" --out-dir "$OUT/$job/out-$r" --log-interval 5 "$@" \
		>/dev/null 2>"$OUT/$job/pod-$r.log"
}


# -- pass
seed job-pass
t0=$(date +%s.%N)
pod job-pass 0 --timeout 120 & p0=$!
pod job-pass 1 --timeout 120 & p1=$!
wait $p0; e0=$?; wait $p1; e1=$?
echo "pass: both pods done in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s (agreement, probe, smoke)"
check "pass pod 0" 0 $e0 "smoke all-reduce passed" "$OUT/job-pass/pod-0.log"
check "pass pod 1" 0 $e1 "smoke all-reduce passed" "$OUT/job-pass/pod-1.log"
for r in 0 1; do
	"$PYTHON" - "$OUT/job-pass/out-$r/decision.json" <<'PY' || fails=$((fails + 1))
import json, sys
d = json.load(open(sys.argv[1]))
s, c = d["smoke"], d["choice"]
used = [e["interface"] for e in s["nccl_log"]["net_socket"]]
ok = s["status"] == "passed" and s["correct"] and used == [c["interface"]] \
    and s["nccl_log"]["bootstrap"]["interface"] == c["interface"]
z = s["sizes"][-1]
print(f"{'PASS' if ok else 'FAIL'}: rank {s['rank']}/{s['world']} on {c['interface']} ({c['address']}): "
      f"NCCL {s['nccl']['version']} used {used}, bootstrap {s['nccl_log']['bootstrap']['interface']}; "
      f"{z['bytes'] >> 20} MiB busbw {z['busbw_gbps']:.2f} GB/s; init {s['init_ms']} ms; "
      f"verdict {s['time_to_verdict_ms']} ms; GPU {s['gpu']['model']}, CUDA {s['cuda']['driver']}")
sys.exit(0 if ok else 1)
PY
done

# -- slow: 2 Gbit/s on the fast link, a threshold above it
seed job-slow
ip netns exec "$A" "$TC" qdisc add dev va root tbf rate 2gbit burst 256kb latency 50ms
ip netns exec "$B" "$TC" qdisc add dev vb root tbf rate 2gbit burst 256kb latency 50ms
pod job-slow 0 --timeout 120 --min-busbw 1 --smoke-bytes 16M & p0=$!
pod job-slow 1 --timeout 120 --min-busbw 1 --smoke-bytes 16M & p1=$!
wait $p0; e0=$?; wait $p1; e1=$?
check "slow pod 0" 6 $e0 "slow network" "$OUT/job-slow/pod-0.log"
check "slow pod 1" 6 $e1 "slow network" "$OUT/job-slow/pod-1.log"
[ -e "$OUT/job-slow/out-0/nccl.env" ] && { echo "FAIL: slow left outputs"; fails=$((fails + 1)); }
grep -h "error:" "$OUT/job-slow/pod-0.log"
ip netns exec "$A" "$TC" qdisc del dev va root; ip netns exec "$B" "$TC" qdisc del dev vb root

# -- missing: pod 1 dies at its smoke step, right after the agreement
seed job-miss
# the real companion answers `info` (before the report); `run` kills nicpick
cat >"$OUT/die-companion" <<SH
#!/bin/sh
[ "\$1" = run ] && { kill -9 \$PPID; exit 1; }
exec "$(dirname "$NICPICK")/nicpick-smoke" "\$@"
SH
chmod +x "$OUT/die-companion"
t0=$(date +%s)
pod job-miss 0 --timeout 120 --smoke-timeout 20 & p0=$!
SMOKE_BIN_1=$OUT/die-companion pod job-miss 1 --timeout 120 --smoke-timeout 20 & p1=$!
wait $p0; e0=$?; wait $p1; e1=$?
dt=$(( $(date +%s) - t0 ))
check "missing peer: pod 0 exits 6 in init" 6 $e0 "failed in init" "$OUT/job-miss/pod-0.log"
[ "$e1" = 137 ] || { echo "FAIL: pod 1 should have been killed (137), got $e1"; fails=$((fails + 1)); }
if [ $dt -lt 100 ]; then echo "PASS: missing peer: verdict after ${dt} s, deadline 120 s"; else echo "FAIL: missing peer took ${dt} s"; fails=$((fails + 1)); fi
grep -h "error:" "$OUT/job-miss/pod-0.log"

# -- reference: torch with NCCL's own interface choice, same topology
cat >"$OUT/ref.py" <<'PY'
import os, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="tcp://10.9.0.1:29512", rank=rank, world_size=2)
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x); torch.cuda.synchronize()
print("RESULT", float(x[0]), flush=True)
PY
for r in 0 1; do
	ns=$A; [ "$r" = 1 ] && ns=$B
	gpu=0; [ "$NGPU" -ge 2 ] && gpu=$r
	ip netns exec "$ns" env CUDA_VISIBLE_DEVICES=$gpu NCCL_HOSTID=node$r RANK=$r NCCL_P2P_DISABLE=1 \
		NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET \
		timeout 60 "$PYTHON" "$OUT/ref.py" >"$OUT/ref.$r.log" 2>&1 &
	refs="${refs:-} $!"
done
wait $refs
if grep -q RESULT "$OUT/ref.0.log"; then
	echo "FAIL: reference: NCCL's default choice completed (the decoy did not bite)"
	fails=$((fails + 1))
else
	echo "PASS: reference: NCCL's default choice gave no result within 60 s"
fi
grep -h "Bootstrap: Using\|Bootstrap : Using\|NET/Socket : Using" "$OUT"/ref.*.log | sed 's/^.*NCCL INFO //' | sort | uniq -c

echo "failures: $fails"
exit $fails
