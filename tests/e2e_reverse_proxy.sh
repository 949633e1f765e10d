#!/bin/bash
# The reverse proxy (proxy_pass) against real upstreams: nginx (files, the request fields
# it sees, keep-alive reuse), aiohttp (uploads streamed back, server-sent events, long
# polls) and a misbehaving server (tests/upstream_faults.py) for the faults no real server
# can be made to show: refusing, slow, resetting, half-closed, smuggling-shaped responses.
# Clients: curl over HTTP/1.1, h2c and TLS, h2load.  Each fault gets nginx's status and
# leaves no connection or memory behind (a churn run, heap back to its baseline).
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
for need in nginx curl h2load; do
  command -v $need >/dev/null || { echo "ok reverse_proxy # SKIP $need not installed"; exit 0; }
done
$PY -c 'import aiohttp' 2>/dev/null || { echo "ok reverse_proxy # SKIP python3-aiohttp not installed"; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www"
head -c $((3 << 20)) /dev/urandom > "$TMP/www/three.bin"; chmod a+r "$TMP/www/three.bin"
head -c $((10 << 20)) /dev/urandom > "$TMP/post.bin"

NG=$(free_port); AIO=$(free_port); FAULT=$(free_port); DEAD=$(free_port); NGKA=$(free_port)
mkdir -p "$TMP/nginx"; chmod a+rwx "$TMP/nginx"
cat > "$TMP/nginx/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $TMP/nginx/nginx.pid; error_log $TMP/nginx/error.log;
events { worker_connections 1000; }
http {
  access_log $TMP/nginx/access.log; keepalive_requests 100000;
  log_format conn '\$connection';
  client_body_temp_path $TMP/nginx; proxy_temp_path $TMP/nginx; fastcgi_temp_path $TMP/nginx;
  uwsgi_temp_path $TMP/nginx; scgi_temp_path $TMP/nginx;
  server { listen 127.0.0.1:$NG; root $TMP/www; access_log $TMP/nginx/conn.log conn;
    location = /fields { return 200 "host=\$http_host|xff=\$http_x_forwarded_for|xfp=\$http_x_forwarded_proto|xfh=\$http_x_forwarded_host|fwd=\$http_forwarded|via=\$http_via|cookie=\$http_cookie|conn=\$http_connection|ka=\$http_keep_alive|te=\$http_te|foo=\$http_foo|expect=\$http_expect|date=\$http_date|server=\$http_server|accept=\$http_sec_websocket_accept|ka2=\$http_x_keep|uri=\$request_uri|\n"; }
    location = /hop { add_header Connection "close, x-secret" always; add_header X-Secret hidden; add_header Keep-Alive "timeout=5"; return 200 "hop\n"; }
  }
  server { listen 127.0.0.1:$NGKA; root $TMP/www; keepalive_timeout 1s; }
}
EOF
nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" 2>/dev/null & NGPID=$!; PIDS="$PIDS $NGPID"
# nginx's master stops its worker on TERM; lib.sh's kill -9 would leave the worker holding
# the test's output open.
trap 'kill -TERM $NGPID 2>/dev/null; wait $NGPID 2>/dev/null; cleanup' EXIT
$PY "$HERE/upstream_aiohttp.py" "$AIO" & PIDS="$PIDS $!"
$PY "$HERE/upstream_faults.py" "$FAULT" & PIDS="$PIDS $!"
for i in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$NG/index.html" && curl -s -o /dev/null "http://127.0.0.1:$AIO/headers" &&
    curl -s -o /dev/null "http://127.0.0.1:$FAULT/ok" && break
  sleep 0.1
done

# One daemon per upstream: proxy_pass in "location /", the other lines after it at the top
# level (the proxy_* limits are inherited by the location, upstream sections stay there).
proxy_to() { # NAME ADDR [more config lines]
  local name=$1 addr=$2; shift 2
  P=$(free_port); T=$(free_port)
  { echo "listen = 127.0.0.1:$P"; echo "listen = 127.0.0.1:$T tls"; echo "cert = $TMP/cert.pem"; echo "key = $TMP/key.pem"
    echo "root = $TMP/www"; echo "workers = 1"; echo "access_log = $TMP/$name.access"; echo "access_log_format = json"
    echo "location / {"; echo "    proxy_pass = http://$addr"; echo "}"; for l in "$@"; do echo "$l"; done; } > "$TMP/$name.conf"
  PORT=$P; start_config "$TMP/$name.conf" "$P"
}

# ---- nginx: files, fields, keep-alive ----
proxy_to ng "127.0.0.1:$NG"
check_file_to_every_client nginx_file_3MiB /three.bin "$TMP/www/three.bin"
# A large body is read from the upstream 256 KiB at a time (wide output) while the
# worker's budget for it lasts: 200 HTTP/2 streams whose clients open no flow-control
# window, each holding a 3 MiB response, take no more than the budget's 64 MiB of it (170
# shares of 384 KiB), and it all comes back when their clients go.
share=$(( 2 * (256 - 64) << 10 )); full=$(( (64 << 20) / share * share ))
mkfifo "$TMP/stall.in"
$PY "$HERE/h2_stalled_streams.py" "$P" /three.bin 2 100 < "$TMP/stall.in" > "$TMP/stall.out" 2>&1 & STALL=$!
exec 7> "$TMP/stall.in"
for i in $(seq 1 600); do grep -q "heads\|closed" "$TMP/stall.out" && break; sleep 0.1; done
for i in $(seq 1 50); do w=$(stat_of wide_output_bytes); [ "${w:-0}" -ge $full ] && break; sleep 0.1; done
sleep 0.3; w=$(stat_of wide_output_bytes)
[ "$(cat "$TMP/stall.out")" = "heads 200" ] && [ "${w:-0}" = $full ]
check wide_output_within_budget $? "$(cat "$TMP/stall.out"); wide_output_bytes ${w:-none}, the budget's full shares $full"
exec 7>&-
wait $STALL
wait_stat wide_output_bytes 0
check wide_output_budget_given_back $? "wide_output_bytes $(stat_of wide_output_bytes) after the clients left"
# HTTP/1.1 over TLS: a client that takes a little at each wake-up (small segments, a small
# window) never lets the connection's sealed records drain, and the response's output is
# handed on only once they have: what waits for it stays one output and its records
# (before, a 256 KiB output was sealed on top of what waited at every wake-up, and three
# such clients grew the heap by 20 MB in five seconds).
head -c $((32 << 20)) /dev/urandom > "$TMP/www/big.bin"; chmod a+r "$TMP/www/big.bin"
h0=$(stat_of heap_alloc_bytes); hmax=$h0
$PY "$HERE/h1_slow_reader.py" "$T" /big.bin 3 5 > "$TMP/slow.out" 2>&1 & SLOW=$!
while kill -0 $SLOW 2>/dev/null; do
  h=$(stat_of heap_alloc_bytes); [ "${h:-0}" -gt "$hmax" ] && hmax=$h
  sleep 0.25
done
wait $SLOW
got=$(cat "$TMP/slow.out")
[ "${got:-0}" -gt 1000000 ] 2>/dev/null && [ $(( (hmax - h0) / 3 )) -lt $((1536 << 10)) ]
check tls_h1_slow_reader_output_bounded $? "read ${got:-?} bytes; heap grew by $(( (hmax - h0) / 3 )) bytes per client at most"
echo "# slow TLS HTTP/1.1 readers: heap +$(( (hmax - h0) / 3 )) bytes per client at most, ${got:-?} bytes read"
rm -f "$TMP/www/big.bin"
f=$(curl -s -H 'X-Forwarded-For: 10.9.8.7' -H 'Forwarded: for=10.9.8.7' -H 'Via: 1.0 corp' -H 'Connection: foo' \
      -H 'Foo: dropped' -H 'Keep-Alive: timeout=1' -H 'TE: trailers' "http://127.0.0.1:$P/fields?q=1")
case "$f" in *"host=127.0.0.1:$P|"*"xff=10.9.8.7, 127.0.0.1|xfp=http|xfh=127.0.0.1:$P|fwd=for=10.9.8.7, for=127.0.0.1;proto=http;host=\"127.0.0.1:$P\"|via=1.0 corp, 1.1 h2park ("*")|"*"conn=|ka=|te=|foo=|"*"uri=/fields?q=1|"*) r=0 ;; *) r=1 ;; esac
check fields_forwarded_and_hop_by_hop_removed $r "$f"
# HPACK to an HTTP/2 client: the Via the proxy adds to every response is sent
# never-indexed, as the date is: entered in the client's table it would be memory (150
# bytes) every parked client connection keeps, to save 9 bytes a response.
f=$($PY "$HERE/h2fields.py" "$P" /index.html)
echo "$f" | $PY -c 'import re, sys; e1, e2, never = re.match(r"entries=(\d+)/(\d+) bytes=\d+/\d+ never=(\S+)$", sys.stdin.read().strip()).groups(); assert e1 == e2 and "via" in never.split(","), never'
check h2_via_never_indexed $? "$f"
f=$(curl -sk --http2 -H 'cookie: a=1' -H 'cookie: b=2' "https://127.0.0.1:$T/fields")
case "$f" in *"xfp=https|"*"via=2.0 h2park ("*")|cookie=a=1; b=2|"*) r=0 ;; *) r=1 ;; esac
check h2_cookies_joined_proto_https $r "$f"
# A request's Date, Server and Sec-WebSocket-Accept are end-to-end (only a response's
# are the proxy's to replace); Connection's keep-alive names nothing that is passed on,
# and the field it lists beside it is still dropped.
f=$(curl -s -H 'Date: Tue, 01 Dec 2026 10:00:00 GMT' -H 'Server: client-side' -H 'Sec-WebSocket-Accept: x' \
      -H 'Connection: Keep-Alive, X-Keep' -H 'X-Keep: dropped' "http://127.0.0.1:$P/fields")
case "$f" in *"date=Tue, 01 Dec 2026 10:00:00 GMT|server=client-side|accept=x|ka2=|"*) r=0 ;; *) r=1 ;; esac
check request_date_server_passed_connection_list_read $r "$f"
# Every Connection field names hop-by-hop fields, not only the first (RFC 9110 7.6.1: a
# field may be given several times, each a list).
f=$(curl -s -H 'Connection: keep-alive' -H 'Connection: foo' -H 'Foo: dropped' "http://127.0.0.1:$P/fields")
case "$f" in *"|foo=|"*) r=0 ;; *) r=1 ;; esac
check request_every_connection_field_read $r "$f"
h=$(curl -si "http://127.0.0.1:$P/hop")
! printf '%s' "$h" | grep -qiE '^(x-secret|keep-alive):' && printf '%s' "$h" | grep -qi '^via: 1.1 h2park'
check response_hop_by_hop_removed $? "$(printf '%s' "$h" | head -12 | tr '\r\n' '  ')"
before=$(sort -u "$TMP/nginx/conn.log" | wc -l)
h2load -n 2000 -c 10 -m 1 --h1 "http://127.0.0.1:$P/index.html" > "$TMP/h2load.out" 2>&1
ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/h2load.out")
after=$(sort -u "$TMP/nginx/conn.log" | wc -l)
[ "$ok2" = 2000 ] && [ $((after - before)) -le 12 ]; check upstream_keepalive_reused $? "$ok2 2xx, $((after - before)) upstream connections for 2000 requests"
h2load -n 5000 -c 20 -m 10 "http://127.0.0.1:$P/index.html" > "$TMP/h2load.out" 2>&1
ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/h2load.out")
[ "$ok2" = 5000 ]; check h2c_multiplexed_5000 $? "$(grep -E '^(requests|status)' "$TMP/h2load.out" | tr '\n' ' ')"
grep -q '"upstream_addr":"127.0.0.1:'$NG'","upstream_status":200,"upstream_connect_time":[0-9.]*,"upstream_header_time":[0-9.]*,"upstream_response_time":[0-9.]*' "$TMP/ng.access"
check access_log_upstream_fields $? "$(tail -1 "$TMP/ng.access")"
m=$(curl -s "http://127.0.0.1:$P/metrics")
printf '%s' "$m" | grep -q "h2park_upstream_responses_total{upstream=\"\",server=\"127.0.0.1:$NG\",code=\"2xx\"} [1-9]" &&
  printf '%s' "$m" | grep -q "h2park_upstream_up{upstream=\"\",server=\"127.0.0.1:$NG\"} 1"
check metrics_upstream $? "$(printf '%s' "$m" | grep upstream | head -5)"
if command -v promtool >/dev/null; then
  printf '%s\n' "$m" | promtool check metrics >/dev/null 2>"$TMP/promtool.out"; check metrics_upstream_promtool $? "$(head -3 "$TMP/promtool.out")"
fi
# The dashboard's upstream table: the server as the daemon has it now, and drawn.
d=$(curl -s "http://127.0.0.1:$P/-/dashboard/data")
$PY -c 'import json, sys; u = json.loads(sys.argv[1])["upstreams"]; assert len(u) == 1 and u[0]["server"] == "127.0.0.1:" + sys.argv[2] and u[0]["upstream"] == "" and u[0]["up"] and u[0]["responses"][1] >= 7000 and u[0]["requests"] >= u[0]["responses"][1] and u[0]["idle"] >= 1 and u[0]["failures"] == 0, u' "$d" "$NG"
check dashboard_upstream_data $? "$(grep -o '"upstreams".*' <<< "$d" | head -c 300)"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
  dom=$(timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=3000 --dump-dom "http://127.0.0.1:$P/-/dashboard" 2>/dev/null)
  row=$(grep -oE "<tr data-server=\"127.0.0.1:$NG\">.*</tr>" <<< "$dom" | head -1)
  grep -q '<section id="upstreams">' <<< "$dom" && grep -q '<td>(location)</td><td>127.0.0.1:'$NG'</td><td>up</td>' <<< "$row" &&
    grep -q '1 of 1 up' <<< "$dom"
  check dashboard_upstream_table_in_chromium $? "$(head -c 400 <<< "$row")"
else
  echo "ok dashboard_upstream_table_in_chromium # SKIP chromium is not installed (apt-get install chromium)"
fi
stop_daemon
# An upstream that closes its idle keep-alive connections after a second: the pooled
# connections are closed as it closes them (none left half-closed in the pool, none in
# CLOSE-WAIT), and the requests after them go on fresh ones - a POST among them.
proxy_to ka "127.0.0.1:$NGKA"
h2load -n 400 -c 20 -m 1 --h1 "http://127.0.0.1:$P/index.html" > "$TMP/h2load.out" 2>&1
pooled_ka() { curl -s "http://127.0.0.1:$P/metrics" | sed -n "s/^h2park_upstream_connections{upstream=\"\",server=\"127.0.0.1:$NGKA\",state=\"idle\"} //p"; }
before=$(pooled_ka)
sleep 2.5
after=$(pooled_ka)
waiting=$(ss -Htan state close-wait "( dport = :$NGKA )" | wc -l)
c1=$(code "$P" /index.html); c2=$(curl -s -o /dev/null -w '%{http_code}' -d x=1 "http://127.0.0.1:$P/index.html")
[ "${before:-0}" -ge 10 ] && [ "$after" = 0 ] && [ "$waiting" = 0 ] && [ "$c1" = 200 ] && [ "$c2" = 405 ]
check pooled_connection_closed_with_the_server $? "pooled $before, after the server's 1 s: $after; $waiting in CLOSE-WAIT; then GET $c1, POST $c2"
stop_daemon

# A server is named as the configuration spelled it: a unix socket's path with a quote and a
# backslash stays one well-formed label in /metrics and one JSON string in the dashboard's data.
odd="$TMP/q\"b\\c.sock"
proxy_to odd "unix:$odd:"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/x")
m=$(curl -s "http://127.0.0.1:$P/metrics"); d=$(curl -s "http://127.0.0.1:$P/-/dashboard/data")
esc=$(sed 's/[\\"]/\\&/g' <<< "unix:$odd")
[ "$code" = 502 ] && grep -qF "h2park_upstream_up{upstream=\"\",server=\"$esc\"} " <<< "$m" &&
  $PY -c 'import json, sys; u = json.loads(sys.argv[1])["upstreams"]; assert [x["server"] for x in u] == [sys.argv[2]], u' "$d" "unix:$odd"
check odd_server_name_escaped $? "code $code; $(grep upstream_up <<< "$m"); $(grep -o '"upstreams".*' <<< "$d" | head -c 300)"
if command -v promtool >/dev/null; then
  printf '%s\n' "$m" | promtool check metrics >/dev/null 2>"$TMP/promtool.out"; check odd_server_name_promtool $? "$(head -3 "$TMP/promtool.out")"
fi
stop_daemon
# A path is bytes, not text: one that is not UTF-8 (and one that is) stays a label
# Prometheus takes and a JSON string a strict decoder takes.
odd=$(printf '%s/bad\377\376-caf\303\251.sock' "$TMP")
proxy_to odd8 "unix:$odd:"
curl -s -o /dev/null "http://127.0.0.1:$P/x"
curl -s -o "$TMP/odd8.metrics" "http://127.0.0.1:$P/metrics"; curl -s -o "$TMP/odd8.json" "http://127.0.0.1:$P/-/dashboard/data"
$PY -c 'import json, sys; u = json.loads(open(sys.argv[1], "rb").read())["upstreams"]; assert u[0]["server"].endswith("/bad\ufffd\ufffd-caf\u00e9.sock"), u' "$TMP/odd8.json" 2>"$TMP/json.out"
check odd_server_name_not_utf8_json $? "$(tail -1 "$TMP/json.out")"
if command -v promtool >/dev/null; then
  promtool check metrics < "$TMP/odd8.metrics" >/dev/null 2>"$TMP/promtool.out"; check odd_server_name_not_utf8_promtool $? "$(head -3 "$TMP/promtool.out")"
fi
stop_daemon

# ---- aiohttp: streaming both ways ----
proxy_to aio "127.0.0.1:$AIO" "proxy_read_timeout = 55s"
want=$(sha256sum < "$TMP/post.bin" | cut -d' ' -f1)
got=$(curl -s --http1.1 --data-binary @"$TMP/post.bin" "http://127.0.0.1:$P/echo" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check upload_10MiB_h1_content_length $? "sha256 $got"
got=$(curl -s --http1.1 -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/post.bin" "http://127.0.0.1:$P/echo" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check upload_10MiB_h1_chunked $? "sha256 $got"
got=$(curl -s --http1.1 -H 'Expect: 100-continue' --data-binary @"$TMP/post.bin" "http://127.0.0.1:$P/echo" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check upload_expect_100_continue $? "sha256 $got"
got=$(cat "$TMP/post.bin" | curl -s --http2-prior-knowledge -T - -X POST "http://127.0.0.1:$P/echo" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check upload_10MiB_h2c_no_length_sent_chunked $? "sha256 $got"
got=$(curl -sk --http2 --data-binary @"$TMP/post.bin" "https://127.0.0.1:$T/echo" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check upload_10MiB_tls $? "sha256 $got"
# Server-sent events flush at once: the first event reaches the client while the upstream
# holds the second back until the client, having read the first, releases it.
for proto in --http1.1 --http2-prior-knowledge; do
  got=$(timeout 30 curl -sN $proto "http://127.0.0.1:$P/sse" | {
          read -r first; curl -s -o /dev/null "http://127.0.0.1:$P/release"
          while read -r line; do [ -n "$line" ] && break; done; echo "$first|$line"; cat >/dev/null; })
  [ "$got" = "data: 1|data: released" ]; check "sse_first_event_at_once${proto#--http}" $? "'$got'"
done
# Long polls: 200 of them waiting on the upstream, every client connection parked meanwhile
# (counted once all 200 are in, however long a loaded machine takes to start the clients;
# then the upstream answers them all).
# After a whole tick: a worker's first tick allocates its dashboard ring (600 samples,
# 67 KiB), which counted 336 bytes a poll when it fell between the two readings.
sleep 1.5
heap_idle=$(stat_of heap_alloc_bytes)
lpids=""
for i in $(seq 1 200); do curl -s -m 60 "http://127.0.0.1:$P/longpoll?s=50" -o /dev/null -w '%{http_code}\n' >> "$TMP/lp.out" & lpids="$lpids $!"; done
for i in $(seq 1 400); do
  j=$(stats_json); conns=$(stat_from "$j" conns); parked=$(stat_from "$j" parked_conns)
  [ "${conns:-0}" -ge 200 ] && break
  sleep 0.1
done
# ... and every handler waiting on its upstream parked too (after a whole tick), its live
# frames copied out and its stack given back: a few hundred bytes each, not 32 KiB.
for i in $(seq 1 100); do
  j=$(stats_json); ph=$(stat_from "$j" parked_handlers); phb=$(stat_from "$j" parked_handler_bytes)
  [ "${ph:-0}" -ge 200 ] && break
  sleep 0.1
done
heap_waiting=$(stat_from "$j" heap_alloc_bytes)
curl -s -o /dev/null "http://127.0.0.1:$AIO/release"
wait $lpids
n200=$(grep -c '^200$' "$TMP/lp.out")
[ "$n200" = 200 ] && [ "${conns:-0}" -ge 200 ] && [ "${parked:-0}" -ge 199 ]
check longpoll_200_clients_parked $? "$n200 answered; while waiting: $conns connections, $parked parked"
[ "${ph:-0}" -ge 200 ] && [ $(( ${phb:-0} / ${ph:-1} )) -lt 4096 ]
check longpoll_200_handlers_parked $? "${ph:-0} handlers parked, ${phb:-0} bytes"
echo "# 200 long polls waiting upstream: ${ph:-0} handlers parked, $(( ${phb:-0} / (${ph:-1} > 0 ? ${ph:-1} : 1) )) bytes of frames each"
# What a waiting long poll holds in all - its client connection, request, exchange and
# upstream connection, the handler's frames - counted in heap bytes, which do not vary
# from run to run as RSS does: 2,642 bytes here, 3,106 with the upstream's record, the
# response parser's error text and the steps' locals kept while waiting.
# (Sanitizer builds lay frames out with redzones of their own: there, only some.)
per_poll=$(( (${heap_waiting:-0} - ${heap_idle:-0}) / 200 )) per_poll_max=2900
[ "${SAN:-0}" = 0 ] && [ "${TSAN:-0}" = 0 ] || per_poll_max=1000000
[ "$per_poll" -gt 0 ] && [ "$per_poll" -le $per_poll_max ]
check longpoll_heap_per_waiting_request $? "$per_poll bytes (${heap_idle:-?} -> ${heap_waiting:-?})"
echo "# ... $per_poll heap bytes each, all told"
# HTTP/2 clients whose long polls waited together, then idle on their connections: the
# streams are gone and leave no holes among what the connections keep.  A stream shares no
# size class with nghttp2's HPACK tables (two of 1,024 bytes per connection); when it did,
# the spans the waiting streams had filled stayed resident: 930 bytes per idle connection.
printf '0.0\thttp://127.0.0.1:%s/longpoll?s=50\n600000.0\thttp://127.0.0.1:%s/ok\n' "$P" "$P" > "$TMP/lp-timing.txt"
timeout 120 h2load -c 200 -t 1 --timing-script-file="$TMP/lp-timing.txt" "http://127.0.0.1:$P" > "$TMP/lp-h2load.out" 2>&1 &
LPH2=$!; PIDS="$PIDS $LPH2"
for i in $(seq 1 400); do
  ph=$(stat_of parked_handlers); [ "${ph:-0}" -ge 200 ] && break
  sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$AIO/release"
for i in $(seq 1 100); do
  [ "$(stat_of parked_handlers)" = 0 ] && [ "$(stat_of handler_coroutines)" = 0 ] && break
  sleep 0.1
done
sleep 0.5
holes=$(curl -s --http2-prior-knowledge "http://127.0.0.1:$P/-/stats?classes" | $PY -c '
import json, sys
d = json.load(sys.stdin)
c = [k for k in d["classes"] if k["size"] == 1024]
print((c[0]["resident"] - 1024 * c[0]["objects"]) // max(d["conns"] - 1, 1) if c else 0, d["conns"], c[0]["objects"] if c else 0)')
kill $LPH2 2>/dev/null; wait $LPH2 2>/dev/null
set -- $holes
# (the HPACK tables are there to count: two per connection, or the check says nothing)
[ "${ph:-0}" -ge 200 ] && [ "${2:-0}" -ge 200 ] && [ "${3:-0}" -ge 400 ] && [ "${1:-999}" -le 256 ]
check h2c_idle_after_waiting_burst_no_holes $? "${1:-?} free bytes of class 1024 per idle connection (${2:-?} connections, ${3:-?} objects; ${ph:-0} waited)"
echo "# ... ${1:-?} free bytes of class 1024 per idle connection after 200 waited together"
stop_daemon

# ---- faults ----
proxy_to faults "127.0.0.1:$FAULT" "proxy_read_timeout = 1s" "proxy_connect_timeout = 1s"
st() { curl -s -m 10 -o "$TMP/body.out" -w '%{http_code}' "http://127.0.0.1:$P$1"; }
[ "$(st /ok)" = 200 ]; check fault_server_ok $? ""
[ "$(st /slow-head?s=2)" = 504 ]; check slow_head_504 $? ""
[ "$(st /half)" = 502 ]; check half_closed_502 $? ""
[ "$(st /close-early)" = 502 ]; check closed_before_response_502 $? ""
for bad in cl-te two-cl te-gzip fold status-20; do
  [ "$(st /$bad)" = 502 ]; check "smuggling_shaped_${bad}_502" $? "$(cat "$TMP/body.out")"
done
grep 'GET /cl-te' "$TMP/daemon.log" | grep -q 'Transfer-Encoding'; check smuggling_cause_logged $? "$(tail -2 "$TMP/daemon.log")"
grep 'GET /status-20' "$TMP/daemon.log" | grep -q 'invalid status code'; check bad_status_cause_logged $? "$(grep status-20 "$TMP/daemon.log" | tail -1)"
# ... and in the access log, whole: llhttp's reason after the proxy's words.
grep '"target":"/two-cl"' "$TMP/faults.access" | grep -q '"upstream_error":"upstream sent an invalid response: Duplicate Content-Length while reading the response header"'
check parser_cause_in_access_log $? "$(grep two-cl "$TMP/faults.access" | tail -1)"
# A fold split across reads (the upstream writes a byte at a time) is refused as the
# whole one is, never passed on.
[ "$(st /fold-split)" = 502 ]; check smuggling_shaped_fold_split_across_reads_502 $? "$(head -c 200 "$TMP/body.out")"
# Every Connection field of the response names fields to drop (three here, the names in
# the first and the last).
h=$(curl -si "http://127.0.0.1:$P/conn-fields")
! printf '%s' "$h" | grep -qiE '^(x-a|x-b|connection):' && printf '%s' "$h" | grep -qi '^x-c: 3'
check response_every_connection_field_read $? "$(printf '%s' "$h" | head -12 | tr '\r\n' '  ')"
# Bytes (or the close) arriving on a kept-alive connection after its response: it is not
# reused - the stray response is never a later client's, and the next request goes on a
# fresh connection without an error.
body=$(curl -s "http://127.0.0.1:$P/late"); sleep 0.6
later=$(for i in 1 2 3; do curl -s "http://127.0.0.1:$P/ok"; done | tr -d '\n')
[ "$body" = ok ] && [ "$later" = okokok ]; check late_bytes_on_pooled_connection_not_reused $? "'$body', then '$later'"
body=$(curl -s "http://127.0.0.1:$P/late-close"); sleep 0.6
later=$(for i in 1 2 3; do curl -s -w '%{http_code}' "http://127.0.0.1:$P/ok"; done | tr -d '\n')
[ "$body" = ok ] && [ "$later" = ok200ok200ok200 ]; check late_close_on_pooled_connection_fresh_one $? "'$body', then '$later'"
# A response followed by one nobody asked for: the first is passed on, the connection is
# never reused, and no later client sees the second.
body=$(curl -s "http://127.0.0.1:$P/double"); later=$(for i in 1 2 3; do curl -s "http://127.0.0.1:$P/ok"; done | tr -d '\n')
[ "$body" = first ] && [ "$later" = okokok ]; check double_response_not_reused $? "first '$body', then '$later'"
# Reset mid-body: HTTP/1.1 closes the connection short of Content-Length, HTTP/2 resets the stream.
curl -s -o /dev/null "http://127.0.0.1:$P/reset"; rc=$?
[ $rc = 18 ] || [ $rc = 56 ]; check reset_mid_body_h1_cut_short $? "curl exit $rc"
curl -s --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$P/reset"; rc=$?
[ $rc = 92 ] || [ $rc = 56 ] || [ $rc = 18 ]; check reset_mid_body_h2_stream_reset $? "curl exit $rc"
got=$(curl -s -m 10 "http://127.0.0.1:$P/slow-body"); [ "$got" = 1234567890 ]; check slow_body_within_read_timeout_passes $? "'$got'"
# 204 and 304 end at their head whatever length they name (llhttp ends them there): no
# wait for a body that never comes - a handler left waiting would fail at
# proxy_read_timeout, and say so in the error log (below) - and no timeout counted against
# the server.  The times are printed.
w=$(curl -s -m 10 -o /dev/null -o /dev/null -o /dev/null -w '%{http_code} %{time_total}\n' \
  "http://127.0.0.1:$P/not-modified" "http://127.0.0.1:$P/no-content-te" "http://127.0.0.1:$P/ok")
codes=$(awk '{printf "%s ", $1}' <<< "$w")
echo "# 304, 204, 200 on one connection: $(tr '\n' ';' <<< "$w")"
[ "$codes" = "304 204 200 " ]; check not_modified_and_no_content_end_at_head $? "$(tr '\n' ';' <<< "$w")"
sleep 1.5    # past proxy_read_timeout: a handler left waiting for the body has failed by now
errs=$(grep -E '/not-modified|/no-content-te' "$TMP/daemon.log")
[ -z "$errs" ]; check not_modified_and_no_content_no_upstream_error $? "$errs"
# ... and the connection goes back to the pool: the end is found at the head, not at a
# next byte an upstream keeping the connection never sends.
before=$(curl -s "http://127.0.0.1:$P/conns")
curl -s -o /dev/null -o /dev/null "http://127.0.0.1:$P/not-modified" "http://127.0.0.1:$P/not-modified"
after=$(curl -s "http://127.0.0.1:$P/conns")
[ -n "$before" ] && [ "$after" = "$before" ]
check not_modified_connection_reused $? "upstream connections accepted: $before before two 304s, $after after"
# More fields than a response passes on: 502, never a head with fields cut away, nor a
# write past the field array (a 101 has one field more of its own).
[ "$(st /many-fields)" = 502 ]; check too_many_upstream_fields_502 $? "$(head -c 200 "$TMP/body.out")"
# ... and more than it reads at all, even of fields it would drop.
[ "$(st /many-dropped)" = 502 ] && grep -q 'many-dropped: upstream .*: upstream sent too many header fields' "$TMP/daemon.log"
check too_many_upstream_fields_even_dropped_502 $? "$(head -c 200 "$TMP/body.out"); $(grep many-dropped "$TMP/daemon.log" | tail -1)"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
  -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "http://127.0.0.1:$P/switch-many")
[ "$code" = 502 ] && kill -0 "$DPID"; check too_many_fields_in_101_502 $? "code $code"
many=(); for i in $(seq 1 130); do many+=(-H "X-N$i: $i"); done
code=$(curl -s -m 5 -o "$TMP/body.out" -w '%{http_code}' "${many[@]}" "http://127.0.0.1:$P/head-fields")
[ "$code" = 431 ]; check request_with_more_fields_than_passed_on_431 $? "code $code: $(head -c 120 "$TMP/body.out")"
grep -q 'too many header fields' "$TMP/daemon.log"; check too_many_fields_cause_logged $? "$(grep -i field "$TMP/daemon.log" | tail -1)"
grep -q '"upstream_error":"upstream timed out' "$TMP/faults.access" && grep -q '"status":504' "$TMP/faults.access"
check access_log_upstream_error $? "$(grep 504 "$TMP/faults.access" | tail -1)"
# Churn: faults and successes, many times; then no connection is left and the heap is back.
base=$(stat_of heap_alloc_bytes)
for round in 1 2 3; do
  cpids=""
  for p in ok cl-te close-early half reset double ok ok; do curl -s -o /dev/null -m 5 "http://127.0.0.1:$P/$p" & cpids="$cpids $!"; done
  wait $cpids
  h2load -n 400 -c 20 --h1 "http://127.0.0.1:$P/ok" >/dev/null 2>&1
done
wait_stat handler_coroutines 0 10
sleep 1.5
conns=$(stat_of conns); heap=$(stat_of heap_alloc_bytes)
[ "$conns" -le 1 ] && [ $(( heap - base )) -lt 262144 ]; check churn_back_to_baseline $? "conns $conns, heap $base -> $heap"
kill -0 "$DPID"; check faults_daemon_alive $? ""
stop_daemon

# ---- several servers: retries, passive health, backup, balance ----
proxy_to group backend "upstream backend {" "server = 127.0.0.1:$DEAD" "server = 127.0.0.1:$NG weight=2" \
  "server = 127.0.0.1:$AIO backup" "}" "proxy_connect_timeout = 1s"
codes=$(for i in $(seq 1 6); do curl -s -o /dev/null -w '%{http_code} ' "http://127.0.0.1:$P/index.html"; done)
[ "$codes" = "200 200 200 200 200 200 " ]; check retry_refused_server_then_healthy $? "$codes"
grep -q "upstream 127.0.0.1:$DEAD: 1 failure (connect() failed): left out" "$TMP/daemon.log"; check passive_health_left_out $? "$(grep upstream "$TMP/daemon.log" | tail -2)"
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary x "http://127.0.0.1:$P/index.html")
[ "$code" = 405 ] || [ "$code" = 200 ]; check post_retried_when_nothing_sent $? "$code"
stop_daemon
proxy_to backup backend "upstream backend {" "server = 127.0.0.1:$DEAD" "server = 127.0.0.1:$NG backup" "}" \
  "proxy_connect_timeout = 1s"
codes=$(for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' "http://127.0.0.1:$P/index.html"; done)
[ "$codes" = "200 200 200 " ]; check backup_serves_when_primaries_fail $? "$codes"
stop_daemon
proxy_to onlydead "127.0.0.1:$DEAD"
[ "$(st /x)" = 502 ]; check upstream_down_502 $? ""
grep -q 'connect() failed' "$TMP/onlydead.access"; check upstream_down_cause_logged $? "$(tail -1 "$TMP/onlydead.access")"
stop_daemon
# More tries than servers: each server is tried once, and the answer is the last one's
# own failure (nginx caps proxy_next_upstream_tries at the number of servers), not "no live
# upstreams".
proxy_to tries "127.0.0.1:$DEAD" "proxy_next_upstream_tries = 3"
[ "$(st /x)" = 502 ] && grep -q '"upstream_error":"connect() failed (111: Connection refused) while connecting to upstream"' "$TMP/tries.access" && ! grep -q 'no live' "$TMP/tries.access"
check tries_over_servers_refused_502_its_cause $? "$(tail -1 "$TMP/tries.access")"
stop_daemon
proxy_to tries2 "127.0.0.1:$FAULT" "proxy_next_upstream_tries = 3" "proxy_read_timeout = 1s"
[ "$(st /slow-head?s=2)" = 504 ] && grep -q '"upstream_error":"upstream timed out' "$TMP/tries2.access"
check tries_over_servers_timeout_504 $? "$(tail -1 "$TMP/tries2.access")"
stop_daemon

# ---- locations: each its upstream and settings, the rest served as files ----
P=$(free_port); mkdir -p "$TMP/local"; echo local > "$TMP/local/local.txt"; chmod -R a+rX "$TMP/local"
cat > "$TMP/locations.conf" <<EOF
listen = 127.0.0.1:$P
workers = 1
root = $TMP/local
upstream ngx {
    server = 127.0.0.1:$NG
    keepalive = 0
}
site * {
    proxy_set_host = backend.internal
    location /app/ {
        proxy_pass = http://ngx/
    }
    location = /exact {
        proxy_pass = http://127.0.0.1:$NG/fields
    }
    location /headers {
        proxy_pass = http://127.0.0.1:$AIO
        proxy_set_host = other.internal
    }
}
EOF
PORT=$P; start_config "$TMP/locations.conf" "$P"
f=$(curl -s "http://127.0.0.1:$P/app/fields?x=1")
case "$f" in *"host=backend.internal|"*"conn=close|"*"uri=/fields?x=1|"*) r=0 ;; *) r=1 ;; esac
check location_path_replaced_site_host_group_keepalive_0 $r "$f"
# The location was chosen by the decoded path: the swap is made on it too, never on the raw
# target (which left /%61pp/ and //app/ unswapped, reaching the upstream's tree as they came).
f1=$(curl -s --path-as-is "http://127.0.0.1:$P/%61pp/fields?x=1"); f2=$(curl -s --path-as-is "http://127.0.0.1:$P//app/fields")
case "$f1|$f2" in *"uri=/fields?x=1|"*"|"*"uri=/fields|"*) r=0 ;; *) r=1 ;; esac
check location_path_swapped_on_decoded_path $r "$f1 / $f2"
f=$(curl -s "http://127.0.0.1:$P/exact")
case "$f" in *"host=backend.internal|"*"uri=/fields|"*) r=0 ;; *) r=1 ;; esac
check exact_location_to_its_uri $r "$f"
f=$(curl -s "http://127.0.0.1:$P/headers")
grep -q '^host: other.internal$' <<< "$f"; check location_own_set_host_over_site $? "$(head -3 <<< "$f")"
[ "$(curl -s "http://127.0.0.1:$P/local.txt")" = local ]; check unproxied_location_serves_files $? ""
m=$(curl -s "http://127.0.0.1:$P/metrics")
grep -q "h2park_upstream_responses_total{upstream=\"ngx\",server=\"127.0.0.1:$NG\",code=\"2xx\"} [1-9]" <<< "$m" &&
  grep -q "h2park_upstream_responses_total{upstream=\"\",server=\"127.0.0.1:$AIO\",code=\"2xx\"} 1" <<< "$m"
check metrics_per_group_and_server $? "$(grep upstream_responses <<< "$m" | grep 2xx)"
# A reload that changes a group's servers: the new server answers, on a pool of its own
# (the old one's kept-alive connections are not taken for it).
sed -i "s|^    server = 127.0.0.1:$NG\$|    server = 127.0.0.1:$AIO|; s|^    keepalive = 0\$|    keepalive = 8|" "$TMP/locations.conf"
curl -s -o /dev/null "http://127.0.0.1:$P/app/index.html"
reload_and_wait
f=$(curl -s "http://127.0.0.1:$P/app/headers"); f2=$(curl -s "http://127.0.0.1:$P/app/headers")
grep -q '^host: backend.internal$' <<< "$f" && grep -q '^host: backend.internal$' <<< "$f2"
check reload_group_to_new_server $? "$(head -3 <<< "$f")"
m=$(curl -s "http://127.0.0.1:$P/metrics")
grep -q "h2park_upstream_responses_total{upstream=\"ngx\",server=\"127.0.0.1:$AIO\",code=\"2xx\"} 2" <<< "$m" &&
  ! grep -q "upstream=\"ngx\",server=\"127.0.0.1:$NG\"" <<< "$m"
check reload_metrics_follow_servers $? "$(grep upstream_responses <<< "$m" | grep 2xx)"
stop_daemon

# ---- configuration errors name file and line ----
printf 'listen = 127.0.0.1:%s\nlocation /api/ {\n  proxy_pass = http://nosuch\n}\n' "$(free_port)" > "$TMP/bad1.conf"
config_error config_unknown_upstream_group "bad1.conf:3: proxy_pass names upstream 'nosuch'" -c "$TMP/bad1.conf" --check
printf 'listen = 127.0.0.1:%s\nupstream b {\n  server = 127.0.0.1:1 weight=0\n}\n' "$(free_port)" > "$TMP/bad2.conf"
config_error config_bad_weight "bad2.conf:3: server: bad value '0' for weight" -c "$TMP/bad2.conf" --check
printf 'listen = 127.0.0.1:%s\nlocation / {\n  proxy_pass = ftp://x\n}\n' "$(free_port)" > "$TMP/bad3.conf"
config_error config_bad_scheme "bad3.conf:3: proxy_pass 'ftp://x'" -c "$TMP/bad3.conf" --check
# Every mistake at once, each with its line: a proxy_pass outside a location, a server
# outside an upstream, a group of backups only, a group given twice, an unknown option.
cat > "$TMP/bad4.conf" <<EOF
listen = 127.0.0.1:$(free_port)
proxy_pass = http://127.0.0.1:1
server = 127.0.0.1:2
upstream spare {
    server = 127.0.0.1:3 backup
}
upstream spare {
    server = 127.0.0.1:4 slow_start=1
    root = /srv
}
site example.com {
    location /a/ {
        proxy_pass = http://spare
        return = 204
    }
}
EOF
out=$("$H2PARK" -c "$TMP/bad4.conf" --check 2>&1); rc=$?
want=("bad4.conf:2: 'proxy_pass' is not allowed at the top level: it goes only in a location"
      "bad4.conf:3: 'server' is not allowed at the top level: it goes only in an upstream section"
      "bad4.conf:7: upstream spare is given twice (first at "
      "bad4.conf:8: server: unknown option 'slow_start'"
      "bad4.conf:9: 'root' is not allowed in this upstream"
      "bad4.conf:14: return and proxy_pass both given"
      "bad4.conf:4: upstream spare has only backup servers")
missing=""
for w in "${want[@]}"; do grep -qF "$w" <<< "$out" || missing="$missing [$w]"; done
[ "$rc" = 2 ] && [ -z "$missing" ]; check config_proxy_errors_all_at_once $? "rc $rc, missing:$missing; got: $out"
