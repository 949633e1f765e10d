#!/bin/sh
# make run: starts build/h2park on the embedded default configuration (h2c on
# 127.0.0.1:8080, TLS on 127.0.0.1:8443, root ./www), with a self-signed certificate
# generated into build/ the first time, since the default configures none.
set -eu
BUILD=${1:-build}
cert=$BUILD/selfsigned-cert.pem
key=$BUILD/selfsigned-key.pem
if [ ! -f "$cert" ] || [ ! -f "$key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$key" -out "$cert" \
    -days 365 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1
  echo "generated a self-signed certificate: $cert" >&2
fi
echo "h2park: http://127.0.0.1:8080/ (h2c: curl --http2-prior-knowledge) and https://127.0.0.1:8443/ (curl --http2 -k)" >&2
exec "$BUILD/h2park" --cert "$cert" --key "$key"
