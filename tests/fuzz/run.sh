#!/bin/sh
# run.sh TARGET...: runs each libFuzzer target for FUZZ_SECONDS on its seeds
# (tests/fuzz/seeds/TARGET, read only) and a working corpus under BUILD, and prints its
# executions and the coverage reached.  Exits non-zero if any target found a crash; the
# input that did it is left in BUILD/fuzz/crash-TARGET-*.
set -u
BUILD=${BUILD:?}
S=${FUZZ_SECONDS:-60}
rc=0
for t in "$@"; do
  corpus="$BUILD/fuzz/corpus/$t"
  mkdir -p "$corpus"
  log="$BUILD/fuzz/$t.log"
  "$BUILD/fuzz/fuzz_$t" -max_total_time="$S" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$BUILD/fuzz/crash-$t-" "$corpus" "tests/fuzz/seeds/$t" >"$log" 2>&1
  status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1, features \2, corpus \3/p')
  if [ $status -ne 0 ]; then
    echo "FAIL fuzz_$t: exit $status after ${execs:-?} executions; see $log"
    grep -m1 -E 'ERROR|runtime error|SUMMARY' "$log" | sed 's/^/    /'
    rc=1
  else
    echo "ok fuzz_$t: ${execs:-?} executions in ${S} s, $cov"
  fi
done
exit $rc
