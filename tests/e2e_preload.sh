#!/bin/bash
# The drop-in malloc (build/libscalloc.so) under real Debian programs: each runs once as
# it is and once with LD_PRELOAD, and the two outputs must be the same; SCALLOC_STATS
# (alloc/report.c) must show that the preloaded run's allocations reached the heap (a
# line per process, with its object count).  Then the corners a preloaded malloc meets
# (tests/preload_corners.c), and jemalloc's smallest objects handed to the drop-in's realloc.
# Sanitizer builds have no .so and skip all of it.
#   python3   tests/preload/alloc.py         strings, dicts, JSON, regular expressions
#   gcc       tests/preload/gen_c.py output  cc1 and as on a large file; objects identical
#   g++       tests/preload/gen_cxx.py output cc1plus on templates and containers; objects identical
#   xz        -T2 on generated text          the same stream compressed by two threads, and back
#   python3   tests/preload/threads.py       four threads; objects freed by other threads
#   python3   tests/preload/fork_threads.py  30 forks while four threads allocate
#   node      tests/preload/alloc.js         objects, Maps, JSON, Buffers, zlib
#   C++       tests/preload/new_handler.cc   the new_handler through every form of new
#   git       a clone of this repository     log -p, gc, fsck, log -p again
#   perl      tests/preload/alloc.pl         hashes, sort, regular expressions
#   sqlite3   tests/preload/workload.sql     CTE, index, joins, windows, VACUUM
#   nghttpd   served to h2load               both preloaded; every request answered
#   redis     driven by redis-benchmark      both preloaded; then a command script whose
#                                            replies must match a plain server's
. "$(dirname "$0")/lib.sh"
SO=$PWD/$BUILD/libscalloc.so
if [ "${SAN:-0}" != 0 ] || [ "${TSAN:-0}" != 0 ]; then
  echo "# e2e_preload: sanitizer builds have no libscalloc.so: skipped"
  exit 0
fi
PY=/usr/bin/python3       # Debian's, not whatever python3 comes first on PATH

pre() { # pre NAME CMD...: CMD under the drop-in, its processes' statistics in $TMP/NAME.stats
  local name=$1; shift
  LD_PRELOAD=$SO SCALLOC_STATS=$TMP/$name.stats "$@"
}

served() { # served NAME PROG MIN: some process PROG of run NAME made at least MIN allocations here
  awk -F'\t' -v prog="prog=$2" -v min="$3" '$1 == prog { split($3, m, "="); if (m[2] + 0 >= min) ok = 1 }
    END { exit !ok }' "$TMP/$1.stats" 2>/dev/null
}

same() { # same TEST NAME FILE-PLAIN FILE-PRELOADED PROG MIN
  if ! cmp -s "$3" "$4"; then
    fail "$1" "output differs under the preload: $(diff "$3" "$4" | head -5)"
  elif ! served "$2" "$5" "$6"; then
    fail "$1" "no $5 process with $6 allocations from scalloc: $(cat "$TMP/$2.stats" 2>/dev/null | head -3)"
  else
    ok "$1"
  fi
}

free_port() { echo $(( 20000 + (RANDOM * 7 + $$ + ${1:-0} * 131) % 20000 )); }

# --- the corners, first: if they fail the programs below will not say why ---
mkdir -p "$TMP/libs"
for i in $(seq 0 19); do cp "$BUILD/tests/libpreload_tls.so" "$TMP/libs/libpreload_tls$i.so"; done
out=$(LD_PRELOAD=$SO "$BUILD/tests/preload_corners" "$TMP/libs" 2>&1)
rc=$?
echo "$out" | grep -E '^(ok|FAIL) ' | sed 's/^ok /ok preload_corners: /; s/^FAIL /FAIL preload_corners: /'
[ $rc -eq 0 ] || echo "$out" | grep -q '^FAIL ' || fail preload_corners "exited with $rc: $(echo "$out" | tail -3)"
# Pointers of another allocator smaller than any of the heap's objects (jemalloc's, as in
# h2load and redis-server), handed to the drop-in's realloc.
JEMALLOC=/usr/lib/$(gcc -print-multiarch)/libjemalloc.so.2
out=$(LD_PRELOAD="$SO $JEMALLOC" "$BUILD/tests/preload_corners" --jemalloc 2>&1)
rc=$?
echo "$out" | grep -q '^ok foreign_small_realloc' && [ $rc -eq 0 ]
check foreign_small_realloc $? "exit $rc: $(echo "$out" | tail -3)"

# --- python3 ---
$PY tests/preload/alloc.py 2 > "$TMP/py.plain" 2>&1
pre py $PY tests/preload/alloc.py 2 > "$TMP/py.pre" 2>&1
same python3_alloc_heavy py "$TMP/py.plain" "$TMP/py.pre" python3 50000

# --- gcc: the same object file from a large source ---
$PY tests/preload/gen_c.py 300 > "$TMP/big.c"
gcc -O2 -g -c "$TMP/big.c" -o "$TMP/big.plain.o" 2>"$TMP/gcc.err"
pre gcc gcc -O2 -g -c "$TMP/big.c" -o "$TMP/big.pre.o" 2>>"$TMP/gcc.err"
same gcc_large_file gcc "$TMP/big.plain.o" "$TMP/big.pre.o" cc1 20000

# --- g++: the same object file from a large C++ source (templates, the standard library) ---
$PY tests/preload/gen_cxx.py 20 > "$TMP/big.cc"
g++ -O1 -c "$TMP/big.cc" -o "$TMP/bigxx.plain.o" 2>"$TMP/gxx.err"
pre gxx g++ -O1 -c "$TMP/big.cc" -o "$TMP/bigxx.pre.o" 2>>"$TMP/gxx.err"
same gxx_large_file gxx "$TMP/bigxx.plain.o" "$TMP/bigxx.pre.o" cc1plus 20000

# --- xz with two threads: the same compressed stream, and back ---
$PY -c 'import random; r = random.Random(25); print("\n".join(" ".join(r.choice(("alpha", "beta", "gamma", "delta", str(i))) for _ in range(12)) for i in range(150000)))' > "$TMP/xz.in"
xz -T2 --block-size=1MiB -6 -c "$TMP/xz.in" > "$TMP/xz.plain" 2>&1
pre xz xz -T2 --block-size=1MiB -6 -c "$TMP/xz.in" > "$TMP/xz.pre" 2>&1
pre xz xz -T2 -d -c "$TMP/xz.pre" > "$TMP/xz.back" 2>&1
if ! cmp -s "$TMP/xz.in" "$TMP/xz.back"; then fail xz_threads "decompressed stream differs"
else same xz_threads xz "$TMP/xz.plain" "$TMP/xz.pre" xz 100; fi

# --- threaded python: four threads, objects freed by threads other than their makers' ---
$PY tests/preload/threads.py 1 > "$TMP/pyt.plain" 2>&1
pre pyt $PY tests/preload/threads.py 1 > "$TMP/pyt.pre" 2>&1
same python3_threads pyt "$TMP/pyt.plain" "$TMP/pyt.pre" python3 5000

# --- fork under threads: children allocate whatever the parent's threads were doing ---
$PY tests/preload/fork_threads.py 30 > "$TMP/fork.plain" 2>&1
pre fork $PY tests/preload/fork_threads.py 30 > "$TMP/fork.pre" 2>&1
same python3_fork_under_threads fork "$TMP/fork.plain" "$TMP/fork.pre" python3 20000

# --- node: objects, strings, JSON, Buffers ---
node tests/preload/alloc.js 3 > "$TMP/node.plain" 2>&1
pre node node tests/preload/alloc.js 3 > "$TMP/node.pre" 2>&1
same node_alloc_heavy node "$TMP/node.plain" "$TMP/node.pre" node 2000

# --- C++: the new_handler through every operator new the drop-in defines ---
g++ -O2 -o "$TMP/new_handler" tests/preload/new_handler.cc 2>"$TMP/nh.err"
"$TMP/new_handler" > "$TMP/nh.plain" 2>&1
pre nh "$TMP/new_handler" > "$TMP/nh.pre" 2>&1
if [ ! -x "$TMP/new_handler" ]; then fail cxx_new_handler "g++: $(head -3 "$TMP/nh.err")"
else same cxx_new_handler nh "$TMP/nh.plain" "$TMP/nh.pre" new_handler 2; fi

# --- git: a real history (this repository's, else one made here) ---
REPO=$TMP/repo
if git -C . rev-parse --verify -q HEAD~20 >/dev/null 2>&1; then
  git clone -q --no-local . "$REPO" 2>/dev/null
else
  git init -q "$REPO"
  for i in $(seq 1 60); do
    seq "$i" 3 4000 | sed "s/\$/ line of commit $i/" > "$REPO/f$((i % 7)).txt"
    git -C "$REPO" add -A && git -C "$REPO" -c user.name=t -c user.email=t@t commit -qm "commit $i"
  done
fi
git -C "$REPO" log -p --stat > "$TMP/log.plain" 2>&1
pre git git -C "$REPO" log -p --stat > "$TMP/log.pre" 2>&1
same git_log_p git "$TMP/log.plain" "$TMP/log.pre" git 20000
pre gitgc git -C "$REPO" gc -q --prune=now > "$TMP/gc.out" 2>&1
gc_rc=$?
pre gitgc git -C "$REPO" fsck --full --strict > "$TMP/fsck.out" 2>&1
fsck_rc=$?
pre gitgc git -C "$REPO" log -p --stat > "$TMP/log.after-gc" 2>&1
if [ $gc_rc -ne 0 ] || [ $fsck_rc -ne 0 ]; then
  fail git_gc_fsck "gc $gc_rc, fsck $fsck_rc: $(head -3 "$TMP/gc.out" "$TMP/fsck.out")"
else
  same git_gc_fsck gitgc "$TMP/log.plain" "$TMP/log.after-gc" git 20000
fi

# --- perl ---
perl tests/preload/alloc.pl 1 > "$TMP/pl.plain" 2>&1
pre pl perl tests/preload/alloc.pl 1 > "$TMP/pl.pre" 2>&1
same perl_alloc_heavy pl "$TMP/pl.plain" "$TMP/pl.pre" perl 100000

# --- sqlite3 ---
sqlite3 < tests/preload/workload.sql > "$TMP/sql.plain" 2>&1
pre sql sqlite3 < tests/preload/workload.sql > "$TMP/sql.pre" 2>&1
same sqlite3_workload sql "$TMP/sql.plain" "$TMP/sql.pre" sqlite3 100000

# --- nghttpd served to h2load, both preloaded ---
mkdir -p "$TMP/site"
for i in $(seq 1 20); do head -c $((i * 3000)) /dev/urandom > "$TMP/site/f$i.bin"; done
for attempt in 1 2 3 4 5; do
  P=$(free_port $attempt)
  # Not through pre(): a backgrounded function is a subshell, whose pid is not nghttpd's,
  # and killing it left nghttpd running after the test (holding what the test held).
  LD_PRELOAD=$SO SCALLOC_STATS=$TMP/nghttpd.stats nghttpd -n 2 --no-tls -d "$TMP/site" "$P" > "$TMP/nghttpd.log" 2>&1 &
  NPID=$!; PIDS="$PIDS $NPID"
  # Up once it answers (a loaded machine may take seconds); gone, it is tried on another port.
  up=""
  for i in $(seq 1 300); do
    curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$P/f1.bin" && { up="attempt $attempt"; break; }
    kill -0 $NPID 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$up" ] && break
  kill $NPID 2>/dev/null; wait $NPID 2>/dev/null
done
urls=$(for i in $(seq 1 20); do printf 'http://127.0.0.1:%s/f%s.bin ' "$P" "$i"; done)
pre h2load h2load -n 20000 -c 20 -m 10 $urls > "$TMP/h2load.out" 2>&1
curl -s --http2-prior-knowledge "http://127.0.0.1:$P/f20.bin" -o "$TMP/f20.got"
grep -q '20000 total, 20000 started, 20000 done, 20000 succeeded, 0 failed, 0 errored' "$TMP/h2load.out" &&
  cmp -s "$TMP/f20.got" "$TMP/site/f20.bin"
check nghttpd_h2load $? "nghttpd answering: ${up:-no}; $(grep -E 'requests:|status codes' "$TMP/h2load.out"; tail -3 "$TMP/nghttpd.log")"
kill -TERM $NPID 2>/dev/null; wait $NPID 2>/dev/null
served h2load h2load 10000
check h2load_served_by_scalloc $? "$(cat "$TMP/h2load.stats" 2>/dev/null)"

# --- redis-server driven by redis-benchmark, both preloaded; then replies compared ---
redis_script() {
  printf '%s\n' 'SET greeting hello' 'APPEND greeting ", world"' 'GET greeting' 'STRLEN greeting' \
    'RPUSH l a b c d e f g' 'LRANGE l 1 -2' 'SADD s x y z x' 'SCARD s' 'HSET h f1 v1 f2 v2 f3 v3' 'HGETALL h' \
    'ZADD z 1 one 2 two 3 three' 'ZRANGE z 0 -1 WITHSCORES' 'INCRBY n 41' 'INCR n' 'SETRANGE greeting 7 W' \
    'GETRANGE greeting 0 -1' 'MSET k1 1 k2 22 k3 333' 'MGET k1 k2 k3 nosuch' 'DEL k2' 'EXISTS k1 k2 k3'
  for i in $(seq 1 300); do printf 'SET key:%s %s\n' "$i" "$(printf 'v%.0s' $(seq 1 $((i % 40 + 1))))"; done
  printf '%s\n' 'DBSIZE' 'GET key:299' 'SORT l ALPHA DESC' 'OBJECT ENCODING h'
}
start_redis() { # start_redis NAME [preload]: sets RPORT, RPID
  for attempt in 1 2 3 4 5; do
    RPORT=$(free_port $((attempt + 10)))
    if [ -n "${2:-}" ]; then
      pre "$1" exec redis-server --port "$RPORT" --save '' --appendonly no --daemonize no > "$TMP/$1.log" 2>&1 &
    else
      redis-server --port "$RPORT" --save '' --appendonly no --daemonize no > "$TMP/$1.log" 2>&1 &
    fi
    RPID=$!; PIDS="$PIDS $RPID"
    for i in $(seq 1 50); do
      # The server that answers must be ours: another redis (a parallel run's) may hold the port.
      redis-cli -p "$RPORT" INFO server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$RPID" && return 0
      kill -0 $RPID 2>/dev/null || break
      sleep 0.1
    done
  done
  return 1
}
start_redis redis yes
pre rbench redis-benchmark -p "$RPORT" -n 20000 -c 20 -r 10000 -q -t set,get,incr,lpush,rpop,sadd,hset,zadd,lrange_100,mset \
  > "$TMP/rbench.out" 2>&1
[ "$(grep -c 'requests per second' "$TMP/rbench.out")" -ge 10 ] && ! grep -qi error "$TMP/rbench.out"
check redis_benchmark $? "$(tail -5 "$TMP/rbench.out"; tail -3 "$TMP/redis.log")"
redis-cli -p "$RPORT" FLUSHALL > /dev/null
redis_script | redis-cli -p "$RPORT" > "$TMP/redis.pre" 2>&1
redis-cli -p "$RPORT" SHUTDOWN NOSAVE > /dev/null 2>&1; wait $RPID 2>/dev/null
start_redis redis-plain
redis_script | redis-cli -p "$RPORT" > "$TMP/redis.plain" 2>&1
redis-cli -p "$RPORT" SHUTDOWN NOSAVE > /dev/null 2>&1; wait $RPID 2>/dev/null
same redis_replies redis "$TMP/redis.plain" "$TMP/redis.pre" redis-server 100000
