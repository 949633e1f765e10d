#!/bin/bash
# The reverse proxy to h2c upstreams (proxy_pass = h2c://...): HTTP/2 with prior
# knowledge, nghttp2's client session, one exchange per connection at a time.  Peers:
# a gRPC server and client from python3-grpcio (unary, a trailers-only error, client
# streaming past the flow-control window, bidirectional streaming answered as it goes),
# nghttpd as a plain h2c file server (curl, h2load), and an h2c server on python3-h2
# (tests/upstream_h2_faults.py) for what a real server only does when it fails: a reset
# stream before and during the response, GOAWAY before the request and after a response,
# a close mid-body, trailers; the same server with windows opened wide at once and never
# acknowledged (as gRPC's, BDP-probed).  Clients: curl over HTTP/1.1 and h2c, h2load, grpc
# over an insecure channel to h2park's listener, and tests/h2_upload_burst.py (python3-h2),
# whose head and whole window of body leave in one write.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_h2_upstream.sh"
make_site
PY=/usr/bin/python3
for need in nghttpd curl h2load; do
  command -v $need >/dev/null || { echo "ok proxy_h2c # SKIP $need not installed"; exit 0; }
done
$PY -c 'import grpc, h2' 2>/dev/null || { echo "ok proxy_h2c # SKIP python3-grpcio or python3-h2 not installed"; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www"
head -c $((3 << 20)) /dev/urandom > "$TMP/www/three.bin"; chmod a+r "$TMP/www/three.bin"

G=$(free_port); N=$(free_port); F=$(free_port); W=$(free_port); DEAD=$(free_port)
$PY "$HERE/upstream_grpc.py" serve "$G" & PIDS="$PIDS $!"
$PY "$HERE/upstream_h2_faults.py" "$W" $((16 << 20)) & PIDS="$PIDS $!"
$PY "$HERE/upstream_h2_faults.py" "$F" & PIDS="$PIDS $!"
nghttpd --no-tls -d "$TMP/www" "$N" >/dev/null 2>&1 & PIDS="$PIDS $!"
for i in $(seq 1 100); do
  curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$N/index.html" &&
    curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$F/ok" &&
    curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$W/ok" &&
    $PY -c "import socket; socket.create_connection(('127.0.0.1', $G), 1)" 2>/dev/null && break
  sleep 0.1
done

P=$(free_port); T=$(free_port)
cat > "$TMP/h2c.conf" <<EOF2
$(h2_upstreams_conf h2c "$G" "$N" "$F")
location /w/ {
    proxy_pass = h2c://127.0.0.1:$W/
}
location /dead/ {
    proxy_pass = h2c://127.0.0.1:$DEAD/
}
EOF2
PORT=$P; start_config "$TMP/h2c.conf" "$P" || { fail proxy_h2c_daemon_starts "$(grep -v info "$TMP/daemon.log" | head -2)"; exit 1; }

# ---- gRPC through h2park ----
check_grpc_through "" "$G"

# ---- nghttpd: files, pooled connections ----
check_file_to_every_client nghttpd_file_3MiB /n/three.bin "$TMP/www/three.bin"
h=$(curl -si --http1.1 "http://127.0.0.1:$P/n/index.html")
printf '%s' "$h" | grep -qi '^via: 2.0 h2park' && printf '%s' "$h" | grep -q 'h2park test'
check nghttpd_via_2_0 $? "$(printf '%s' "$h" | head -10 | tr '\r\n' '  ')"
check_h2load_and_reuse "" curl -s --http2-prior-knowledge "http://127.0.0.1:$F/conns"

# ---- faults ----
c=$(curl -s -o /dev/null -w '%{http_code}' --http2-prior-knowledge "http://127.0.0.1:$P/f/rst-head")
[ "$c" = 502 ] && grep -q 'GET /f/rst-head: upstream 127.0.0.1:'$F': upstream reset the stream (INTERNAL_ERROR)' "$TMP/daemon.log" &&
  grep -q '"target":"/f/rst-head".*"status":502.*"upstream_error":"upstream reset the stream (INTERNAL_ERROR) while reading the response header"' "$TMP/access.log"
check rst_stream_before_head_502_cause_logged $? "$c; $(grep rst-head "$TMP/daemon.log" | tail -1)"
curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$P/f/rst-body"; rc=$?
[ $rc = 92 ]; check rst_stream_mid_body_resets_h2_client $? "curl exit $rc (92: the stream was reset)"
b=$(curl -s --http1.1 "http://127.0.0.1:$P/f/rst-body"); rc=$?
[ $rc = 18 ] || [ $rc = 56 ]; check rst_stream_mid_body_cuts_h1_client $? "curl exit $rc, body '$b'"
curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$P/f/close-body"; rc=$?
[ $rc = 92 ]; check close_mid_body_resets_h2_client $? "curl exit $rc"
c=$(curl -s -o /dev/null -w '%{http_code}' --http2-prior-knowledge "http://127.0.0.1:$P/f/goaway")
[ "$c" = 502 ] && grep -q 'GET /f/goaway: upstream 127.0.0.1:'$F': upstream sent GOAWAY (NO_ERROR) before taking the request' "$TMP/daemon.log"
check goaway_before_request_502_cause_logged $? "$c; $(grep /f/goaway "$TMP/daemon.log" | tail -1)"
# A connection that said GOAWAY after a good response leaves the pool: the next request
# gets a new one, and its answer.
curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$P/f/ok"
before=$(curl -s --http2-prior-knowledge "http://127.0.0.1:$F/conns")
b1=$(curl -s --http2-prior-knowledge "http://127.0.0.1:$P/f/goaway-after")
b2=$(curl -s --http2-prior-knowledge "http://127.0.0.1:$P/f/ok")
after=$(curl -s --http2-prior-knowledge "http://127.0.0.1:$F/conns")
[ "$b1" = bye ] && [ "$b2" = ok ] && [ $((after - before)) = 2 ]
check goaway_after_response_leaves_pool $? "'$b1' '$b2', $((after - before - 1)) new upstream connections (want 1)"
c=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/dead/x")
[ "$c" = 502 ] && grep -q "GET /dead/x: upstream 127.0.0.1:$DEAD: connect() failed" "$TMP/daemon.log"
check upstream_down_502 $? "$c"
h=$(curl -si --http2-prior-knowledge "http://127.0.0.1:$P/f/grpc-error")
printf '%s' "$h" | grep -q '^grpc-status: 13' && printf '%s' "$h" | grep -q '^grpc-message: boom' &&
  ! printf '%s' "$h" | grep -qi '^content-length'
check trailers_only_head_passed_without_body $? "$(printf '%s' "$h" | tr '\r\n' '  ')"

# An upstream that never opens its window stops the upload: the client's send stalls
# (it times out having sent a few MiB of socket buffers, not 64), and the daemon's heap
# does not grow by the body.
head -c $((64 << 20)) /dev/zero > "$TMP/64m.bin"
j=$(stats_json); heap0=$(stat_from "$j" heap_alloc_bytes)
for proto in --http1.1 --http2-prior-knowledge; do
  up=$(curl -s -m 4 -o /dev/null -w '%{size_upload}' $proto --data-binary @"$TMP/64m.bin" "http://127.0.0.1:$P/f/noread"); rc=$?
  j=$(stats_json); heap1=$(stat_from "$j" heap_alloc_bytes)
  [ $rc = 28 ] && [ "${up:-0}" -lt $((16 << 20)) ] && [ $((heap1 - heap0)) -lt $((4 << 20)) ]
  check "upload_held_by_upstream_window_$([ $proto = --http1.1 ] && echo h1 || echo h2c)" $? "curl exit $rc, $up bytes sent, heap $heap0 -> $heap1"
done
rm -f "$TMP/64m.bin"

# An upstream whose windows are wide open from the start (as gRPC's, BDP-probed) sends
# nothing while the body comes: no WINDOW_UPDATE wakes the proxy, so the upload must go on
# because the client's body arrived, never wait for the upstream to speak.
head -c $((2 << 20)) /dev/urandom > "$TMP/2m.bin"
for proto in --http1.1 --http2-prior-knowledge; do
  b=$(curl -s -m 10 $proto --data-binary @"$TMP/2m.bin" "http://127.0.0.1:$P/w/count"); rc=$?
  [ $rc = 0 ] && [ "$b" = $((2 << 20)) ]
  check "upload_to_open_window_unprompted_$([ $proto = --http1.1 ] && echo h1 || echo h2c)" $? "curl exit $rc, upstream counted '$b'"
done
rm -f "$TMP/2m.bin"
# The same with the whole first window of body there at once, on a pooled connection
# (whose wide window is known): a head and 64 KiB leave in one go, and the rest follows.
curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$P/w/ok"
r=""; for i in 1 2 3; do r="$r $($PY "$HERE/h2_upload_burst.py" "$P" /w/count 300000)"; done
[ "$r" = " 300000 300000 300000" ]; check upload_burst_of_a_window_goes_on_unprompted $? "upstream counted:$r"

# ---- trailers to HTTP/1.1 clients ----
raw=$(curl -s --raw --http1.1 -H 'TE: trailers' "http://127.0.0.1:$P/f/trailers" | od -An -c | tr -d ' \n')
[ "$raw" = '2\r\nt\n\r\n0\r\nx-t:1\r\ngrpc-status:0\r\n\r\n' ]; check h1_chunked_trailers_when_te_trailers $? "$raw"
raw=$(curl -s --raw --http1.1 "http://127.0.0.1:$P/f/trailers" | od -An -c | tr -d ' \n')
[ "$raw" = '2\r\nt\n\r\n0\r\n\r\n' ]; check h1_trailers_dropped_without_te $? "$raw"

# ---- idle pooled h2c upstream connections park: socket, struct and session only ----
# What is allocated includes nghttp2's 20 KiB frame buffer and 4 KiB stream map, whose
# pages are given back while pooled: resident, a pooled connection is its session's tables.
check_idle_pool idle_h2c_upstream_pooled_parked /f0/slow /f/slow faults "127.0.0.1:$F" 40000

# ---- configuration ----
printf 'listen = 127.0.0.1:%s\nlocation / {\n    proxy_pass = grpc://127.0.0.1:9\n}\n' "$(free_port)" > "$TMP/bad.conf"
config_error config_bad_scheme_named "bad.conf:3" -c "$TMP/bad.conf" --check
grep -q "SCHEME http, https, h2c or h2" "$TMP/err.out"; check config_bad_scheme_names_the_schemes $? "$(head -2 "$TMP/err.out")"
stop_daemon
