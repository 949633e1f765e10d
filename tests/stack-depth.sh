#!/bin/bash
# Measures how deep coroutine stacks get: runs the end-to-end tests with stack painting
# (H2PARK_DEBUG=corostackpaint=1), once with an ECDSA P-256 and once with an RSA-2048
# certificate, and prints the deepest use any daemon logged.  coro_stack_size's default
# must stay at least twice that figure.
set -u
BUILD=${BUILD:-build}
report=$(mktemp)
export STACK_REPORT=$report H2PARK_DEBUG=corostackpaint=1 BUILD
for cert in "ec|-pkeyopt ec_paramgen_curve:P-256" "rsa|-pkeyopt rsa_keygen_bits:2048"; do
  export CERT_ALG=${cert%%|*} CERT_OPTS=${cert#*|}
  for t in tests/e2e_*.sh; do bash "$t" >/dev/null 2>&1; done
  echo "$CERT_ALG: deepest $(sed -n 's/.*deepest coroutine stack use: \([0-9]*\) bytes.*/\1/p' "$report" | sort -n | tail -1) bytes over $(wc -l < "$report") daemons"
done
deepest=$(sed -n 's/.*deepest coroutine stack use: \([0-9]*\) bytes.*/\1/p' "$report" | sort -n | tail -1)
echo "deepest coroutine stack use: $deepest bytes; default coro_stack_size must be >= $((2 * deepest))"
rm -f "$report"
