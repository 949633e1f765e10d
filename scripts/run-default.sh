#!/bin/sh
# make run: build/h2park with no flags - the embedded default configuration (h2c on
# 127.0.0.1:8080, TLS on 127.0.0.1:8443 with a certificate it makes at start, root ./www).
# make run ARGS='...' passes options (h2park --help).
set -eu
BUILD=${1:-build}
shift || true
echo "h2park: http://127.0.0.1:8080/ (h2c: curl --http2-prior-knowledge) and https://127.0.0.1:8443/ (curl --http2 -k)" >&2
exec "$BUILD/h2park" "$@"
