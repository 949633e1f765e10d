#!/bin/bash
# Bodies arrive intact: a 10 MiB POST to /-/echo and a 100 MiB static file come back
# byte-identical (sha256), over h2c and TLS, with parking on and off; and through a
# reader slower than the daemon, so flow control and stuck writes are exercised.
. "$(dirname "$0")/lib.sh"
make_site
head -c $((10 << 20)) /dev/urandom > "$TMP/post.bin"
head -c $((100 << 20)) /dev/urandom > "$TMP/www/big.bin"
want_post=$(sha256sum < "$TMP/post.bin" | cut -d' ' -f1)
want_big=$(sha256sum < "$TMP/www/big.bin" | cut -d' ' -f1)

for parking in on off; do
  start_daemon --parking $parking
  for proto in h2c tls; do
    if [ $proto = h2c ]; then url="http://127.0.0.1:$PORT"; opt=--http2-prior-knowledge; else url="https://127.0.0.1:$TPORT"; opt="--http2 -k"; fi
    got=$(timeout 60 curl -s $opt --data-binary @"$TMP/post.bin" "$url/-/echo" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$want_post" ]; check "echo_10MiB_${proto}_parking_${parking}" $? "sha256 $got"
    got=$(timeout 60 curl -s $opt "$url/big.bin" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$want_big" ]; check "static_100MiB_${proto}_parking_${parking}" $? "sha256 $got"
    got=$(timeout 60 curl -s $opt "$url/big.bin" | (sleep 0.5; sha256sum) | cut -d' ' -f1)
    [ "$got" = "$want_big" ]; check "static_100MiB_slow_reader_${proto}_parking_${parking}" $? "sha256 $got"
  done
  got=$(timeout 60 nghttp -d "$TMP/post.bin" "http://127.0.0.1:$PORT/-/echo" 2>/dev/null | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want_post" ]; check "echo_10MiB_nghttp_parking_${parking}" $? "sha256 $got"
  stop_daemon
done
