#!/bin/bash
# WebSocket through the reverse proxy: HTTP/1.1 Upgrade tunnelled to a python3-websockets
# upstream (tests/upstream_websocket.py), with the python3-websockets client and raw
# sockets (tests/ws_client.py).  Echo both ways (1 MiB messages), subprotocols, close
# codes, pushes, a refused handshake, a declined upgrade staying HTTP, a frame sent with
# the handshake, idle tunnels parked holding no buffer, proxy_read_timeout closing a
# silent tunnel, and no upstream connection left behind.  WebSocket over HTTP/2 (RFC 8441,
# tests/ws_h2_client.py on python3-h2): the setting offered, extended CONNECT over h2c and
# TLS tunnelled to the same HTTP/1.1 upstream with a handshake of the proxy's own, idle
# tunnels on one connection parked, refusals passed on, and upstream answers that did not
# switch (or could not have read the key) refused with 502.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
$PY -c 'import websockets' 2>/dev/null || { echo "ok proxy_websocket # SKIP python3-websockets not installed"; exit 0; }

WS=$(free_port); FAULT=$(free_port)
$PY "$HERE/upstream_websocket.py" "$WS" & PIDS="$PIDS $!"
$PY "$HERE/upstream_faults.py" "$FAULT" & PIDS="$PIDS $!"
for i in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$WS/plain" && curl -s -o /dev/null "http://127.0.0.1:$FAULT/ok" && break
  sleep 0.1
done

proxy_conf_head ws > "$TMP/ws.conf"
cat >> "$TMP/ws.conf" <<EOF
location / {
    proxy_pass = http://127.0.0.1:$WS
    proxy_read_timeout = 120s
}
location /answer {
    return = 204
}
EOF
start_config "$TMP/ws.conf" "$P"

# ---- over HTTP/2: extended CONNECT (RFC 8441) ----
H2WS="$PY $HERE/ws_h2_client.py"
[ "$($H2WS "$P" / settings 2>&1)" = offered ]; check ws_h2_connect_protocol_offered $? "$($H2WS "$P" / settings 2>&1)"
out=$($H2WS "$P" /echo echo 2>&1); [ "$out" = "echoed 3" ]; check ws_h2_echo_h2c $? "$out"
out=$($H2WS "$T" /echo tls echo 2>&1); [ "$out" = "echoed 3" ]; check ws_h2_echo_tls $? "$out"
# What the upstream saw: HTTP/1.1's handshake, with a key of the proxy's own and no body framing.
f=$($H2WS "$P" /headers first 2>&1)
$PY -c 'import base64, json, sys; h = json.loads(sys.argv[1]); assert h["upgrade"] == "websocket" and h["connection"].lower() == "upgrade" and len(base64.b64decode(h["sec-websocket-key"])) == 16 and h["sec-websocket-version"] == "13" and "transfer-encoding" not in h and "content-length" not in h and h["via"].startswith("2.0 h2park ("), h' "$f"
check ws_h2_upstream_sees_http1_handshake $? "$f"
out=$($H2WS "$P" /reject status 2>&1 | head -1); [ "$out" = ":status: 403" ]; check ws_h2_refusal_passed_on $? "$out"
out=$($H2WS "$P" /plain status 2>&1 | head -1); [ "$out" = ":status: 502" ]; check ws_h2_upstream_not_switching_502 $? "$out"
out=$($H2WS "$P" /echo protocol chat 2>&1); [ "$out" = 501 ]; check ws_h2_other_protocol_501 $? "$out"
out=$($H2WS "$P" /answer protocol websocket 2>&1); [ "$out" = 400 ]; check ws_h2_no_endpoint_400 $? "$out"
out=$($H2WS "$P" /answer protocol chat 2>&1); [ "$out" = 405 ]; check ws_h2_other_protocol_elsewhere_405 $? "$out"
# 50 idle tunnels on one connection: every handler parked, and all of them echo afterwards.
coproc IDLE { $H2WS "$P" /echo idle 50 2>&1; }
read -r -t 20 line <&"${IDLE[0]}"
stats=""; parked=0
for i in $(seq 1 40); do
  stats=$(curl -s "http://127.0.0.1:$P/-/stats")
  parked=$($PY -c 'import json, sys; print(json.loads(sys.argv[1])["parked_handlers"])' "$stats")
  [ "$parked" -ge 50 ] && break
  sleep 0.1
done
exec {IDLE[1]}>&-
read -r -t 20 done_line <&"${IDLE[0]}"
[ "$line" = "open 50" ] && [ "$parked" -ge 50 ] && [ "$done_line" = "echoed 50" ]
check ws_h2_idle_tunnels_park $? "$line; parked $parked; $done_line"
# Tunnels the client resets while their connection stays: nothing left of them.
out=$($H2WS "$P" /echo reset 20 2>&1)
for i in $(seq 1 50); do
  handlers=$(curl -s "http://127.0.0.1:$P/-/stats" | $PY -c 'import json, sys; print(json.load(sys.stdin)["handler_coroutines"])')
  active=$(curl -s "http://127.0.0.1:$P/metrics" | sed -n 's/^h2park_upstream_connections{.*state="active"} \([0-9]*\)/\1/p')
  [ "$handlers" = 1 ] && [ "$active" = 0 ] && break
  sleep 0.1
done
[ "$out" = "reset 20" ] && [ "$handlers" = 1 ] && [ "$active" = 0 ]
check ws_h2_reset_tunnels_leave_nothing $? "$out; handlers $handlers (the stats request's own), upstream active $active"
grep '"method":"CONNECT"' "$TMP/ws.access" | grep '"status":200' | grep -q '"upstream_status":101'
check ws_h2_access_log_200_upstream_101 $? "$(grep -m1 CONNECT "$TMP/ws.access")"

$PY "$HERE/ws_client.py" "$P" basic
$PY "$HERE/ws_client.py" "$P" early-frame
$PY "$HERE/ws_client.py" "$T" tls
$PY "$HERE/ws_client.py" "$P" idle 200 "$P"
# A silent tunnel, with a read timeout short enough to wait for.
stop_daemon
sed -i "s|^\( *\)proxy_read_timeout = .*|\1proxy_read_timeout = 3s|" "$TMP/ws.conf"
start_config "$TMP/ws.conf" "$P"
$PY "$HERE/ws_client.py" "$P" timeout 3

grep -q '"status": *101' "$TMP/ws.access" && grep '"status": *101' "$TMP/ws.access" | grep -q '"upstream_status": *101'
check ws_access_log_101 $? "$(grep -m1 '101' "$TMP/ws.access")"

# Every tunnel closed: no upstream connection in use, none pooled (a tunnel's is never).
for i in $(seq 1 50); do
  m=$(curl -s "http://127.0.0.1:$P/metrics")
  active=$(printf '%s\n' "$m" | sed -n 's/^h2park_upstream_connections{.*state="active"} \([0-9]*\)/\1/p')
  idle=$(printf '%s\n' "$m" | sed -n 's/^h2park_upstream_connections{.*state="idle"} \([0-9]*\)/\1/p')
  [ "$active" = 0 ] && [ "$idle" = 0 ] && break
  sleep 0.2
done
[ "$active" = 0 ] && [ "$idle" = 0 ]
check ws_no_upstream_connection_left $? "active=$active idle=$idle"

# Upgrades that must not become tunnels, against a server that misbehaves.
stop_daemon
sed -i "s|^\( *\)proxy_pass = .*|\1proxy_pass = http://127.0.0.1:$FAULT|" "$TMP/ws.conf"
start_config "$TMP/ws.conf" "$P"
WSH=(-H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
code=$(curl -s -o "$TMP/out" -w '%{http_code}' -m 10 "http://127.0.0.1:$P/switch-unasked")
[ "$code" = 502 ] && ! grep -q SMUGGLED "$TMP/out"; check ws_101_unasked_refused $? "status $code: $(head -c 100 "$TMP/out")"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' -m 10 "${WSH[@]}" "http://127.0.0.1:$P/switch-nameless")
[ "$code" = 502 ]; check ws_101_without_upgrade_field_refused $? "status $code"
grep -q 'switched protocols without naming one' "$TMP/daemon.log"; check ws_101_without_upgrade_cause_logged $? "$(tail -2 "$TMP/daemon.log")"
f=$(curl -s -m 10 -H 'Connection: Upgrade' -H 'Upgrade: foo/1' "http://127.0.0.1:$P/head-fields")
case "$f" in *upgrade=*|*connection=upgrade*) r=1 ;; *"host="*) r=0 ;; *) r=1 ;; esac
check ws_other_upgrade_not_passed_on $r "$f"
f=$(curl -s -m 10 "${WSH[@]}" -d 'body' "http://127.0.0.1:$P/head-fields")
case "$f" in *upgrade=*) r=1 ;; *"content-length=4|"*) r=0 ;; *) r=1 ;; esac
check ws_upgrade_with_body_not_passed_on $r "$f"
f=$(curl -s -m 10 --http2-prior-knowledge "${WSH[@]}" "http://127.0.0.1:$P/head-fields")
case "$f" in *upgrade=*|*sec-websocket-key*connection=*) r=1 ;; *"host="*) r=0 ;; *) r=1 ;; esac
check ws_h2_client_upgrade_not_passed_on $r "$f"
# Over HTTP/2 the proxy checks the upstream's answer itself (the client cannot): a 101
# without the key's Sec-WebSocket-Accept, or a 200 that did not switch, is a 502.
out=$($H2WS "$P" /switch-unasked status 2>&1 | head -1); [ "$out" = ":status: 502" ]; check ws_h2_101_without_accept_502 $? "$out"
grep -q "Sec-WebSocket-Accept does not answer" "$TMP/daemon.log"; check ws_h2_101_without_accept_cause_logged $? "$(tail -2 "$TMP/daemon.log")"
out=$($H2WS "$P" /ok status 2>&1 | head -1); [ "$out" = ":status: 502" ]; check ws_h2_200_instead_of_101_502 $? "$out"
# The proxy is the only one who can check the 101 for its HTTP/2 client (RFC 6455 4.1):
# a protocol other than websocket, or the accept given twice, is not a WebSocket tunnel.
out=$($H2WS "$P" /switch-other status 2>&1 | head -1); [ "$out" = ":status: 502" ]; check ws_h2_101_other_protocol_502 $? "$out"
out=$($H2WS "$P" /switch-two-accepts status 2>&1 | head -1); [ "$out" = ":status: 502" ]; check ws_h2_101_two_accepts_502 $? "$out"
# An upstream that sends as fast as a fast client reads: the tunnel's output stays within
# its bound (REQUEST_OUTPUT_MAX) instead of growing with what went through it.
out=$($H2WS "$P" /switch-flood drain 2>&1); peak=${out##* }
[ "${out%%,*}" = "drained 134217728" ] && [ "$peak" -lt $((16 << 20)) ]; check ws_h2_fast_tunnel_output_bounded $? "$out"
kill -0 "$DPID"; check ws_daemon_alive $? "daemon gone"
