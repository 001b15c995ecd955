#!/bin/bash
# On the GPU machine: rails and --tune with real NCCL.  Two network
# namespaces are two nodes (one GPU each, or both ranks on GPU 0 with
# different NCCL_HOSTID), joined by TWO veth links, va/vb on 10.9.0.0/24
# and va2/vb2 on 10.10.0.0/24, each with a decoy cni0; a management link
# to a switch where the test API server runs (excluded from the choice:
# it is a veth of the same quality).  Two jobs:
#   one    select --rails 1 --tune on --smoke-bytes 256M
#   rails  select --rails auto --tune on --smoke-bytes 256M
# The smoke step measures NCCL's defaults at 1, 8, 64 and 256 MiB; the
# sweep measures every configuration at 64 MiB; then `nicpick smoke
# --out-dir` runs the written outputs (tuned or not) at the same sizes.
# Asserted (the script exits with the number that failed):
#   both jobs pass, the rails job lists both links in NCCL_SOCKET_IFNAME
#   and NCCL's log uses both; the sweep takes at most 15 s; what the
#   outputs give at 64 MiB is not below the defaults measured in the same
#   run (never worse); rails at 64 MiB at least 1.2x one link's defaults.
# Figures and the sweep tables go to stdout and $OUT/summary.txt.
#
#   NICPICK=build/nicpick IP=ip PYTHON=python3 OUT=dir tests/gpu/rails_tune.sh
set -u
: "${NICPICK:?}" "${IP:?}" "${PYTHON:?}" "${OUT:?}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ip() { "$IP" "$@"; }
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
A=npra-$$ B=nprb-$$ S=nprs-$$
W=$(mktemp -d)
fails=0
APIPID=
cleanup() {
	stop_api
	for ns in "$A" "$B" "$S"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
. "$(dirname "$0")/nodes.sh"
make_nodes || exit 1
ip link add va2 netns "$A" type veth peer name vb2 netns "$B"
ip -n "$A" addr add 10.10.0.1/24 dev va2; ip -n "$B" addr add 10.10.0.2/24 dev vb2
ip -n "$A" link set va2 up; ip -n "$B" link set vb2 up
make_switch || exit 1
sleep 2

start_api "$W" 2 900 || exit 1
seed() { seed_pods "$W" "$1" 2; }

# run R VERB ARGS...: nicpick in node R's namespace, as a pod's container would
run() {
	local r=$1; shift
	local ns=$A; [ "$r" = 1 ] && ns=$B
	local gpu=0; [ "$NGPU" -ge 2 ] && gpu=$r
	ip netns exec "$ns" env -i PATH="$PATH" HOME=/root LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
		CUDA_VISIBLE_DEVICES=$gpu NCCL_HOSTID=node$r NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
		NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 \
		${NICPICK_NCCL_LIB:+NICPICK_NCCL_LIB=$NICPICK_NCCL_LIB} ${NICPICK_CUDART_LIB:+NICPICK_CUDART_LIB=$NICPICK_CUDART_LIB} \
		${FAKEGPU_DIR:+FAKEGPU_DIR=$FAKEGPU_DIR} \
		timeout 200 "$NICPICK" "$@"
}

job() { # NAME RAILS: select on both pods, then smoke --out-dir on both
	local j=$1 rails=$2
	seed "$j"
	mkdir -p "$W/$j"
	for r in 0 1; do
		run $r select --peers k8s --smoke required --exclude mgmt0 --expect 2 --rails "$rails" \
			--tune on --tune-budget 15 --smoke-bytes "${BYTES:-256M}" --timeout 150 \
			--api-server "$URL" --ca-file "$W/api/ca.crt" --token-file "$W/token-$r" \
			--namespace train --pod-name "$j-$r" --out-dir "$W/$j/out-$r" --log-interval 5 \
			>/dev/null 2>"$W/$j/select-$r.log" &
		eval "p$r=\$!"
	done
	wait $p0; e0=$?; wait $p1; e1=$?
	check "$j: select pod 0" 0 $e0 "smoke all-reduce passed" "$W/$j/select-0.log"
	check "$j: select pod 1" 0 $e1 "smoke all-reduce passed" "$W/$j/select-1.log"
	for r in 0 1; do
		run $r smoke --out-dir "$W/$j/out-$r" --smoke-bytes "${BYTES:-256M}" --timeout 60 \
			>/dev/null 2>"$W/$j/smoke-$r.log" &
		eval "p$r=\$!"
	done
	wait $p0; e0=$?; wait $p1; e1=$?
	check "$j: smoke with the outputs, pod 0" 0 $e0
	check "$j: smoke with the outputs, pod 1" 0 $e1
}

job one 1
job rails auto

"$PYTHON" - "$W" "$NGPU" <<'PY' | tee "$W/summary.txt"
import json, os, sys
w, ngpu = sys.argv[1], int(sys.argv[2])
fails = 0
def dec(j, r):
    return json.load(open(f"{w}/{j}/out-{r}/decision.json"))
def sizes(s):
    return {z["bytes"] >> 20: z["busbw_gbps"] for z in s.get("sizes", [])}
def out_smoke(j, r, mib):
    # `nicpick smoke --out-dir` prints its verdict with busbw by size
    import re
    txt = open(f"{w}/{j}/smoke-{r}.log").read()
    m = re.search(r"by size: ([0-9., ]+) GB/s", txt)
    return dict(zip(mib, [float(x) for x in m.group(1).split(",")])) if m else {}
kind = "nvidia-h200-x2 (one GPU per node)" if ngpu >= 2 else "nvidia-h200 (both ranks on GPU 0)"
print(f"kind: {kind}")
res = {}
for j in ("one", "rails"):
    d = dec(j, 0)
    t = d.get("tune", {})
    s = d["smoke"]
    used = [e["interface"] for e in s.get("nccl_log", {}).get("net_socket", [])]
    dflt = sizes(s)
    res[j] = {"defaults": dflt, "outputs": out_smoke(j, 0, list(dflt)), "tune": t, "env": d["env"], "used": used}
    print(f"\n== {j}: NCCL_SOCKET_IFNAME={d['env'].get('NCCL_SOCKET_IFNAME')} "
          f"NCCL used {used}, NCCL {s.get('nccl', {}).get('version')}")
    print(f"defaults (smoke step) busbw GB/s by MiB: {res[j]['defaults']}")
    print(f"outputs as written ({'tuned ' + str(t.get('chosen')) if t.get('status') == 'tuned' else 'defaults'}) "
          f"busbw GB/s by MiB: {res[j]['outputs']}")
    print(f"sweep: {t.get('status')}: {t.get('reason')}; {len(t.get('table', []))} runs in "
          f"{t.get('sweep_ms', 0) / 1000:.1f} s at {t.get('bytes', 0) >> 20} MiB")
    print("| NCCL_SOCKET_NTHREADS | NCCL_NSOCKS_PERTHREAD | busbw GB/s | run s |")
    print("| --- | --- | --- | --- |")
    for row in t.get("table", []):
        print(f"| {row['nthreads'] or 'default'} | {row['nsocks_perthread'] or 'default'} | "
              f"{row['busbw_gbps']:.2f}{'' if row['ok'] else ' FAILED ' + row['why']} | {row['ms'] / 1000:.1f} |")
    if t.get("sweep_ms", 10**9) > 15000:
        print(f"FAIL: {j}: the sweep took {t.get('sweep_ms')} ms > 15 s"); fails += 1
    o, dflt = res[j]["outputs"].get(64), res[j]["defaults"].get(64)
    extra = [k for k in ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD") if k in res[j]["env"]]
    if not o or not dflt:
        print(f"FAIL: {j}: no figures"); fails += 1
    elif t.get("status") != "tuned":
        # never worse by construction: NCCL's defaults stand, nothing extra written
        ok = not extra
        print(f"{'PASS' if ok else 'FAIL'}: {j}: defaults stand, nothing extra written {extra or ''}"
              f"(outputs {o:.2f} GB/s at 64 MiB, the smoke step's defaults {dflt:.2f})")
        fails += not ok
    else:
        # what the written outputs give vs the defaults measured in the same run
        ok = o > dflt and len(extra) == 2
        print(f"{'PASS' if ok else 'FAIL'}: {j}: tuned outputs {o:.2f} GB/s at 64 MiB vs defaults {dflt:.2f}")
        fails += not ok
r_used = res["rails"]["used"]
ok = len(set(r_used)) == 2 and "," in res["rails"]["env"].get("NCCL_SOCKET_IFNAME", "")
print(f"\n{'PASS' if ok else 'FAIL'}: rails: NCCL_SOCKET_IFNAME={res['rails']['env'].get('NCCL_SOCKET_IFNAME')}, NCCL used {r_used}")
fails += not ok
one64 = res["one"]["defaults"].get(64, 0)
best_one = max(one64, res["one"]["outputs"].get(64, 0))
rails64 = max(res["rails"]["defaults"].get(64, 0), res["rails"]["outputs"].get(64, 0))
ratio = rails64 / one64 if one64 else 0
print(f"{'PASS' if ratio >= 1.2 else 'FAIL'}: rails {rails64:.2f} GB/s at 64 MiB = {ratio:.2f}x one link's defaults "
      f"{one64:.2f} (goal 1.2x); {rails64 / best_one if best_one else 0:.2f}x one link as written")
fails += ratio < 1.2
sys.exit(fails)
PY
fails=$((fails + ${PIPESTATUS[0]}))
tar -C "$W" -czf "$OUT/rails_tune.tgz" . 2>/dev/null
cp "$W/summary.txt" "$OUT/summary.txt"
rm -rf "$W"
echo "failures: $fails"
exit $fails
