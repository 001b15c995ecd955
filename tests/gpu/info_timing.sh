#!/bin/bash
# On the GPU machine: how long the versions step takes (`nicpick-smoke
# info`, which every pod runs before it agrees), wall and CPU, RUNS times,
# for each companion given; then the step-by-step breakdown of both ways
# to read the versions (tests/gpu/info_steps.c), and the info results of
# the driver-files path, the NVML path and the CUDA-runtime path side by
# side (they must carry the same fields).
#
#   SMOKE="old=path/nicpick-smoke new=path/nicpick-smoke" [RUNS=10] [SRC=.]
#     OUT=dir tests/gpu/info_timing.sh
#
# Each companion runs as it is (the driver's files and libcuda first:
# lib/gpu/procfs.c), with NICPICK_DRIVER_ROOT pointing nowhere (NVML), and
# with NICPICK_NVML_LIB pointing nowhere too (the runtime path).  With SRC
# (the source tree), lib/gpu is also compiled against the machine's real
# headers.  Exits non-zero when a companion's info fails, the paths'
# results differ or a compile fails.
set -u
: "${SMOKE:?}" "${OUT:?}"
RUNS=${RUNS:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0
fails=0
mkdir -p "$OUT"

cc -O1 -o "$OUT/info_steps" "$HERE/info_steps.c" -ldl || exit 1

# wall and CPU of one run: "wall_ms cpu_ms" (bash's times for the child)
one() {
	local rc w u s
	TIMEFORMAT='%R %U %S'
	{ time timeout 20 "$@" >"$OUT/last.json" 2>"$OUT/last.err"; } 2>"$OUT/t"
	rc=$?
	read -r w u s <"$OUT/t"
	awk -v w="$w" -v u="$u" -v s="$s" -v rc="$rc" 'BEGIN{printf "%.1f %.1f %d\n", w*1000, (u+s)*1000, rc}'
}

summary() { # label, then lines of "wall cpu rc"
	sort -n | awk -v l="$1" '{w[NR]=$1; c+=$2; cw+=$1; if ($3) bad++}
		END{printf "%-28s runs %d  wall ms: min %.1f median %.1f max %.1f  mean cpu %.1f ms  failed %d\n",
			l, NR, w[1], w[int((NR+1)/2)], w[NR], c/NR, bad+0}'
}

NO_DRV=NICPICK_DRIVER_ROOT=/nonexistent NO_NVML=NICPICK_NVML_LIB=/nonexistent/libnvidia-ml.so.1
for spec in $SMOKE; do
	name=${spec%%=*} bin=${spec#*=}
	for way in as-is nvml runtime; do
		case $way in
		as-is) env= ;;
		nvml) env=$NO_DRV ;;
		runtime) env="$NO_DRV $NO_NVML" ;;
		esac
		: >"$OUT/runs"
		for i in $(seq "$RUNS"); do
			one env $env CUDA_VISIBLE_DEVICES=0 "$bin" info --gpu 0 >>"$OUT/runs"
			cp "$OUT/last.json" "$OUT/info.$name.$way.json"
		done
		summary "$name ($way)" <"$OUT/runs"
		if ! grep -q '"ok":true' "$OUT/info.$name.$way.json"; then
			echo "FAIL: $name ($way): info did not pass:"; cat "$OUT/info.$name.$way.json" "$OUT/last.err"
			fails=$((fails + 1))
		fi
	done
	cat "$OUT/info.$name.as-is.json"
done

# The three paths of the last companion give the same result message.
last=${SMOKE##* }; last=${last%%=*}
for way in nvml runtime; do
	if cmp -s "$OUT/info.$last.as-is.json" "$OUT/info.$last.$way.json"; then
		echo "same result as-is and by the $way path ($last)"
	else
		echo "FAIL: as-is and the $way path differ ($last):"
		diff "$OUT/info.$last.as-is.json" "$OUT/info.$last.$way.json"
		fails=$((fails + 1))
	fi
done

# Which libraries the last companion's info opened as it is (the dynamic
# loader's own log): libcuda.so.1 alone where the driver's files settled
# it, libnvidia-ml.so.1 where NVML had to.
opened=$(LD_DEBUG=files CUDA_VISIBLE_DEVICES=0 timeout 20 "${SMOKE##*=}" info --gpu 0 2>&1 >/dev/null |
	grep -o 'file=[^ ]*\(libcuda\.so[^ ]*\|libnvidia-ml\.so[^ ]*\)' | sort -u | tr '\n' ' ')
echo "as-is, $last opened: ${opened:-neither libcuda nor NVML}"

echo "== breakdown (first run cold, then warm)"
for mode in cuda nvml cuda nvml; do
	CUDA_VISIBLE_DEVICES=0 timeout 20 "$OUT/info_steps" $mode ${CUDART:-} || fails=$((fails + 1))
done

# lib/gpu against the real nvml.h, cuda.h, cuda_runtime_api.h and nccl.h (-Werror):
# a prototype of gpu_api.h that drifted is a compile error here.
if [ -n "${SRC:-}" ] && [ -f /usr/local/cuda/include/nvml.h ]; then
	for f in "$SRC"/lib/gpu/*.c; do
		cc -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -D_GNU_SOURCE \
			-DNICPICK_REAL_GPU_HEADERS -I"$SRC/lib" -I/usr/local/cuda/include -c "$f" -o "$OUT/x.o" \
			&& echo "real headers: $(basename "$f") ok" || { echo "FAIL: $f against the real headers"; fails=$((fails + 1)); }
	done
fi
nvidia-smi --query-gpu=name,pci.bus_id,uuid,persistence_mode,driver_version --format=csv 2>&1
exit $fails
