#!/bin/bash
# On the GPU machine (see ../shared/DEVICE.md; with one GPU both ranks share
# GPU 0, each with its own NCCL_HOSTID, as in the other scripts): two network
# namespaces stand in for two nodes, each with a decoy cni0 bridge at the
# same address (10.244.0.1) and one real link between them.  nicpick decides
# in each namespace; then a torch all-reduce runs once with nicpick's
# nccl.conf (NCCL_CONF_FILE) and once with NCCL's default choice.  Prints
# what NCCL used and the all-reduce time, asserts both outcomes (exit: the
# number of failures); logs go to $OUT.
#
#   NICPICK=path/to/nicpick IP=path/to/ip PYTHON=python3 OUT=dir tests/gpu/decoy_allreduce.sh
set -u
: "${NICPICK:?}" "${IP:?}" "${PYTHON:?}" "${OUT:?}"
ip() { "$IP" "$@"; }
A=npa-$$ B=npb-$$
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; }
trap cleanup EXIT
. "$(dirname "$0")/nodes.sh"
make_nodes || exit 1
sleep 2

select_alone "$OUT"
for ns in "$A" "$B"; do
	echo "nicpick in $ns: $(grep NCCL_SOCKET_IFNAME "$OUT/$ns/nccl.conf" 2>/dev/null || echo "no nccl.conf, see $OUT/$ns.select.log")"
done

cat >"$OUT/allreduce.py" <<'PY'
import os, sys, time, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="tcp://10.9.0.1:29511", rank=rank, world_size=2)
n = 16 << 20  # 64 MiB of float32
x = torch.full((n,), float(rank + 1), device="cuda")
dist.all_reduce(x); torch.cuda.synchronize()
ok = bool((x == 3.0).all())
x.fill_(rank + 1)
t = time.time()
for _ in range(10):
    dist.all_reduce(x)
torch.cuda.synchronize()
dt = (time.time() - t) / 10
busbw = 4 * n / dt * 2 * (2 - 1) / 2 / 1e9
if rank == 0:
    print(f"sums {'exact' if ok else 'WRONG'}; 64 MiB all-reduce {dt*1e3:.1f} ms, busbw {busbw:.2f} GB/s", flush=True)
dist.destroy_process_group()
PY

run() { # label: "nicpick" (each rank with its node's nccl.conf) or "default"
	local label=$1
	for r in 0 1; do
		ns=$([ $r = 0 ] && echo "$A" || echo "$B")
		conf=NICPICK_UNUSED=1
		[ "$label" = nicpick ] && conf="NCCL_CONF_FILE=$OUT/$ns/nccl.conf"
		gpu=0; [ "$NGPU" -ge 2 ] && gpu=$r
		ip netns exec "$ns" env CUDA_VISIBLE_DEVICES=$gpu NCCL_HOSTID=node$r RANK=$r \
			NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 \
			NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$conf" \
			timeout 90 "$PYTHON" "$OUT/allreduce.py" >"$OUT/$label.rank$r.log" 2>&1 &
	done
	wait
	echo "== $label"
	grep -h "NET/Socket : Using\|Bootstrap : Using\|Connection refused" "$OUT/$label".rank*.log |
		sed 's/^[^A-Z]*\(NCCL INFO \)\?//' | sort | uniq -c | head -5
	grep -h "all-reduce" "$OUT/$label.rank0.log" || echo "  no result within 90 s (see $label.rank*.log)"
}
fails=0
run nicpick
grep -q "sums exact" "$OUT/nicpick.rank0.log" && echo "PASS: with nicpick's nccl.conf: exact sums" ||
	{ echo "FAIL: with nicpick's nccl.conf: no exact result"; fails=$((fails + 1)); }
run default
grep -q "all-reduce" "$OUT/default.rank0.log" &&
	{ echo "FAIL: NCCL's default choice completed (the decoy did not bite)"; fails=$((fails + 1)); } ||
	echo "PASS: NCCL's default choice gave no result"
exit $fails
