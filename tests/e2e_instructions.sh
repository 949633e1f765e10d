#!/bin/bash
# The instruction budget of a small HTTP/2 response: callgrind counts the user-space
# instructions the daemon spends per request while one h2c connection asks for a 1 KiB
# file 2000 times, one request after the other (so no batching can move the count), and
# the figure may not grow by more than BUDGET_PCT percent over the one recorded in
# tests/data/instructions.tsv.  Instruction counts do not depend on the machine's load,
# so this is a test and not a benchmark; the clock-driven housekeeping (the workers'
# once-a-second tick) is left out of the figure, since its share grows with wall time.
#
#   tests/e2e_instructions.sh            the check (make test runs it)
#   tests/e2e_instructions.sh --record   measure three times and write the median as the
#                                        new figure: for a change meant to cost more (or
#                                        that made requests cheaper), committed with it
#
# Only the default build (gcc, CFLAGS -O2 -g, no sanitizer) has a figure: another
# build's count says nothing about the code, and the check says so and counts nothing.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
RECORD=tests/data/instructions.tsv
BUDGET_PCT=3
SHAPE="-c 1 -m 1 -n 2000"

environment() {
  printf 'build\t%s\n' "$(sed 's#-I[^ ]*/gen ##' "$BUILD/flags" 2>/dev/null)"
  printf 'compiler\t%s\n' "$(${CC:-cc} --version 2>/dev/null | head -1)"
  printf 'libnghttp2\t%s\n' "$(dpkg-query -W -f='${Version}' libnghttp2-14 2>/dev/null)"
  printf 'libc\t%s\n' "$(dpkg-query -W -f='${Version}' libc6 2>/dev/null)"
  printf 'valgrind\t%s\n' "$(valgrind --version 2>/dev/null)"
}

measure() { # -> "requests_only own allocs"
  local line
  line=$(loadtest/instructions --bin "$H2PARK" $SHAPE --quiet 2>"$TMP/instructions.err" | tail -n 1)
  echo "$line" | tr ' ' '\n' | awk -F= '{ v[$1] = $2 } END { if (v["requests_only"] != "") printf "%.0f %.0f %.2f\n", v["requests_only"], v["own"], v["allocs"] }'
}

if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  fail instructions_per_request "valgrind is not installed (scripts/ensure-deps.sh test installs it)"
  exit 0
fi

if [ "${1:-}" = --record ]; then
  figures=$(for i in 1 2 3; do measure; done | sort -n)
  [ "$(echo "$figures" | wc -l)" = 3 ] || { echo "e2e_instructions: a run failed: $(cat "$TMP/instructions.err")" >&2; exit 1; }
  set -- $(echo "$figures" | sed -n 2p)
  { echo "# Written by tests/e2e_instructions.sh --record: user-space instructions per request,"
    echo "# h2load $SHAPE of a 1 KiB file over h2c, one worker; the build and libraries it was measured with."
    printf 'instructions\t%s\nown\t%s\nallocations\t%s\n' "$1" "$2" "$3"
    environment
  } > "$RECORD"
  echo "recorded $1 instructions per request (h2park's own $2, $3 allocations) in $RECORD"
  exit 0
fi

recorded() { sed -n "s/^$1\t//p" "$RECORD"; }
[ -f "$RECORD" ] || { fail instructions_per_request "no $RECORD: record one with tests/e2e_instructions.sh --record"; exit 0; }
if [ "$(environment | sed -n 's/^build\t//p')" != "$(recorded build)" ]; then
  echo "  instructions_per_request: not checked: $BUILD was built as '$(environment | sed -n 's/^build\t//p')', the figure is for '$(recorded build)'"
  exit 0
fi

set -- $(measure)
if [ $# != 3 ]; then
  fail instructions_per_request "the callgrind run failed: $(tail -5 "$TMP/instructions.err")"
  exit 0
fi
want=$(recorded instructions)
pct=$(awk -v a="$1" -v b="$want" 'BEGIN { printf "%+.1f", (a - b) * 100 / b }')
echo "  instructions per request: $1 (recorded $want, $pct%), h2park's own $2 (recorded $(recorded own)), allocations $3 (recorded $(recorded allocations))"
if awk -v a="$1" -v b="$want" -v p=$BUDGET_PCT 'BEGIN { exit !(a > b * (1 + p / 100)) }'; then
  sed -n '/^compiler\t/,$p' "$RECORD" > "$TMP/env.recorded"
  environment | sed -n '/^compiler\t/,$p' > "$TMP/env.now"
  changed=$(diff "$TMP/env.recorded" "$TMP/env.now" | sed -n 's/^> //p' | tr '\t\n' ' ;')
  fail instructions_per_request "$1 instructions per request, $pct% over the recorded $want (budget +$BUDGET_PCT%).${changed:+ The toolchain differs from the one recorded ($changed) - if that is the cause, re-record.} See where they go with loadtest/instructions $SHAPE --top 40 (and --by-file); if the cost is meant, run tests/e2e_instructions.sh --record and commit $RECORD with the reason"
else
  ok instructions_per_request
  if awk -v a="$1" -v b="$want" -v p=$BUDGET_PCT 'BEGIN { exit !(a < b * (1 - p / 100)) }'; then
    echo "  instructions_per_request: $pct% under the recorded figure - record the lower one (tests/e2e_instructions.sh --record) so the budget follows it"
  fi
fi
