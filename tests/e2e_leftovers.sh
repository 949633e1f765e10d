#!/bin/bash
# tests/run.sh's own guard: a test that leaves a process behind fails the suite, named,
# and the process is killed - a plain background child, and a daemon that made a session
# of its own (found by the token in its environment) - while a process of someone else
# on this machine, in another session and without the token, is neither counted nor
# touched.  The suite here is run.sh itself on three small scripts of this test's own.
. "$(dirname "$0")/lib.sh"

cat > "$TMP/e2e_leaves_child.sh" <<'T'
echo "ok leaves_child"
sleep 300 &
T
cat > "$TMP/e2e_leaves_daemon.sh" <<'T'
echo "ok leaves_daemon"
setsid sleep 301 </dev/null >/dev/null 2>&1 &
T
cat > "$TMP/e2e_clean.sh" <<'T'
sleep 302 & p=$!
kill $p; wait $p 2>/dev/null
echo "ok clean"
T
# Someone else's process: another session, no token.
env -u H2PARK_TEST_TOKEN setsid sleep 303 </dev/null >/dev/null 2>&1 &
other=$!; PIDS="$PIDS $other"
sleep 0.2

out=$(env -u H2PARK_TEST_TOKEN TESTS= E2E="$TMP/e2e_leaves_child.sh $TMP/e2e_leaves_daemon.sh $TMP/e2e_clean.sh" \
      bash tests/run.sh 2>&1); rc=$?
[ $rc != 0 ] && grep -q '^FAIL e2e_leaves_child.sh: left running' <<< "$out" &&
  grep -A1 '^FAIL e2e_leaves_child.sh: left running' <<< "$out" | grep -q 'sleep 300'
check leftover_child_fails_the_suite $? "exit $rc: $out"
grep -A1 '^FAIL e2e_leaves_daemon.sh: left running' <<< "$out" | grep -q 'sleep 301'
check leftover_daemon_in_own_session_fails_the_suite $? "$out"
grep -q '^  e2e_clean.sh: 1 passed, 0 failed$' <<< "$out" && [ "$(tail -n 1 <<< "$out")" = "3 passed, 2 failed" ]
check clean_test_passes $? "$out"
# Killed, both of them (a killed process may take a moment to be reaped on a loaded
# machine: looked for until it is gone, for 5 s at most); the other program alive and unnamed.
for i in $(seq 1 50); do
  left=$(for p in $(pgrep -x sleep); do
           grep -qzx "H2PARK_TEST_TOKEN=h2park-test-.*" /proc/$p/environ 2>/dev/null &&
             ps -o args= -p $p 2>/dev/null | grep -q '^sleep 30[01]$' && echo $p; done)
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ]; check leftovers_killed $? "still running: $left"
kill -0 "$other" 2>/dev/null && ! grep -q 'sleep 303' <<< "$out"
check other_peoples_processes_left_alone $? "$out"
# In a session of its own, it is not lib.sh's to clean up.
kill "$other" 2>/dev/null; wait "$other" 2>/dev/null || true

# A test named without its path runs as if given by path; a name that is no test fails
# the run instead of being skipped.
out=$(env -u H2PARK_TEST_TOKEN TESTS=test_copy E2E="e2e_no_such_script" bash tests/run.sh 2>&1); rc=$?
[ $rc != 0 ] && grep -q '^  tests/test_copy: [1-9][0-9]* passed, 0 failed$' <<< "$out" &&
  grep -q '^FAIL tests/e2e_no_such_script.sh: no such script$' <<< "$out"
check tests_named_without_path $? "exit $rc: $out"
