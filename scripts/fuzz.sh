#!/bin/sh
# Run each libFuzzer target for FUZZ_SECONDS (default 60), starting from its
# committed seeds (tests/fuzz/corpus/NAME) plus what earlier runs found
# (build/fuzz/corpus/NAME).  ASan, UBSan and leak checks are on.  Prints one
# line per target: execs, execs/s, corpus size and the verdict; a crash,
# leak or timeout leaves its input in build/fuzz/crashes/NAME/ and makes the
# script fail.  Usage: scripts/fuzz.sh [NAME...]  (default: every target)
set -u
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
bin=${FUZZ_BUILD:-build/fuzz}
targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's,.*/fuzz_,,; s,\.c$,,')}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fail=0
printf '%-10s %12s %10s %7s  %s\n' target execs execs/s corpus result
for t in $targets; do
	[ -x "$bin/fuzz_$t" ] || { echo "nicpick: fuzz target $bin/fuzz_$t not built (make FUZZ=1 fuzz-build)" >&2; exit 2; }
	work=$bin/corpus/$t crash=$bin/crashes/$t log=$bin/log/$t.log
	mkdir -p "$work" "$crash" "$(dirname "$log")"
	# -max_len: the largest input each reader takes, plus room to overflow it.
	case $t in
	report) max=20000 ;; decision) max=65536 ;; snapshot|ipjson) max=65536 ;;
	watch) max=8192 ;; *) max=4096 ;;
	esac
	"$bin/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -max_len=$max \
		-print_final_stats=1 -artifact_prefix="$crash/" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	size=$(ls "$work" | wc -l)
	if [ $rc -eq 0 ]; then res=ok; else
		res="FAILED (rc $rc): $(grep -m1 -E 'ERROR:|fuzz property failed|runtime error' "$log") — see $log"
		fail=1
	fi
	printf '%-10s %12s %10s %7s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$size" "$res"
done
exit $fail
