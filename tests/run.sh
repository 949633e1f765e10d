#!/bin/bash
# Runs every test program and end-to-end script, prints each failure by name, and ends
# with "N passed, N failed".  A program that dies without reporting counts as a failure,
# and so does one that leaves a process running: each test runs in a session of its own
# with a token in its environment (H2PARK_TEST_TOKEN), and whatever is still in that
# session or carries that token once the test has ended is named, counted as a failure
# and killed.  Processes are told apart that way, never by name: other people's h2park,
# nginx and nghttpd may run on the same machine.
set -u
BUILD=${BUILD:-build}
SAN=${SAN:-0}
TSAN=${TSAN:-0}
export BUILD SAN TSAN
run_id="$$-$(date +%s%N)"
state=$(mktemp -d /tmp/h2park-run.XXXXXX)
trap 'rm -rf "$state"' EXIT
passed=0 failed=0 count=0

# The processes of one test: in its session, or with its token in their environment (a
# daemon that makes a session of its own keeps the environment it was started with).
test_processes() { # test_processes TOKEN SID: "PID ARGS" lines
  local token=$1 sid=$2 pids
  pids=$( { ps -e -o pid=,sid= | awk -v sid="$sid" '$2 == sid { print $1 }'
            grep -lzxF "H2PARK_TEST_TOKEN=$token" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; } |
          grep -vx "$$" | sort -un)
  [ -n "$pids" ] && ps -o pid=,args= -p "$(echo $pids | tr ' ' ,)" 2>/dev/null
  return 0
}

run_one() {
  name=$1; shift
  count=$((count + 1))
  token="h2park-test-$run_id-$count"
  : > "$state/sid"
  # The session leader writes its pid (the session's id) before it becomes the test.  Its
  # output goes to a file, not through a pipe: a process left behind holding the pipe
  # would keep the suite waiting as long as it lives, and then be gone before it is looked for.
  H2PARK_TEST_TOKEN=$token setsid -w bash -c 'echo $$ > "$0"; exec "$@"' "$state/sid" "$@" >"$state/out" 2>&1 < /dev/null; rc=$?
  out=$(cat "$state/out")
  sid=$(cat "$state/sid")
  p=$(printf '%s\n' "$out" | grep -c '^ok ')
  f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
  printf '%s\n' "$out" | grep '^FAIL ' || true
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited with status $rc"
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/    /'
    f=1
  fi
  # What is stopping may take a moment; what is still there after 5 s outlived its test.
  left=""
  for i in $(seq 1 50); do
    left=$(test_processes "$token" "${sid:-none}")
    [ -z "$left" ] && break
    sleep 0.1
  done
  if [ -n "$left" ]; then
    echo "FAIL $name: left running after the test ended (killed now):"
    printf '%s\n' "$left" | sed 's/^/    /'
    for pid in $(printf '%s\n' "$left" | awk '{ print $1 }'); do kill -9 "$pid" 2>/dev/null; done
    f=$((f + 1))
  fi
  passed=$((passed + p)); failed=$((failed + f))
  echo "  $name: $p passed, $f failed"
}

# TESTS names the test programs of this build (the Makefile passes them; by default every
# test_* in it), E2E the end-to-end scripts (by default every tests/e2e_*.sh); under
# TSAN=1 the end-to-end scripts are left out.  Either may be given by path or by bare
# name (test_config, e2e_routes).
for t in ${TESTS-"$BUILD"/tests/test_*}; do
  [ -x "$t" ] || [ ! -x "$BUILD/tests/$t" ] || t=$BUILD/tests/$t
  [ -x "$t" ] || { echo "FAIL ${t#$BUILD/}: not built"; failed=$((failed + 1)); continue; }
  run_one "${t#$BUILD/}" "$t"
done
for t in ${E2E:-tests/e2e_*.sh}; do
  [ -f "$t" ] || t=tests/${t%.sh}.sh
  [ -f "$t" ] || { echo "FAIL $t: no such script"; failed=$((failed + 1)); continue; }
  [ "$TSAN" = 0 ] || continue
  run_one "$(basename "$t")" bash "$t"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
