#!/bin/bash
# What the reverse proxy logs when an upstream fails: one error-log line per failure (a
# warning ending "; trying another" when another server takes the request), naming the
# client, the request, the server, the phase and, for a timeout, the setting that fired,
# with the errno of a failed system call; the access log's upstream_error carries the same
# words and upstream_status the status the client got (502, 504), as nginx's does.  Real
# sockets: a port nobody listens on, tests/upstream_faults.py (a head that never comes, a
# body that stops, a response nobody could frame, a TLS certificate nobody trusts) and an
# idle WebSocket tunnel to tests/upstream_websocket.py.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)

FAULT=$(free_port); FAULT_TLS=$(free_port); DEAD=$(free_port); DEAD2=$(free_port); WS=$(free_port)
$PY "$HERE/upstream_faults.py" "$FAULT" & PIDS="$PIDS $!"
$PY "$HERE/upstream_faults.py" "$FAULT_TLS" "$TMP/cert.pem" "$TMP/key.pem" 2>/dev/null & PIDS="$PIDS $!"
websockets=0
if $PY -c 'import websockets' 2>/dev/null; then
  websockets=1
  $PY "$HERE/upstream_websocket.py" "$WS" & PIDS="$PIDS $!"
fi
for i in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$FAULT/ok" && curl -sk -o /dev/null "https://127.0.0.1:$FAULT_TLS/ok" &&
    { [ $websockets = 0 ] || curl -s -o /dev/null "http://127.0.0.1:$WS/plain"; } && break
  sleep 0.1
done

{ proxy_conf_head errors
  cat <<EOF
proxy_read_timeout = 1s
upstream pair {
    server = 127.0.0.1:$DEAD2
    server = 127.0.0.1:$FAULT
}
location /dead/ {
    proxy_pass = http://127.0.0.1:$DEAD
}
location /pair/ {
    proxy_pass = http://pair/
}
location /tls/ {
    proxy_pass = https://127.0.0.1:$FAULT_TLS/
}
location /echo {
    proxy_pass = http://127.0.0.1:$WS
}
location / {
    proxy_pass = http://127.0.0.1:$FAULT
}
EOF
} > "$TMP/errors.conf"
start_config "$TMP/errors.conf" "$P" || { fail proxy_error_log_daemon_starts "see above"; exit 1; }
LOG=$TMP/daemon.log

# lines PATTERN: the error log's lines matching PATTERN (a fixed string).
lines() { grep -F -- "$1" "$LOG"; }
# access TARGET FIELD: FIELD of the access log's line for TARGET.
access() {
  $PY -c 'import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["target"] == sys.argv[2]:
        print(d.get(sys.argv[3]))' "$TMP/errors.access" "$1" "$2" | tail -1
}
# one_line NAME MATCH WANT: exactly one error-log line matches MATCH, and it says WANT.
one_line() {
  local got; got=$(lines "$2")
  [ "$(printf '%s\n' "$got" | grep -c .)" = 1 ] && printf '%s' "$got" | grep -qF -- "$3"
  check "$1" $? "want one line with '$3', got: $(printf '%s' "$got" | tr '\n' '|')"
}
# cause_in_access_log NAME TARGET STATUS UPSTREAM_STATUS CAUSE
cause_in_access_log() {
  local st ust err
  st=$(access "$2" status); ust=$(access "$2" upstream_status); err=$(access "$2" upstream_error)
  [ "$st" = "$3" ] && [ "$ust" = "$4" ] && [ "$err" = "$5" ]
  check "$1" $? "status $st, upstream_status $ust, upstream_error '$err'"
}

# A refused connect: one line, with the request and the errno (there were two: the errno
# on one without the request, the request on one without the errno).
c=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/dead/x")
[ "$c" = 502 ]; check refused_connect_502 $? "$c"
sleep 0.2
want="GET /dead/x: upstream 127.0.0.1:$DEAD: connect() failed (111: Connection refused) while connecting to upstream"
one_line refused_connect_one_error_line "127.0.0.1:$DEAD" "$want"
cause_in_access_log refused_connect_access_log /dead/x 502 502 \
  "connect() failed (111: Connection refused) while connecting to upstream"

# No response head within proxy_read_timeout.
c=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/slow-head?s=4")
[ "$c" = 504 ]; check no_head_504 $? "$c"
sleep 0.2
one_line no_head_one_error_line "/slow-head" \
  "GET /slow-head?s=4: upstream 127.0.0.1:$FAULT: upstream timed out after proxy_read_timeout 1s while reading the response header"
cause_in_access_log no_head_access_log "/slow-head?s=4" 504 504 \
  "upstream timed out after proxy_read_timeout 1s while reading the response header"

# A body that stops half way: the same timeout, another phase; the client had its 200 and
# sees the body cut short.
curl -s -m 10 -o /dev/null "http://127.0.0.1:$P/stall-body?s=4"; rc=$?
[ $rc = 18 ]; check stalled_body_cut_short $? "curl exit $rc"
sleep 0.2
one_line stalled_body_one_error_line "/stall-body" \
  "GET /stall-body?s=4: upstream 127.0.0.1:$FAULT: upstream timed out after proxy_read_timeout 1s while reading the response body"
cause_in_access_log stalled_body_access_log "/stall-body?s=4" 200 200 \
  "upstream timed out after proxy_read_timeout 1s while reading the response body"

# A response no one can frame: the parser's words, and the phase.
c=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/two-cl")
sleep 0.2
[ "$c" = 502 ]; check invalid_response_502 $? "$c"
one_line invalid_response_one_error_line "/two-cl" \
  "GET /two-cl: upstream 127.0.0.1:$FAULT: upstream sent an invalid response: Duplicate Content-Length while reading the response header"
cause_in_access_log invalid_response_access_log /two-cl 502 502 \
  "upstream sent an invalid response: Duplicate Content-Length while reading the response header"

# A certificate nobody trusts: OpenSSL's words on the request's line (there were two).
c=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/tls/ok")
sleep 0.2
[ "$c" = 502 ]; check untrusted_certificate_502 $? "$c"
one_line untrusted_certificate_one_error_line "127.0.0.1:$FAULT_TLS" \
  "GET /tls/ok: upstream 127.0.0.1:$FAULT_TLS: SSL certificate verify error: "
[ "$(access /tls/ok upstream_status)" = 502 ]
check untrusted_certificate_access_log_502 $? "upstream_status $(access /tls/ok upstream_status)"

# Another server tried: the first one's failure is the warning, in the same words, and
# the request is served.
c=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/pair/ok")
sleep 0.2
[ "$c" = 200 ]; check retried_on_another_server_200 $? "$c"
one_line retried_one_warning "GET /pair/ok" \
  "warn  127.0.0.1:"
one_line retried_warning_says_why "GET /pair/ok" \
  "GET /pair/ok: upstream 127.0.0.1:$DEAD2: connect() failed (111: Connection refused) while connecting to upstream; trying another"
got=$(lines "127.0.0.1:$DEAD2" | grep -v ': left out for ')
[ "$(printf '%s\n' "$got" | grep -c .)" = 1 ]; check retried_failure_said_once $? "$(printf '%s' "$got" | tr '\n' '|')"
[ "$(access /pair/ok upstream_status)" = 200 ] && [ "$(access /pair/ok upstream_error)" = None ]
check retried_access_log_the_answer $? "upstream_status $(access /pair/ok upstream_status), upstream_error $(access /pair/ok upstream_error)"

# An idle WebSocket tunnel: closed by proxy_read_timeout, said as what it is.
if [ $websockets = 1 ]; then
  $PY "$HERE/ws_client.py" "$P" timeout 1
  sleep 0.2
  one_line idle_tunnel_one_error_line "GET /echo" \
    "GET /echo: upstream 127.0.0.1:$WS: websocket tunnel idle for proxy_read_timeout 1s"
  cause_in_access_log idle_tunnel_access_log /echo 101 101 "websocket tunnel idle for proxy_read_timeout 1s"
else
  echo "ok idle_tunnel_one_error_line # SKIP python3-websockets not installed"
fi
stop_daemon
