#!/bin/bash
# bench-programs.sh [--quick] [--rounds N] [--only W,W...] [--allocs A,A...]: whole allocators compared by LD_PRELOAD on workloads and real
# programs - scalloc (build/libscalloc.so), glibc (nothing preloaded), jemalloc, mimalloc and
# tcmalloc (Debian's libraries, where installed).  Prints docs/performance.md's tables (Markdown)
# and keeps them in $BUILD/bench/programs-report.md, the raw figures in programs-raw.tsv.
#
# Workloads (bench/bench_workloads.c): larson, xmalloc-test, cache-scratch, glibc-simple,
# mstress; programs: python3 on tests/preload/alloc.py, gcc -O2 on a generated file
# (tests/preload/gen_c.py), redis-server driven by redis-benchmark (ops/s; the server's
# peak RSS), a threaded python3 job (tests/preload/threads.py), sqlite3 building an index on
# 1M generated rows in memory (Debian's sqlite3; skipped without it), and git gc --aggressive
# on a copy of the repository BENCH_GIT_REPO names (skipped without it: this repository's
# history is too short to say much; the docs' figures use redis's history up to its tag
# 3.0.0, 23,261 objects: git clone --bare --branch 3.0.0 --single-branch
# https://github.com/redis/redis redis.git).  python3 runs with
# PYTHONHASHSEED=0, as its string hashes, and so its dicts' sizes, change from run to run.  Every figure is the median of 5 runs, and the runs are interleaved: round
# after round, each workload under every allocator in turn (the order rotating), so a
# slow spell of a shared machine lands on all of them.  Time is wall-clock, CPU time user
# plus system (getrusage; redis-server's from /proc); RSS is the
# peak (getrusage's ru_maxrss of the process - of the largest process for gcc and git -,
# VmHWM of redis-server).  --quick: one round
# at small sizes, to check that everything runs.
set -eu
BUILD=${BUILD:-build}
ROUNDS=5 QUICK=0 ONLY= ONLY_ALLOCS=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) ROUNDS=1 QUICK=1 ;;
    --rounds) ROUNDS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --allocs) ONLY_ALLOCS=$2; shift ;;
    *) echo "usage: bench-programs.sh [--quick] [--rounds N] [--only W,W...] [--allocs A,A...]" >&2; exit 2 ;;
  esac
  shift
done
OUT=$BUILD/bench
mkdir -p "$OUT"
RAW=$OUT/programs-raw.tsv
REPORT=$OUT/programs-report.md
W=$BUILD/bench/bench_workloads
LIB=/usr/lib/$(gcc -print-multiarch)
TMP=$(mktemp -d)
RPID=
trap '[ -n "$RPID" ] && kill -9 "$RPID" 2>/dev/null; rm -rf "$TMP"' EXIT

declare -A PRE=([scalloc]=$PWD/$BUILD/libscalloc.so [glibc]=
  [jemalloc]=$LIB/libjemalloc.so.2 [mimalloc]=$LIB/libmimalloc.so.2 [tcmalloc]=$LIB/libtcmalloc_minimal.so.4)
# SCALLOC_BASE=path/libscalloc.so adds a column "scalloc-base": another build of the drop-in
# (the code before a change) run in the same rounds.  Variants (scalloc-*) are not
# counted for the best of a row.
ALLOCS=""
VARIANTS=
if [ -n "${SCALLOC_BASE:-}" ]; then PRE[scalloc-base]=$SCALLOC_BASE; VARIANTS="scalloc-base"; fi
for a in scalloc $VARIANTS glibc jemalloc mimalloc tcmalloc; do
  if [ -z "${PRE[$a]}" ] || [ -f "${PRE[$a]}" ]; then ALLOCS="$ALLOCS $a"; else echo "# $a: ${PRE[$a]} not found" >&2; fi
done
RUN_ALLOCS=$ALLOCS
[ -n "$ONLY_ALLOCS" ] && RUN_ALLOCS=$(echo "$ONLY_ALLOCS" | tr ',' ' ')
set -- $RUN_ALLOCS; NALLOC=$#

if [ $QUICK = 1 ]; then S=(5 1 5 1 5 1 150 2000 1 100000); else S=(200 20 100 10 100 3 700 200000 4 1000000); fi
PY=/usr/bin/python3
$PY tests/preload/gen_c.py "${S[6]}" > "$TMP/big.c"
WORKLOADS="larson xmalloc-test cache-scratch glibc-simple mstress python3 python3-threads gcc redis sqlite3 git-gc"
RUN_WORKLOADS=$WORKLOADS
[ -n "$ONLY" ] && RUN_WORKLOADS=$(echo "$ONLY" | tr ',' ' ')
# Rows that need what the repository does not carry: said, and left out.
skip_row() { echo "# $1: skipped ($2)" >&2; RUN_WORKLOADS=$(echo " $RUN_WORKLOADS " | sed "s/ $1 / /"); }
command -v sqlite3 > /dev/null || skip_row sqlite3 "no sqlite3: apt-get install sqlite3"
if [ -z "${BENCH_GIT_REPO:-}" ]; then skip_row git-gc "set BENCH_GIT_REPO to a git repository to copy and gc"
elif ! git -C "$BENCH_GIT_REPO" rev-parse --git-dir > /dev/null 2>&1; then skip_row git-gc "BENCH_GIT_REPO=$BENCH_GIT_REPO is no git repository"; fi
# The index sqlite3 builds: rows of a number and a 20-odd-byte text key, in memory.
cat > "$TMP/index.sql" <<SQL
CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${S[9]})
INSERT INTO t SELECT (x * 7919) % 1000003, printf('%08x-%d', (x * 2654435761) % 4294967296, x) FROM c;
CREATE INDEX tb ON t(b);
SELECT count(*) FROM t;
SQL

free_port() { echo $(( 20000 + (RANDOM * 7 + $$) % 20000 )); }

# measure WORKLOAD ALLOC: prints "wall_s rss_kb ops cpu_s" (ops only for redis)
measure() {
  local w=$1 pre=${PRE[$2]} line
  case $w in
    larson) line=$(LD_PRELOAD=$pre "$W" larson 2 "${S[0]}") ;;
    xmalloc-test) line=$(LD_PRELOAD=$pre "$W" xmalloc 2 "${S[1]}") ;;
    cache-scratch) line=$(LD_PRELOAD=$pre "$W" cache-scratch 2 "${S[2]}") ;;
    glibc-simple) line=$(LD_PRELOAD=$pre "$W" glibc-simple 1 "${S[3]}") ;;
    mstress) line=$(LD_PRELOAD=$pre "$W" mstress 2 "${S[4]}") ;;
    python3) line=$("$W" run env PYTHONHASHSEED=0 LD_PRELOAD="$pre" $PY tests/preload/alloc.py "${S[5]}" 2>&1 >/dev/null) ;;
    python3-threads) line=$("$W" run env PYTHONHASHSEED=0 LD_PRELOAD="$pre" $PY tests/preload/threads.py "${S[8]}" 2>&1 >/dev/null) ;;
    gcc) line=$("$W" run env LD_PRELOAD="$pre" gcc -O2 -c "$TMP/big.c" -o "$TMP/big.o" 2>&1 >/dev/null) ;;
    sqlite3) line=$("$W" run env LD_PRELOAD="$pre" sqlite3 :memory: -init "$TMP/index.sql" .quit 2>&1 >/dev/null) ;;
    git-gc)
      rm -rf "$TMP/gc.git"
      cp -r "$BENCH_GIT_REPO" "$TMP/gc.git"
      line=$("$W" run env LD_PRELOAD="$pre" git -C "$TMP/gc.git" gc -q $([ $QUICK = 1 ] || echo --aggressive) 2>&1 >/dev/null)
      rm -rf "$TMP/gc.git" ;;
    redis) measure_redis "$pre"; return ;;
  esac
  echo "$line" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } } END { print v["wall_s"], v["maxrss_kb"], "-", v["cpu_s"] }'
}

measure_redis() {
  local pre=$1 port i ops
  for attempt in 1 2 3; do
    port=$(free_port)
    LD_PRELOAD=$pre redis-server --port "$port" --save '' --appendonly no > "$TMP/redis.log" 2>&1 &
    RPID=$!
    for i in $(seq 1 50); do [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
    kill -0 "$RPID" 2>/dev/null && break
  done
  local t0 t1
  t0=$(date +%s.%N)
  redis-benchmark -p "$port" -q -n "${S[7]}" -r 100000 -c 50 -P 8 -t set,get,incr,lpush,rpop,sadd,hset,zadd,lrange_100,mset \
    > "$TMP/rbench.out" 2>&1
  t1=$(date +%s.%N)
  local hwm cpu
  hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$RPID/status")
  # utime and stime, fields 14 and 15 after the command name (which may hold spaces).
  cpu=$(sed 's/.*) //' "/proc/$RPID/stat" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / hz }')
  redis-cli -p "$port" SHUTDOWN NOSAVE > /dev/null 2>&1 || true
  wait "$RPID" 2>/dev/null || true
  RPID=
  # Requests per second over all the tests: total requests over the sum of their times.
  ops=$(tr '\r' '\n' < "$TMP/rbench.out" | grep 'requests per second' | sed 's/.*: \([0-9.]*\) requests per second.*/\1/' |
    awk -v n="${S[7]}" '$1 > 0 { t += n / $1; k++ } END { printf "%.0f", (t > 0 ? k * n / t : 0) }')
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $hwm $ops $cpu"
}

# Earlier figures of what runs now go; the rest stay for the tables.
touch "$RAW"
awk -F'\t' -v w=" $RUN_WORKLOADS " -v a=" $RUN_ALLOCS " '!(index(w, " " $1 " ") && index(a, " " $2 " "))' "$RAW" > "$TMP/raw"
cp "$TMP/raw" "$RAW"
for round in $(seq 1 "$ROUNDS"); do
  for w in $RUN_WORKLOADS; do
    set -- $RUN_ALLOCS
    first=$(( (round - 1) % NALLOC ))
    order="${*:first+1} ${*:1:first}"
    for a in $order; do
      echo "round $round/$ROUNDS: $w under $a" >&2
      printf '%s\t%s\t%s\n' "$w" "$a" "$(measure "$w" "$a" | tr ' ' '\t')" >> "$RAW"
    done
  done
done

awk -F'\t' -v allocs="$ALLOCS" -v workloads="$WORKLOADS" '
function median(list,   n, a, i, j, x) {
  n = split(list, a, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ t[$1, $2] = t[$1, $2] " " $3; r[$1, $2] = r[$1, $2] " " $4; o[$1, $2] = o[$1, $2] " " $5; n[$1, $2]++; has[$1] = 1
  if ($6 != "") c[$1, $2] = c[$1, $2] " " $6
  if (n[$1, $2] > runs) runs = n[$1, $2]; if (lo == "" || n[$1, $2] < lo) lo = n[$1, $2] }
END {
  na = split(allocs, A, " "); nw = split(workloads, Wl, " ")
  hdr = "| workload |"; sep = "|---|"
  for (i = 1; i <= na; i++) { hdr = hdr " " A[i] " |"; sep = sep "---:|" }
  printf "Median of %s interleaved runs; the best in each row in bold.\n\n", (lo == runs ? runs : lo "-" runs)
  print "**Time (s; redis: requests per second, higher is better)**\n"; print hdr " scalloc vs best |"; print sep "---:|"
  for (k = 1; k <= nw; k++) {
    w = Wl[k]; best = ""; line = "| " w " |"
    if (!has[w]) continue
    for (i = 1; i <= na; i++) {
      v[i] = !n[w, A[i]] ? "" : (w == "redis") ? median(o[w, A[i]]) : median(t[w, A[i]])
      if (v[i] != "" && A[i] !~ /^scalloc-/ && (best == "" || (w == "redis" ? v[i] > best : v[i] < best))) best = v[i]
    }
    for (i = 1; i <= na; i++) {
      f = (v[i] == "") ? "-" : (w == "redis") ? sprintf("%.0f", v[i]) : sprintf("%.3f", v[i])
      line = line " " (v[i] != "" && v[i] == best ? "**" f "**" : f) " |"
      if (A[i] == "scalloc") sc = v[i]
    }
    rel = (w == "redis") ? (best > 0 ? 100 * (best - sc) / best : 0) : (best > 0 ? 100 * (sc - best) / best : 0)
    print line " " (rel == 0 ? "best" : sprintf("%+.0f%%", (w == "redis") ? -rel : rel)) " |"
  }
  print "\n**CPU time (s, user + system; redis: the server'"'"'s)**\n"; print hdr " scalloc vs best |"; print sep "---:|"
  for (k = 1; k <= nw; k++) {
    w = Wl[k]; best = ""; line = "| " w " |"
    if (!has[w]) continue
    for (i = 1; i <= na; i++) {
      v[i] = (c[w, A[i]] == "") ? "" : median(c[w, A[i]])
      if (v[i] != "" && A[i] !~ /^scalloc-/ && (best == "" || v[i] < best)) best = v[i]
    }
    sc = ""
    for (i = 1; i <= na; i++) {
      f = (v[i] == "") ? "-" : sprintf("%.3f", v[i]); line = line " " (v[i] != "" && v[i] == best ? "**" f "**" : f) " |"
      if (A[i] == "scalloc") sc = v[i]
    }
    print line " " (sc == "" || best == "" || best == 0 ? "-" : sc == best ? "best" : sprintf("%+.0f%%", 100 * (sc - best) / best)) " |"
  }
  print "\n**Peak RSS (MiB)**\n"; print hdr " scalloc vs lowest |"; print sep "---:|"
  for (k = 1; k <= nw; k++) {
    w = Wl[k]; best = ""; line = "| " w " |"
    if (!has[w]) continue
    for (i = 1; i <= na; i++) {
      v[i] = !n[w, A[i]] ? "" : median(r[w, A[i]]) / 1024
      if (v[i] != "" && A[i] !~ /^scalloc-/ && (best == "" || v[i] < best)) best = v[i]
    }
    for (i = 1; i <= na; i++) {
      f = (v[i] == "") ? "-" : sprintf("%.1f", v[i]); line = line " " (v[i] != "" && v[i] == best ? "**" f "**" : f) " |"
      if (A[i] == "scalloc") sc = v[i]
    }
    print line " " (sc == best ? "lowest" : sprintf("%+.1f%%", 100 * (sc - best) / best)) " |"
  }
}' "$RAW" | tee "$REPORT"
