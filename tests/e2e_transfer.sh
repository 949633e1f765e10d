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

# Over TLS the sealed records of a large body leave in batches, not a write() each
# (server/core/tlsbatch.c): a 1 MiB file is 64 full records; /proc's syscw counts the
# daemon's write calls (the socket BIO's; HTTP/2 cleartext uses send, not counted).
head -c $((1 << 20)) /dev/urandom > "$TMP/www/one.bin"
start_daemon
for proto in h2 h1; do
  opt="--http2"; [ $proto = h1 ] && opt="--http1.1"
  curl -sk $opt -o /dev/null "https://127.0.0.1:$TPORT/one.bin"     # buffers and caches warm
  w0=$(awk '/^syscw/ { print $2 }' /proc/$DPID/io)
  got=$(curl -sk $opt "https://127.0.0.1:$TPORT/one.bin" | cmp - "$TMP/www/one.bin" && echo same)
  w1=$(awk '/^syscw/ { print $2 }' /proc/$DPID/io)
  [ "$got" = same ] && [ $((w1 - w0)) -le 32 ]; check "tls_1MiB_${proto}_records_batched" $? "$((w1 - w0)) write calls for 64 records, body $got"
done

# A TLS reader that stops reading is closed at write_timeout even when what waits for
# the socket is sealed records rather than the connection's plaintext output.
stop_daemon
printf 'write_timeout = 1s\n' > "$TMP/wt.conf"
start_daemon -c "$TMP/wt.conf"
for alpn in h2 http/1.1; do
  got=$(timeout 30 python3 - "$TPORT" "$alpn" "$(stat -c %s "$TMP/www/big.bin")" <<'PY'
import socket, ssl, sys, time
port, alpn, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols([alpn])
raw = socket.create_connection(("127.0.0.1", port))
s = ctx.wrap_socket(raw)
if alpn == "h2":
    # preface, empty SETTINGS, a window big enough for the whole file, one GET
    import struct
    def frame(t, f, sid, payload): return struct.pack(">I", len(payload))[1:] + bytes([t, f]) + struct.pack(">I", sid) + payload
    hdr = bytes([0x82, 0x87, 0x41, 0x01, 0x78, 0x04, 0x08]) + b"/big.bin"
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, struct.pack(">HI", 4, 0x7fffffff))
              + frame(8, 0, 0, struct.pack(">I", 0x7fffffff - 65535)) + frame(1, 5, 1, hdr))
else:
    s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
time.sleep(4)                      # not reading: the daemon's writes stall past write_timeout
s.settimeout(10)
total = 0
try:
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        total += len(b)
except TimeoutError:
    print("still open after %d bytes" % total)
    sys.exit()
except (ssl.SSLError, OSError):
    pass
print("closed" if total < size else "served %d" % total)
PY
)
  [ "$got" = closed ]; check "tls_stalled_reader_closed_${alpn%%/*}" $? "$got"
done
alive=$(kill -0 "$DPID" 2>/dev/null && echo yes); [ "$alive" = yes ]; check tls_stalled_reader_daemon_alive $? "daemon gone"
stop_daemon
