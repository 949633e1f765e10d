#!/bin/sh
# make-test-failed.sh MAKE_PID MAKELEVEL GOALS: how `make test` ends when a test failed.
#
# The README promises two things of `make test`: its last line - stdout and stderr
# together, as a terminal or a CI log shows them - is tests/run.sh's "N passed, N failed",
# and it exits non-zero on any failure.  A recipe that fails breaks the first: GNU make
# then prints "make: *** [Makefile:NNN: test] Error 1" after the summary, and has no
# option to keep quiet about it.
#
# So the test recipe does not fail: it calls this script, which ends the make that ran it
# with SIGPIPE.  make has no handler for that signal, so it ends at once, printing nothing
# more, and its status is non-zero (141); and shells do not report a job SIGPIPE ended
# (bash, dash and zsh stay silent, as for any `yes | head`).  The other signals make
# handles: SIGTERM it passes on to the recipe and reports ("Terminated"), and its SIGINT
# handler races with the recipe's exit ("wait: No child processes").  Printing the summary
# again from a process left to wait for make's exit would put it after the shell's next
# prompt in a terminal, and after `make test > log; tail -1 log` has read the log.
#
# Only a make the user started (MAKELEVEL 0: a make above it decides what the failure
# means to it, and says so), with test its only goal, without -k (other goals would go
# on) and without -O (make would still hold the recipe's output) is ended.  Otherwise the
# script fails, and so does the recipe: make says what it says, and exits non-zero.
make_pid=$1 level=$2 goals=$3
letters=${MAKEFLAGS%% *}           # make's one-letter options ("ks") come first, if any
case $letters in -*|*=*) letters= ;; esac
case $letters in *k*) exit 1 ;; esac
case " ${MAKEFLAGS:-} " in *" -O"*|*" --output-sync"*) exit 1 ;; esac
[ "$level" = 0 ] && [ "$goals" = test ] || exit 1
[ "$(cat "/proc/$make_pid/comm" 2>/dev/null)" = make ] || exit 1
kill -PIPE "$make_pid"
exit 1                             # (seen only by a make that ignores SIGPIPE: it fails as usual)
