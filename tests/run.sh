#!/bin/sh
# Runs every test program and end-to-end script, prints each failure by name, and ends
# with "N passed, N failed".  A program that dies without reporting counts as a failure.
set -u
BUILD=${BUILD:-build}
SAN=${SAN:-0}
TSAN=${TSAN:-0}
export BUILD SAN TSAN
log=$(mktemp)
trap 'rm -f "$log"' EXIT
passed=0 failed=0

run_one() {
  name=$1; shift
  out=$("$@" 2>&1); rc=$?
  printf '%s\n' "$out" >> "$log"
  p=$(printf '%s\n' "$out" | grep -c '^ok ')
  f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
  printf '%s\n' "$out" | grep '^FAIL ' || true
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited with status $rc"
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/    /'
    f=1
  fi
  passed=$((passed + p)); failed=$((failed + f))
  echo "  $name: $p passed, $f failed"
}

# TESTS names the test programs of this build (the Makefile passes them; by default every
# test_* in it), E2E the end-to-end scripts (by default every tests/e2e_*.sh); under
# TSAN=1 the end-to-end scripts are left out.
for t in ${TESTS-"$BUILD"/tests/test_*}; do
  [ -x "$t" ] || { echo "FAIL ${t#$BUILD/}: not built"; failed=$((failed + 1)); continue; }
  run_one "${t#$BUILD/}" "$t"
done
for t in ${E2E:-tests/e2e_*.sh}; do
  [ -f "$t" ] && [ "$TSAN" = 0 ] || continue
  run_one "$(basename "$t")" bash "$t"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
