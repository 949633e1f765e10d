#!/bin/bash
# bench-coro.sh: coroutine switch and spawn costs in ns (best of 5) and instructions
# (callgrind, between client requests), for the assembly switch, the ucontext build,
# Boost.Context's fcontext (where installed) and pthreads, in one run; the table goes to
# stdout and $BUILD/bench/coro-report.md.
set -eu
BUILD=${BUILD:-build}
OUT=$BUILD/bench
mkdir -p "$OUT"
RAW=$OUT/coro-raw.tsv
: > "$RAW"
for bin in "$BUILD/bench/bench_coro" "$BUILD/ucontext/bench/bench_coro"; do
  "$bin" time | grep -v '^#' >> "$RAW"
  dir=$(mktemp -d)
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg" "$bin" instr >/dev/null 2>&1 || true
  for f in "$dir"/cg.*; do
    [ -f "$f" ] || continue
    set -- $(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
    printf 'instr\t%s\t%s\t%s\n' "$1" "$2" "$(( $(sed -n 's/^summary: //p' "$f") / $3 ))" >> "$RAW"
  done
  rm -rf "$dir"
done
awk -F'\t' '
$1 == "time" { t[$2, $3] = $4; names[$2] = 1 }
$1 == "instr" { i[$2, $3] = $4 }
END {
  print "| switch | round trip (resume+yield) ns | instructions | spawn+run+destroy ns | instructions |"
  print "|---|---:|---:|---:|---:|"
  n = split("asm-x86_64 asm-aarch64 fcontext ucontext pthread", order, " ")
  for (k = 1; k <= n; k++) { s = order[k]; if (!names[s]) continue
    printf "| %s | %s | %s | %s | %s |\n", s, (t[s, "roundtrip"] != "" ? t[s, "roundtrip"] : "-"), (i[s, "roundtrip"] != "" ? i[s, "roundtrip"] : "-"),
      (t[s, "spawn"] != "" ? t[s, "spawn"] : "-"), (i[s, "spawn"] != "" ? i[s, "spawn"] : "-") }
}' "$RAW" | tee "$OUT/coro-report.md"

# Parking a suspended coroutine (coro_park/coro_unpark), against trimming the pages below
# its stack pointer and against a shared run stack that copies the live part at every
# switch.
"$BUILD/bench/bench_coro" park > "$OUT/coro-park.tsv"
{
  echo
  echo "| live frames (bytes) | park ns | unpark ns | bytes moved (heap object) | stack pages resident before / parked | trim below sp ns | pages kept by trimming | round trip ns | round trip with copy-on-switch ns |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '$1 == "park" { printf "| %s | %s | %s | %s | %s / %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$OUT/coro-park.tsv"
} | tee -a "$OUT/coro-report.md"
