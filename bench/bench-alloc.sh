#!/bin/bash
# bench-alloc.sh: every allocator measurement in one run, printed as docs/performance.md's tables
# (Markdown) and kept in $BUILD/bench/alloc-report.md with the raw figures beside it.
#   instructions: callgrind, each loop between client requests, the empty loop subtracted
#   time: best-median of 5 runs; size-specialized on and off are two builds of one file
# Peers: glibc, and jemalloc (preloaded: it cannot be dlopened), mimalloc and tcmalloc
# where installed.  Usage: bench/bench-alloc.sh [--quick]
set -eu
BUILD=${BUILD:-build}
ON=$BUILD/bench/bench_alloc
OFF=$BUILD/nospec/bench/bench_alloc
OUT=$BUILD/bench
mkdir -p "$OUT"
RAW=$OUT/alloc-raw.tsv
REPORT=$OUT/alloc-report.md
STEP=10001
[ "${1:-}" = --quick ] && STEP=100003
: > "$RAW"
JEMALLOC=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -1 || true)
PEERS="glibc mimalloc tcmalloc"

echo "timing (on, off, peers)..." >&2
"$ON" time $PEERS >> "$RAW"
"$OFF" time | grep -v empty-loop >> "$RAW"
[ -n "$JEMALLOC" ] && LD_PRELOAD=$JEMALLOC "$ON" time jemalloc | grep -P '^time\tjemalloc' >> "$RAW"

echo "instructions (callgrind)..." >&2
cg() { # cg NAME BINARY ALLOC [preload]
  local dir; dir=$(mktemp -d)
  env ${4:+LD_PRELOAD=$4} valgrind --tool=callgrind --callgrind-out-file="$dir/cg" "$2" instr "$3" >/dev/null 2>&1 || true
  for f in "$dir"/cg.*; do
    [ -f "$f" ] || continue
    label=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
    total=$(sed -n 's/^summary: //p; s/^totals: //p' "$f" | head -1)
    set -- $label
    printf 'instr\t%s\t%s\t%s\t%s\t%s\n' "$([ "$1" = sc ] && echo "$1" || echo "$1")" "$2" "$3" "$4" "$total"
  done | sed "s/^instr\tsc\t/instr\t$1\t/" >> "$RAW"
  rm -rf "$dir"
}
cg sc-on "$ON" sc
cg sc-off "$OFF" sc
for p in $PEERS; do cg "$p" "$ON" "$p"; done
[ -n "$JEMALLOC" ] && cg jemalloc "$ON" jemalloc "$JEMALLOC"

echo "RSS per object..." >&2
"$ON" rss $PEERS >> "$RAW"
[ -n "$JEMALLOC" ] && LD_PRELOAD=$JEMALLOC "$ON" rss jemalloc | grep -P '^rss\tjemalloc' >> "$RAW"
echo "growth (step $STEP)..." >&2
"$ON" growth "$STEP" >> "$RAW"

text_on=$(size -A "$BUILD/h2park" | awk '$1 == ".text" { print $2 }')
text_off=$(size -A "$BUILD/nospec/h2park" | awk '$1 == ".text" { print $2 }')

awk -F'\t' -v text_on="$text_on" -v text_off="$text_off" -v cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" '
function fmt(x) { return x == "" ? "-" : x }
function onoff(kind, title,   s, a, b, x, y) {
  print "\n" title "\n"
  print "| size | instr on | instr off | instr delta | ns on | ns off | ns delta |"
  print "|---:|---:|---:|---:|---:|---:|---:|"
  for (s = 1; s <= 16; s++) {
    a = ins["sc-on", sz[s], kind] - empty; b = ins["sc-off", sz[s], kind] - empty
    x = t["sc-on", sz[s], kind]; y = t["sc-off", sz[s], kind]
    printf "| %s | %.1f | %.1f | %+.0f%% | %.2f | %.2f | %+.0f%% |\n", sz[s], a, b, b ? 100 * (a - b) / b : 0, x, y, y ? 100 * (x - y) / y : 0
  }
}
$1 == "time" { t[$2, $3, $4] = $5; if ($2 != "empty-loop") { seen[$2] = 1 } ; if ($3 + 0 > 0) sizes[$3] = 1 }
$1 == "instr" {
  if ($2 == "empty-loop") { empty = $6 / $5; next }
  ins[$2, $3, $4] = $6 / $5; seen[$2] = 1
}
$1 == "rss" { rss[$2, $3] = $4; seen[$2] = 1 }
$1 == "growth" { g[++ng] = $0 }
END {
  n = split("sc-on sc-off glibc jemalloc mimalloc tcmalloc", order, " ")
  ns = split("4 8 12 16 24 32 48 64 80 88 96 112 128 144 192 256 1024 4096 16384 32768 65536 262144", sz, " ")
  hdr = "| size |"; sep = "|---:|"
  for (i = 1; i <= n; i++) if (seen[order[i]]) { hdr = hdr " " order[i] " |"; sep = sep "---:|"; cols[++nc] = order[i] }
  printf "Machine: %s, 2 cores. Instructions from callgrind (empty loop subtracted); time: median of 5 runs.\n\n", cpu
  for (pass = 1; pass <= 4; pass++) {
    kind = (pass % 2) ? "pair" : "batch"
    if (pass == 1) print "**Instructions per malloc+free pair (alloc, then free at once)**\n"
    if (pass == 2) print "\n**Instructions per allocation (malloc+free) in batches of 1000**\n"
    if (pass == 3) print "\n**ns per malloc+free pair**\n"
    if (pass == 4) print "\n**ns per allocation (malloc+free) in batches of 1000**\n"
    print hdr; print sep
    for (s = 1; s <= ns; s++) {
      line = "| " sz[s] " |"
      for (c = 1; c <= nc; c++) {
        if (pass <= 2) { v = ins[cols[c], sz[s], kind]; if (v != "") v = sprintf("%.1f", v - (kind == "pair" ? empty : 2 * empty)) }
        else { v = t[cols[c], sz[s], kind]; if (v != "") v = sprintf("%.1f", v) }
        line = line " " fmt(v) " |"
      }
      print line
    }
  }
  onoff("pair", "**Size-specialized malloc, on vs off, malloc+free pair**")
  onoff("malloc", "**Size-specialized malloc, on vs off: the malloc alone (the mallocs of the batches, frees not counted)**")
  printf "\n`.text` of build/h2park: %d bytes with size-specialized malloc, %d without (%+d bytes, %+.2f%%).\n", text_on, text_off, text_on - text_off, 100 * (text_on - text_off) / text_off
  print "\n**RSS per live object, 1,000,000 objects**\n"
  print "| allocator | 24 B | 100 B | 4 B | 1..15 B in turn |"; print "|---|---:|---:|---:|---:|"
  m = split("sc glibc jemalloc mimalloc tcmalloc", ra, " ")
  for (i = 1; i <= m; i++) if (rss[ra[i], 24] != "")
    printf "| %s | %.2f | %.2f | %.2f | %.2f |\n", ra[i], rss[ra[i], 24], rss[ra[i], 100], rss[ra[i], 4], rss[ra[i], "1-15"]
  print "\n**Growth policies: append one byte at a time to every target from 320 KiB to 16 MiB**\n"
  print "| policy | targets | reallocations | bytes allocated | mean tail waste | time (ms) |"; print "|---|---:|---:|---:|---:|---:|"
  for (i = 1; i <= ng; i++) { split(g[i], f, "\t"); printf "| %s | %d | %d | %.0f MiB | %.0f KiB | %.0f |\n", f[2], f[7], f[3], f[4] / 1048576, f[5] / 1024, f[6] }
}' "$RAW" | tee "$REPORT"
