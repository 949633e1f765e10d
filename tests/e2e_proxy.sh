#!/bin/bash
# Behind a load balancer: listen ... proxy_protocol takes haproxy's PROXY header (v2 and
# v1, cleartext and TLS passed through, IPv4 and IPv6 clients) and logs the client's
# address, not haproxy's; haproxy's health checks (LOCAL headers) keep the server UP.
# Hostile peers get closed: no header, a malformed one, one that never comes (after
# preface_timeout); one that trickles in a byte at a time is still read exactly.
# Then the reference deployment of docs/operations.md: two h2park behind haproxy with health checks
# on /-/healthz, one stopped (GOAWAY, drain) while h2load runs through haproxy, no
# request failed.
. "$(dirname "$0")/lib.sh"
make_site
if ! command -v haproxy >/dev/null; then
  echo "ok proxy_protocol # SKIP haproxy not installed"
  exit 0
fi
PP=$(free_port); PT=$(free_port); HP=$(free_port)
cat > "$TMP/h2park.conf" <<EOF
listen = 127.0.0.1:$PP proxy_protocol
listen = 127.0.0.1:$PT tls proxy_protocol
cert = $TMP/cert.pem
key = $TMP/key.pem
root = $TMP/www
workers = 2
access_log = $TMP/access.log
preface_timeout = 1s
EOF
# The daemon has no plain port to ask /-/healthz on: wait for its log line.
"$H2PARK" -c "$TMP/h2park.conf" >"$TMP/daemon.log" 2>&1 &
DPID=$!; PIDS="$PIDS $DPID"
for i in $(seq 1 50); do grep -q 'h2park .*workers' "$TMP/daemon.log" && break; sleep 0.1; done

cat > "$TMP/haproxy.cfg" <<EOF
global
  log stderr format short local0 info
defaults
  mode tcp
  log global
  timeout connect 2s
  timeout client 10s
  timeout server 10s
frontend v2
  bind 127.0.0.1:$HP
  bind [::1]:$HP
  default_backend v2
backend v2
  option httpchk GET /-/healthz
  http-check expect status 200
  server h2park 127.0.0.1:$PP send-proxy-v2 check check-send-proxy inter 200ms fall 1 rise 1
frontend v1
  bind 127.0.0.1:$((HP + 1))
  default_backend v1
backend v1
  server h2park 127.0.0.1:$PP send-proxy
frontend tls
  bind 127.0.0.1:$((HP + 2))
  default_backend tls
backend tls
  server h2park 127.0.0.1:$PT send-proxy-v2
EOF
haproxy -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
HPPID=$!; PIDS="$PIDS $HPPID"
sleep 1

# The client connects from 127.0.0.2 (haproxy from 127.0.0.1): the log must say .2.
out=$(curl -s --interface 127.0.0.2 --http2-prior-knowledge "http://127.0.0.1:$HP/-/healthz?v2")
sleep 0.2
[ "$out" = ok ] && grep -q '^127\.0\.0\.2 - - \[.*\] "GET /-/healthz?v2 HTTP/2.0" 200 .* h2c [0-9.]*$' "$TMP/access.log"
check proxy_v2_client_address $? "$out; $(tail -2 "$TMP/access.log")"
out=$(curl -s --interface 127.0.0.2 "http://127.0.0.1:$((HP + 1))/index.html?v1")
sleep 0.2
[ "$out" = '<h1>h2park test</h1>' ] && grep -q '^127\.0\.0\.2 - - \[.*\] "GET /index.html?v1 HTTP/1.1" 200 .* http/1.1 [0-9.]*$' "$TMP/access.log"
check proxy_v1_client_address $? "$out; $(tail -2 "$TMP/access.log")"
out=$(curl -s -k --http2 --interface 127.0.0.2 "https://127.0.0.1:$((HP + 2))/index.html?tls")
sleep 0.2
[ "$out" = '<h1>h2park test</h1>' ] && grep -q '^127\.0\.0\.2 - - \[.*\] "GET /index.html?tls HTTP/2.0" 200 .* h2 [0-9.]*$' "$TMP/access.log"
check proxy_v2_then_tls $? "$out; $(tail -2 "$TMP/access.log")"
out=$(curl -s -g --http2-prior-knowledge "http://[::1]:$HP/-/healthz?v6")
sleep 0.2
[ "$out" = ok ] && grep -q '^::1 - - \[.*\] "GET /-/healthz?v6 HTTP/2.0" 200' "$TMP/access.log"
check proxy_v2_ipv6_client $? "$out; $(tail -2 "$TMP/access.log")"
! grep -qi 'is DOWN' "$TMP/haproxy.log"; check proxy_health_checks_local_up $? "$(grep -i down "$TMP/haproxy.log")"

# Hostile peers, straight at the proxy_protocol port.  Each prints what came back and
# whether the daemon closed.
raw() { # raw SCRIPT: python with s = a socket connected to the daemon (a reset is a close)
  timeout 10 python3 -c "
import socket, time
s = socket.create_connection(('127.0.0.1', $PP))
s.settimeout(3)
$1
try:
    data = s.recv(4096)
    print('CLOSED' if data == b'' else 'DATA ' + data[:40].decode('latin1').split('\r')[0])
except socket.timeout:
    print('OPEN')
except ConnectionResetError:
    print('CLOSED')
" 2>&1
}
out=$(raw "s.sendall(b'GET / HTTP/1.1\r\nHost: a\r\n\r\n')")
[ "$out" = CLOSED ]; check proxy_no_header_closed $? "$out"
out=$(raw "s.sendall(b'PROXY TCP4 1.2.3.4 5.6.7.8 80\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n')")
[ "$out" = CLOSED ]; check proxy_malformed_v1_closed $? "$out"
out=$(raw "s.sendall(b'\r\n\r\n\0\r\nQUIT\n\x21\x12\x00\x0c' + bytes(12) + b'GET / HTTP/1.1\r\n\r\n')")
[ "$out" = CLOSED ]; check proxy_malformed_v2_closed $? "$out"
out=$(raw "s.sendall(b'PROXY UNKNOWN ' + b'x' * 200)")
[ "$out" = CLOSED ]; check proxy_overlong_v1_closed $? "$out"
start=$SECONDS
out=$(raw "time.sleep(0.1)")
[ "$out" = CLOSED ]; check proxy_silent_closed_after_preface_timeout $? "$out after $((SECONDS - start)) s"
out=$(raw "
for b in b'PROXY TCP4 203.0.113.9 5.6.7.8 4242 80\r\nGET /index.html?drip HTTP/1.1\r\nHost: a\r\n\r\n':
    s.send(bytes([b])); time.sleep(0.002)")
sleep 0.2
[ "$out" = 'DATA HTTP/1.1 200 OK' ] && grep -q '^203\.0\.113\.9 - - \[.*\] "GET /index.html?drip HTTP/1.1" 200' "$TMP/access.log"
check proxy_header_byte_by_byte $? "$out; $(tail -1 "$TMP/access.log")"
out=$(raw "s.sendall(b'\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c\xcb\x00\x71\x0a\x05\x06\x07\x08\x10\x92\x00\x50' + b'GET /index.html?same HTTP/1.1\r\nHost: a\r\n\r\n')")
sleep 0.2
[ "$out" = 'DATA HTTP/1.1 200 OK' ] && grep -q '^203\.0\.113\.10 - - \[.*\] "GET /index.html?same HTTP/1.1" 200' "$TMP/access.log"
check proxy_header_and_request_in_one_write $? "$out; $(tail -1 "$TMP/access.log")"
kill -0 "$DPID"; check proxy_daemon_alive $? "$(tail -5 "$TMP/daemon.log")"
kill "$HPPID"; wait "$HPPID" 2>/dev/null
kill -TERM "$DPID"; wait "$DPID"

# The reference deployment: two instances behind haproxy, health checks through the
# PROXY header, HTTP/1.1 to the servers with retries on another server.  One instance is
# stopped while h2load runs through haproxy.
A=$(free_port); B=$(free_port)
for n in A B; do
  port=${!n}
  printf 'listen = 127.0.0.1:%s proxy_protocol\nroot = %s\nworkers = 1\n' "$port" "$TMP/www" > "$TMP/$n.conf"
  "$H2PARK" -c "$TMP/$n.conf" >"$TMP/$n.log" 2>&1 &
  eval "PID_$n=\$!"; PIDS="$PIDS $!"
done
sed -e "s/@PORT@/$HP/" -e "s/@A@/$A/" -e "s/@B@/$B/" > "$TMP/lb.cfg" <<'EOF'
global
  log stderr format short local0 info
defaults
  mode http
  log global
  option redispatch
  retries 3
  retry-on all-retryable-errors
  timeout connect 2s
  timeout client 10s
  timeout server 10s
frontend www
  bind 127.0.0.1:@PORT@
  default_backend h2park
backend h2park
  balance roundrobin
  option httpchk GET /-/healthz
  http-check expect status 200
  default-server send-proxy-v2 check check-send-proxy inter 200ms fall 1 rise 2
  server a 127.0.0.1:@A@
  server b 127.0.0.1:@B@
EOF
haproxy -f "$TMP/lb.cfg" >"$TMP/lb.log" 2>&1 &
HPPID=$!; PIDS="$PIDS $HPPID"
sleep 1
timeout 60 h2load -n 6000 -c 8 -m 1 --h1 "http://127.0.0.1:$HP/index.html" > "$TMP/lb-load.out" 2>&1 &
LOAD=$!
sleep 0.3
kill -TERM "$PID_A"
wait "$LOAD"
wait "$PID_A"; status=$?
grep -q 'requests: 6000 total, 6000 started, 6000 done, 6000 succeeded, 0 failed' "$TMP/lb-load.out" && [ $status = 0 ]
check haproxy_pair_one_stopped_no_failed_request $? "exit $status; $(grep -E 'requests:|status codes' "$TMP/lb-load.out"); $(grep -i 'server h2park' "$TMP/lb.log" | head -3)"
kill "$HPPID"; kill -TERM "$PID_B"; wait "$PID_B"
