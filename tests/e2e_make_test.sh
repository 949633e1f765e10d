#!/bin/bash
# `make test` keeps its promise (README, tests/README.md): the last line of its output,
# stdout and stderr together, is "N passed, N failed", and it exits non-zero when a test
# failed and zero when none did - run with a selection of its own (TESTS, E2E) of a
# program that fails or passes and a script that passes, so that it does not run the
# suite inside the suite.  make's own "make: *** [...] Error 1" came last before.
#
# make builds before it tests: it is run on this build (BUILD, SAN, TSAN and CC as run.sh
# passes them), where there is nothing left to build, and only if the environment does
# describe this build - a make with other flags would rebuild it in place.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
MAKE_ENV=(env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS)   # a make of its own, not one under make test's

# The flags make would build with, asked of a make whose BUILD is a directory of the test's
# own (where its parse writes them), against those this build was made with.
want=$("${MAKE_ENV[@]}" make -s --no-print-directory BUILD="$TMP/probe" \
         --eval='flags-probe: ; @echo "$(FLAGS_STR)"' flags-probe 2>/dev/null | sed "s|$TMP/probe|$BUILD|g")
if [ "$want" != "$(cat "$BUILD/flags" 2>/dev/null)" ]; then
  echo "ok make_test # SKIP this environment does not describe $BUILD (its flags differ): run it from make test"
  exit 0
fi

printf '#!/bin/sh\necho "FAIL make_test_deliberate: the failing selection of e2e_make_test"\n' > "$TMP/fails"
printf '#!/bin/sh\necho "ok make_test_passing_program"\n' > "$TMP/passes"
printf 'echo "ok make_test_passing_script"\n' > "$TMP/passes.sh"
chmod +x "$TMP/fails" "$TMP/passes"

# make_test NAME PROGRAM: make test with PROGRAM and the passing script; its output (both
# streams, as a terminal shows them) in $TMP/NAME.out, its status in RC.
make_test() {
  "${MAKE_ENV[@]}" make test TESTS="$2" E2E="$TMP/passes.sh" > "$TMP/$1.out" 2>&1 < /dev/null
  RC=$?
}

make_test failing "$TMP/fails"
last=$(tail -1 "$TMP/failing.out")
[ "$last" = "1 passed, 1 failed" ]; check make_test_failing_ends_with_summary $? "last line '$last'"
[ $RC -ne 0 ]; check make_test_failing_exits_non_zero $? "exit $RC"
! grep -q '^make.*\*\*\*' "$TMP/failing.out"; check make_test_failing_no_make_error_line $? "$(grep '\*\*\*' "$TMP/failing.out")"
grep -q '^FAIL make_test_deliberate' "$TMP/failing.out"; check make_test_failing_names_the_failure $? "$(tail -4 "$TMP/failing.out")"

make_test passing "$TMP/passes"
last=$(tail -1 "$TMP/passing.out")
[ "$last" = "2 passed, 0 failed" ]; check make_test_passing_ends_with_summary $? "last line '$last'"
[ $RC -eq 0 ]; check make_test_passing_exits_zero $? "exit $RC"

# Through a pipe, as a CI log reads it: the summary is what comes last.
last=$("${MAKE_ENV[@]}" make test TESTS="$TMP/fails" E2E="$TMP/passes.sh" 2>&1 < /dev/null | tail -1)
[ "$last" = "1 passed, 1 failed" ]; check make_test_failing_piped_ends_with_summary $? "last line '$last'"
