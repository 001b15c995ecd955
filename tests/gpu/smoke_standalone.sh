#!/bin/bash
# On the GPU machine: nicpick's smoke all-reduce with real NCCL, between two
# network namespaces that stand in for two nodes (each with a decoy cni0
# bridge at 10.244.0.1, one real veth link between them), without
# Kubernetes: `nicpick smoke --rank --world-size --comm-id`.  Works on one
# GPU (both ranks on GPU 0, different NCCL_HOSTID) or two.
#
# Cases, each asserted (the script exits non-zero when one fails):
#   pass      each rank with its node's nccl.env: exit 0, exact sums, NCCL
#             used the agreed interface (from its own log)
#   slow      the link throttled with tc tbf: exit 6 "slow network"
#   missing   rank 1 never starts: rank 0 exits 6 in init, before its deadline
#   comm-id   no NCCL_SOCKET_IFNAME: NCCL then picks the interface on
#             NCCL_COMM_ID's subnet (ncclFindInterfaces), so the agreed one:
#             exit 0, NCCL on va/vb despite the decoys
# Logs and NCCL's debug files go to $OUT.
#
#   NICPICK=build/nicpick IP=ip TC=tc OUT=dir tests/gpu/smoke_standalone.sh
set -u
: "${NICPICK:?}" "${IP:?}" "${TC:?}" "${OUT:?}"
ip() { "$IP" "$@"; }
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
A=npsa-$$ B=npsb-$$
fails=0
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; }
trap cleanup EXIT
. "$(dirname "$0")/nodes.sh"
make_nodes || exit 1
sleep 2

select_alone "$OUT" || { echo "FAIL: select"; cat "$OUT"/*.select.log; exit 1; }


# rank R in its namespace; $1 label, $2 rank, $3 "env" (source nccl.env) or "bare", rest: nicpick args
smoke() {
	local label=$1 r=$2 how=$3; shift 3
	local ns=$A; [ "$r" = 1 ] && ns=$B
	local gpu=0; [ "$NGPU" -ge 2 ] && gpu=$r
	local src=:; [ "$how" = env ] && src=". $OUT/$ns/nccl.env"
	ip netns exec "$ns" env -i PATH="$PATH" HOME=/root LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" CUDA_VISIBLE_DEVICES=$gpu NCCL_HOSTID=node$r \
		NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 \
		NICPICK_NCCL_LIB="${NICPICK_NCCL_LIB:-}" \
		sh -c "$src; exec timeout 120 \"\$0\" smoke --rank $r --world-size 2 --comm-id 10.9.0.1:29418 \"\$@\"" \
		"$NICPICK" "$@" >"$OUT/$label.rank$r.json" 2>"$OUT/$label.rank$r.log"
}

# pass: both ranks, the agreed interfaces, NCCL's log kept
mkdir -p "$OUT/pass0" "$OUT/pass1"
t0=$(date +%s.%N)
smoke pass 0 env --json --nccl-debug --out-dir "$OUT/pass0" & p0=$!
smoke pass 1 env --json --nccl-debug --out-dir "$OUT/pass1" & p1=$!
wait $p0; e0=$?; wait $p1; e1=$?
echo "pass: wall $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s"
check "pass rank 0" 0 $e0 "passed" "$OUT/pass.rank0.log"
check "pass rank 1" 0 $e1 "passed" "$OUT/pass.rank1.log"
cat "$OUT/pass.rank0.log"

# slow: 2 Gbit/s on both sides of the link, a threshold above it
ip netns exec "$A" "$TC" qdisc add dev va root tbf rate 2gbit burst 256kb latency 50ms
ip netns exec "$B" "$TC" qdisc add dev vb root tbf rate 2gbit burst 256kb latency 50ms
smoke slow 0 env --min-busbw 1 --smoke-bytes 16M & p0=$!
smoke slow 1 env --min-busbw 1 --smoke-bytes 16M & p1=$!
wait $p0; e0=$?; wait $p1; e1=$?
check "slow rank 0" 6 $e0 "slow network" "$OUT/slow.rank0.log"
cat "$OUT/slow.rank0.log"
ip netns exec "$A" "$TC" qdisc del dev va root; ip netns exec "$B" "$TC" qdisc del dev vb root

# missing: rank 1 never starts; rank 0 must give up at its smoke timeout
t0=$(date +%s)
smoke missing 0 env --smoke-timeout 15 --timeout 60; e0=$?
dt=$(( $(date +%s) - t0 ))
check "missing peer: rank 0 exits 6" 6 $e0 "init" "$OUT/missing.rank0.log"
[ $dt -lt 40 ] && echo "PASS: missing peer: verdict in ${dt} s (< 60 s deadline)" || { echo "FAIL: missing peer took ${dt} s"; fails=$((fails+1)); }
cat "$OUT/missing.rank0.log"

# comm-id: no NCCL_SOCKET_IFNAME; NCCL_COMM_ID's subnet steers NCCL's choice
smoke commid 0 bare --smoke-timeout 20 --interface va & p0=$!
smoke commid 1 bare --smoke-timeout 20 --interface vb & p1=$!
wait $p0; e0=$?; wait $p1; e1=$?
check "no NCCL_SOCKET_IFNAME: NCCL follows NCCL_COMM_ID to va" 0 $e0 "on va" "$OUT/commid.rank0.log"
check "no NCCL_SOCKET_IFNAME: NCCL follows NCCL_COMM_ID to vb" 0 $e1 "on vb" "$OUT/commid.rank1.log"

echo "failures: $fails"
exit $fails
