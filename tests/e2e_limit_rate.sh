#!/bin/bash
# A response's bandwidth limit (limit_rate, limit_rate_after): static files over HTTP/1.1
# (sendfile), h2c, h2 over TLS and HTTP/1.1 over TLS take as long as the rate says at least (lower bounds only: a busy machine
# makes them longer, never shorter) and arrive whole; limit_rate_after's bytes go first at
# full speed; on one HTTP/2 connection a limited stream holds back no other; a proxied
# 10 MiB body from nginx is read from it no faster than the client is sent it (the heap
# stays bounded); the connection and a slow proxy's handler park between bursts; a client
# that stops reading a limited response pins nothing more and is closed at write_timeout;
# bad values are errors naming file:line.  Rates and times are printed ("#" lines).
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
for need in nginx curl nghttp; do
  command -v $need >/dev/null || { echo "ok limit_rate # SKIP $need not installed"; exit 0; }
done
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www"
head -c $((1 << 20)) /dev/urandom > "$TMP/www/1m.bin"
head -c $((10 << 20)) /dev/urandom > "$TMP/www/10m.bin"
chmod a+r "$TMP/www/1m.bin" "$TMP/www/10m.bin"
SUM1=$(sha256sum < "$TMP/www/1m.bin" | cut -d' ' -f1)
SUM10=$(sha256sum < "$TMP/www/10m.bin" | cut -d' ' -f1)

NG=$(free_port)
start_nginx <<EOF
  server { listen 127.0.0.1:$NG; root $TMP/www; }
EOF
trap 'kill -TERM $NGPID 2>/dev/null; wait $NGPID 2>/dev/null; cleanup' EXIT
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$NG/index.html" && break; sleep 0.1; done
# An upstream whose body comes in two pieces (see proxied_pieces_after_empty_spell below).
cat > "$TMP/burst_up.py" <<'EOF'
import socket, sys, threading, time
first, rest = int(sys.argv[2]), int(sys.argv[3])
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]))); ls.listen(16)
def serve(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            return
        buf += d
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (first + rest) + b"a" * first)
    time.sleep(0.05)
    c.sendall(b"b" * rest)
    time.sleep(1)
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
UP=$(free_port)
$PY "$TMP/burst_up.py" "$UP" 32768 65536 & PIDS="$PIDS $!"
for i in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/$UP) 2>/dev/null && break; sleep 0.1; done

{ proxy_conf_head limit
  cat <<EOF
write_timeout = 3s
location /slow/ {
    alias = $TMP/www/
    limit_rate = 200k
}
location /after/ {
    alias = $TMP/www/
    limit_rate = 200k
    limit_rate_after = 512k
}
location /proxy/ {
    proxy_pass = http://127.0.0.1:$NG/
    limit_rate = 1m
}
location /crawl/ {
    proxy_pass = http://127.0.0.1:$NG/
    limit_rate = 32k
}
EOF
} > "$TMP/limit.conf"
PORT=$P
start_config "$TMP/limit.conf" "$P" || exit 1

fetch() { # PROTO PATH: "seconds sha256" of the body
  local opt url
  case $1 in h1) opt="--http1.1"; url="http://127.0.0.1:$P" ;; h2c) opt="--http2-prior-knowledge"; url="http://127.0.0.1:$P" ;;
             tls) opt="--http2 -k"; url="https://127.0.0.1:$T" ;; h1_tls) opt="--http1.1 -k"; url="https://127.0.0.1:$T" ;; esac
  curl -s $opt -m 60 -w '%{time_total}\n' -o "$TMP/body" "$url$2" > "$TMP/time"
  echo "$(cat "$TMP/time") $(sha256sum < "$TMP/body" | cut -d' ' -f1)"
}
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
kib_per_s() { awk -v s="$1" -v b="$2" 'BEGIN { printf "%.0f", b / 1024 / s }'; }

# ---- static files: 1 MiB at 200k is a second's worth at once, then 4.12 s more ----
for proto in h1 h2c tls h1_tls; do
  set -- $(fetch $proto /slow/1m.bin)
  at_least "$1" 3.5 && [ "$2" = "$SUM1" ]
  check "static_1m_at_200k_$proto" $? "took $1 s (at least 3.5 wanted), sha256 $2"
  echo "# static 1 MiB at limit_rate 200k over $proto: $1 s, $(kib_per_s "$1" $((1 << 20))) KiB/s"
  set -- $(fetch $proto /1m.bin)
  echo "# ... and without the limit: $1 s"
done

# ---- limit_rate_after: the first 512k at full speed, the rest at 200k ----
$PY - "$P" > "$TMP/after.out" <<'EOF'
import hashlib, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /after/1m.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
t0 = time.monotonic()
data, half = b"", None
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
    head_end = data.find(b"\r\n\r\n")
    if half is None and head_end >= 0 and len(data) - head_end - 4 >= 512 * 1024:
        half = time.monotonic() - t0
body = data[data.find(b"\r\n\r\n") + 4:]
print("%.3f %.3f %s" % (half or -1, time.monotonic() - t0, hashlib.sha256(body).hexdigest()))
EOF
set -- $(cat "$TMP/after.out")
at_least "$2" 1.2 && [ "$3" = "$SUM1" ]
check limit_rate_after_512k_then_200k $? "first 512 KiB in $1 s, all in $2 s (at least 1.2 wanted), sha256 $3"
echo "# limit_rate_after 512k: the first 512 KiB in $1 s, all 1 MiB in $2 s"

# ---- HTTP/2: a limited stream and an unlimited one on one connection ----
nghttp -ns "http://127.0.0.1:$P/slow/1m.bin" "http://127.0.0.1:$P/1m.bin" > "$TMP/nghttp.out" 2>&1
order=$(sed -n "/sorted by 'complete'/,\$p" "$TMP/nghttp.out" | awk '$5 == 200 { print $7 }' | tr '\n' ' ')
[ "$order" = "/1m.bin /slow/1m.bin " ]
check h2_limited_stream_holds_back_no_other $? "completed in the order: $order ($(tail -3 "$TMP/nghttp.out" | tr '\n' ' '))"
echo "# one h2c connection: $(sed -n "/sorted by 'complete'/,\$p" "$TMP/nghttp.out" | awk '$5 == 200 { printf "%s done at %s; ", $7, $2 }')"

# ---- python3-h2: a limited stream in full flow, then an unlimited one on the same connection ----
# The unlimited stream is asked for once the limited one is past its first second's worth
# (held back by the limit): it must arrive whole while the limited one is still far from done.
cat > "$TMP/two_streams.py" <<'EOF'
import hashlib, socket, ssl, sys, time
import h2.config, h2.connection, h2.events, h2.settings
port, tls = int(sys.argv[1]), sys.argv[2] == "tls"
s = socket.create_connection(("127.0.0.1", port))
if tls:
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(s, server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2"
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
c.initiate_connection()
c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
c.increment_flow_control_window(1 << 24)
def ask(sid, path):
    c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "https" if tls else "http"),
                         (":authority", "localhost")], end_stream=True)
ask(1, "/slow/1m.bin")
s.sendall(c.data_to_send())
t0 = time.monotonic()
body, ended, status = {1: hashlib.sha256(), 3: hashlib.sha256()}, {}, {}
got = {1: 0, 3: 0}
limited_when_other_done, asked = None, False
while len(ended) < 2:
    b = s.recv(65536)
    if not b:
        break
    for e in c.receive_data(b):
        if isinstance(e, h2.events.ResponseReceived):
            status[e.stream_id] = dict(e.headers)[":status"]
        elif isinstance(e, h2.events.DataReceived):
            body[e.stream_id].update(e.data); got[e.stream_id] += len(e.data)
            c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            ended[e.stream_id] = time.monotonic() - t0
            if e.stream_id == 3:
                limited_when_other_done = got[1]
        elif isinstance(e, h2.events.StreamReset):
            ended[e.stream_id] = -1
    if got[1] > 300 * 1024 and not asked:
        ask(3, "/1m.bin")
        asked = True
    s.sendall(c.data_to_send())
print(status.get(1), status.get(3), got[1], got[3], body[1].hexdigest(), body[3].hexdigest(),
      limited_when_other_done, "%.3f" % ended.get(1, -1), "%.3f" % ended.get(3, -1))
EOF
for proto in h2c tls; do
  port=$P; [ $proto = tls ] && port=$T
  set -- $($PY "$TMP/two_streams.py" $port $proto 2>&1)
  [ "$1" = 200 ] && [ "$2" = 200 ] && [ "$5" = "$SUM1" ] && [ "$6" = "$SUM1" ] && [ "${7:-x}" != None ] &&
    [ "${7:-0}" -lt $((600 * 1024)) ]
  check "h2_python_unlimited_stream_passes_limited_one_$proto" $? "statuses $1 $2, bytes $3 $4, limited stream at ${7:-?} bytes when the other ended ($*)"
  echo "# python3-h2 over $proto: unlimited 1 MiB asked at 300 KiB of the limited one, done at $9 s with the limited one at $(( ${7:-0} >> 10 )) KiB; the limited one done at $8 s"
done

# ---- parking between bursts: the connections of limited static transfers ----
curl -s --http1.1 -o /dev/null "http://127.0.0.1:$P/slow/1m.bin" & C1=$!; PIDS="$PIDS $C1"
curl -s --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$P/slow/1m.bin" & C2=$!; PIDS="$PIDS $C2"
sleep 2
s=$(stats_json)
conns=$(stat_from "$s" conns); parked=$(stat_from "$s" parked_conns); serve=$(stat_from "$s" serve_coroutines)
# One worker: whatever connection runs, it is the one asking, so 1 serve coroutine means
# the two transfers hold none between their bursts.
[ "$conns" = 3 ] && [ "$parked" = 2 ] && [ "$serve" = 1 ]
check limited_transfers_park_between_bursts $? "conns $conns, parked_conns $parked, serve_coroutines $serve"
wait $C1 $C2

# ---- a proxied 10 MiB body from nginx at 1m: whole, and the daemon's heap bounded ----
sleep 2.5                                   # a tick: what earlier requests freed goes back
heap0=$(stat_of heap_alloc_bytes); rss0=$(stat_of rss_bytes)
curl -s --http1.1 -m 60 -w '%{time_total}\n' -o "$TMP/proxied" "http://127.0.0.1:$P/proxy/10m.bin" > "$TMP/ptime" & C3=$!
PIDS="$PIDS $C3"
heap_max=0; rss_max=0
while kill -0 $C3 2>/dev/null; do
  s=$(stats_json); h=$(stat_from "$s" heap_alloc_bytes); r=$(stat_from "$s" rss_bytes)
  [ "${h:-0}" -gt $heap_max ] && heap_max=$h
  [ "${r:-0}" -gt $rss_max ] && rss_max=$r
  sleep 0.5
done
wait $C3
took=$(cat "$TMP/ptime"); sum=$(sha256sum < "$TMP/proxied" | cut -d' ' -f1)
at_least "$took" 7 && [ "$sum" = "$SUM10" ] && [ $((heap_max - heap0)) -lt $((2 << 20)) ]
check proxied_10m_at_1m_bounded $? "took $took s (at least 7 wanted), sha256 $sum, heap_alloc $heap0 -> at most $heap_max"
echo "# proxied 10 MiB at limit_rate 1m: $took s, $(kib_per_s "$took" $((10 << 20))) KiB/s; heap_alloc_bytes $heap0 -> at most $heap_max (+$(( (heap_max - heap0) >> 10 )) KiB), rss_bytes $rss0 -> at most $rss_max"

# ---- a proxy's handler writing ahead of a slow limit parks while its output drains ----
curl -s --http1.1 -m 30 -o /dev/null "http://127.0.0.1:$P/crawl/10m.bin" & C4=$!; PIDS="$PIDS $C4"
parked=0
for i in $(seq 1 40); do
  parked=$(stat_of parked_handlers)
  [ "${parked:-0}" -ge 1 ] && break
  sleep 0.2
done
s=$(stats_json)
[ "${parked:-0}" -ge 1 ]
check slow_proxied_handler_parks $? "parked_handlers $parked after $((i / 5)) s: $s"
echo "# proxied at 32k: handler parked within $(awk -v i=$i 'BEGIN { printf "%.1f", i / 5 }') s; parked_handler_bytes $(stat_from "$s" parked_handler_bytes), serve_coroutines $(stat_from "$s" serve_coroutines)"
kill $C4 2>/dev/null; wait $C4 2>/dev/null

# ---- a client that stops reading a limited proxied response pins nothing more ----
wait_stat conns 1 10
sleep 2.5
heap0=$(stat_of heap_alloc_bytes)
$PY - "$P" > "$TMP/stall.out" 2>&1 <<'EOF' & C5=$!
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /proxy/10m.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
got = 0
while got < 300 * 1024:
    got += len(s.recv(65536))
time.sleep(12)                              # reads nothing more
try:
    s.setblocking(False)
    while s.recv(65536):
        pass
    print("closed")
except BlockingIOError:
    print("still open")
except OSError as e:
    print("closed:", e)
EOF
PIDS="$PIDS $C5"
heap_max=0
for i in $(seq 1 16); do
  h=$(stat_of heap_alloc_bytes); [ "${h:-0}" -gt $heap_max ] && heap_max=$h
  sleep 0.5
done
closed=no; wait_stat conns 1 10 && closed=yes
wait $C5
[ $((heap_max - heap0)) -lt $((2 << 20)) ] && [ $closed = yes ]
check stalled_reader_pins_nothing_and_is_closed $? "heap_alloc $heap0 -> at most $heap_max, closed by write_timeout: $closed ($(cat "$TMP/stall.out"))"
echo "# a client that stopped reading at 300 KiB: heap_alloc_bytes $heap0 -> at most $heap_max (+$(( (heap_max - heap0) >> 10 )) KiB)"

# ---- /metrics counts the responses sent under a limit, and only those ----
rl() { curl -s "http://127.0.0.1:$P/metrics" | sed -n 's/^h2park_responses_rate_limited_total //p'; }
n0=$(rl); get "$P" /index.html >/dev/null; n1=$(rl); get "$P" /slow/index.html >/dev/null; n2=$(rl)
[ "$n1" = "$n0" ] && [ "$n2" = $((n0 + 1)) ]
check metrics_count_rate_limited_responses $? "h2park_responses_rate_limited_total $n0, $n1 after an unlimited response, $n2 after a limited one"

# ---- bad values: file:line and the problem, exit 2 ----
bad() { # NAME LINE WANT
  printf 'root = %s\n%s\n' "$TMP/www" "$2" > "$TMP/bad.conf"
  config_error "$1" "bad.conf:2: $3" -c "$TMP/bad.conf" --check
}
bad config_limit_rate_not_a_number "limit_rate = abc" "limit_rate: 'abc' is not a rate"
bad config_limit_rate_negative "limit_rate = -100k" "limit_rate: '-100k' is not a rate"
bad config_limit_rate_overflow "limit_rate = 17179869184g" "limit_rate: '17179869184g' is too large"
bad config_limit_rate_after_garbage "limit_rate_after = 1m; limit_rate 2k" "limit_rate_after: '1m; limit_rate 2k' is not a size"
printf 'location /x/ {\nlimit_rate = fast\n}\n' > "$TMP/bad.conf"
config_error config_limit_rate_in_location "bad.conf:2: limit_rate: 'fast' is not a rate" -c "$TMP/bad.conf" --check
stop_daemon

# ---- a proxied body that comes in pieces: after an empty spell the limit still lets it go ----
# The upstream (burst_up.py, started above) sends one second's worth at the limit (all the
# bucket holds), then, 50 ms later, the rest: the first piece empties the bucket and the
# output, and the second must still leave at the limit's pace - a lost wake-up once left it
# until the write deadline's timer, so write_timeout is its default here (30 s).  96 KiB at
# 32k takes 2 s; the bound, five times that, is for liveness, not speed.
{ proxy_conf_head burst
  printf 'location /burst/ {\n    proxy_pass = http://127.0.0.1:%s/\n    limit_rate = 32k\n}\n' "$UP"; } > "$TMP/burst.conf"
PORT=$P
start_config "$TMP/burst.conf" "$P" || exit 1
for proto in h1 h2c; do
  opt=--http1.1; [ $proto = h2c ] && opt=--http2-prior-knowledge
  out=$(curl -s $opt -m 10 -o "$TMP/burst" -w '%{http_code} %{time_total} %{size_download}' "http://127.0.0.1:$P/burst/x")
  set -- $out
  [ "$1" = 200 ] && [ "$3" = 98304 ] && [ "$(tr -d ab < "$TMP/burst" | wc -c)" = 0 ]
  check "proxied_pieces_after_empty_spell_$proto" $? "status $1, $3 bytes in $2 s (98304 wanted within 10 s)"
  echo "# proxied 32 KiB + 64 KiB 50 ms later at limit_rate 32k over $proto: $2 s"
done
stop_daemon
