#!/bin/bash
# The reverse proxy in front of application servers no one here wrote: a Go net/http app
# with gorilla/websocket (tests/upstream_go.go: server-sent events, long polls, a
# WebSocket echo, streamed uploads, a chunked body with a trailer), gunicorn
# (tests/upstream_wsgi.py: a generator's chunked body, uploads) and h2o serving files, all
# HTTP/1.1 upstreams behind one h2park; clients curl (HTTP/1.1, h2c, h2 over TLS),
# python3-websockets, h2load and headless Chromium (a page whose script opens an
# EventSource and a WebSocket through h2park over TLS, the WebSocket a stream of the page's
# HTTP/2 connection: RFC 8441).  Events reach the client as the
# upstream sends them, long polls park while they wait, and no upstream connection is left
# in use once it is over.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
for need in go gunicorn h2o curl h2load; do
  command -v $need >/dev/null || { echo "ok proxy_peers # SKIP $need not installed"; exit 0; }
done
[ -d /usr/share/gocode/src/github.com/gorilla/websocket ] ||
  { echo "ok proxy_peers # SKIP golang-github-gorilla-websocket-dev not installed"; exit 0; }
$PY -c 'import websockets' 2>/dev/null || { echo "ok proxy_peers # SKIP python3-websockets not installed"; exit 0; }
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www"
head -c $((2 << 20)) /dev/urandom > "$TMP/www/two.bin"; chmod a+r "$TMP/www/two.bin"
head -c $((5 << 20)) /dev/urandom > "$TMP/post.bin"

GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$TMP/gocache" go build -o "$TMP/upstream_go" "$HERE/upstream_go.go" \
  > "$TMP/gobuild.log" 2>&1
check go_upstream_builds $? "$(head -5 "$TMP/gobuild.log")"
GO=$(free_port); GU=$(free_port); HO=$(free_port)
"$TMP/upstream_go" "$GO" & PIDS="$PIDS $!"
gunicorn --bind "127.0.0.1:$GU" --workers 2 --chdir "$HERE" --error-logfile "$TMP/gunicorn.log" upstream_wsgi:app &
GUPID=$!; PIDS="$PIDS $GUPID"
# gunicorn's master replaces a worker that dies: lib.sh's kill -9 of the tree, workers first,
# would leave it time to start another.  TERM stops it with its workers.
trap 'kill -TERM $GUPID 2>/dev/null; wait $GUPID 2>/dev/null; cleanup' EXIT
{ echo "num-threads: 1"; echo "access-log: /dev/null"
  echo "listen:"; echo "  host: 127.0.0.1"; echo "  port: $HO"
  echo "hosts:"; echo "  default:"; echo "    paths:"; echo "      /:"; echo "        file.dir: $TMP/www"; } > "$TMP/h2o.conf"
h2o -c "$TMP/h2o.conf" > "$TMP/h2o.out" 2>&1 & PIDS="$PIDS $!"
up=1
for i in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$GO/conn" && curl -s -o /dev/null "http://127.0.0.1:$GU/hello" &&
    curl -s -o /dev/null "http://127.0.0.1:$HO/index.html" && { up=0; break; }
  sleep 0.1
done
check upstreams_started $up "go $(curl -s "http://127.0.0.1:$GO/conn"); $(tail -2 "$TMP/gunicorn.log"); $(tail -2 "$TMP/h2o.out")"

proxy_conf_head peers > "$TMP/peers.conf"
cat >> "$TMP/peers.conf" <<EOF
upstream go {
    server = 127.0.0.1:$GO
    keepalive = 8
}
location /go/ {
    proxy_pass = http://go/
    proxy_read_timeout = 60s
}
location /gunicorn/ {
    proxy_pass = http://127.0.0.1:$GU/
}
location /h2o/ {
    proxy_pass = http://127.0.0.1:$HO/
}
EOF
PORT=$P; start_config "$TMP/peers.conf" "$P"
H=http://127.0.0.1:$P
client() { # PROTO: curl's options for it, then the base URL
  case $1 in h1) echo "--http1.1 $H" ;; h2c) echo "--http2-prior-knowledge $H" ;; tls) echo "--http2 -k https://127.0.0.1:$T" ;; esac
}

# ---- Go net/http ----
for proto in h1 h2c tls; do
  set -- $(client $proto); url=${*: -1}; opts=${*:1:$#-1}
  # Each event reaches the client as it is sent: the upstream sends the next one only once
  # the client, having read this one, releases it (a proxy that held them back would see
  # "data: unreleased" after 20 s).
  timeout 90 curl -sN $opts "$url/go/sse?n=4&hold=$proto" | while IFS= read -r line; do
    [ -n "$line" ] || continue
    echo "$line"; curl -s $opts -o /dev/null "$url/go/release?hold=$proto"; done > "$TMP/sse.$proto"
  [ "$(cat "$TMP/sse.$proto" | tr '\n' ' ')" = "data: 0 data: 1 data: 2 data: 3 " ]
  check "go_sse_events_as_sent_$proto" $? "$(cat "$TMP/sse.$proto" | tr '\n' ' ')"
  got=$(curl -s $opts -X POST --data-binary @"$TMP/post.bin" "$url/go/upload")
  [ "$got" = "$(stat -c %s "$TMP/post.bin") $(sha256sum < "$TMP/post.bin" | cut -d' ' -f1)" ]
  check "go_upload_5MiB_$proto" $? "$got"
  got=$(curl -s $opts "$url/go/trailer")
  [ "$got" = "$(printf 'first part\nsecond part')" ]; check "go_chunked_with_trailer_$proto" $? "$got"
done
f=$(curl -s -H 'Connection: x-hop' -H 'X-Hop: no' "$H/go/headers")
grep -q "^x-forwarded-for: 127.0.0.1$" <<< "$f" && grep -qE "^via: 1.1 h2park \([0-9a-f]{16}\)$" <<< "$f" && ! grep -qi "^x-hop" <<< "$f" &&
  grep -q "^host: 127.0.0.1:$P$" <<< "$f"
check go_sees_forwarded_fields $? "$f"

# Long polls: 100 held by Go for 3 s, every handler parked while it waits, each answered.
curl -s -o /dev/null "$H/-/stats"
h2load -n 100 -c 100 -m 1 --h1 "$H/go/poll?ms=3000" > "$TMP/poll.out" 2>&1 & LP=$!
parked=0
for i in $(seq 1 25); do
  sleep 0.1
  parked=$(curl -s "$H/-/stats" | $PY -c 'import json, sys; print(json.load(sys.stdin)["parked_handlers"])')
  [ "$parked" -ge 100 ] && break
done
wait $LP
ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/poll.out")
[ "$parked" -ge 100 ] && [ "$ok2" = 100 ]; check go_long_polls_parked_while_waiting $? "parked $parked; $ok2 2xx"

# Keep-alive to Go: 500 requests over a few upstream connections.
h2load -n 500 -c 5 -m 1 --h1 "$H/go/conn" > /dev/null 2>&1
conns=$(for i in 1 2 3 4 5 6; do curl -s "$H/go/conn"; done | sort -u | wc -l)
[ "$conns" -le 5 ]; check go_keepalive_reused $? "$conns distinct upstream connections for 6 requests in a row"

# WebSocket to gorilla, with python3-websockets as the client, over HTTP/1.1 and TLS.
for proto in ws wss; do
  port=$P; [ $proto = wss ] && port=$T
  out=$($PY - "$proto" "$port" <<'PYEOF' 2>&1
import asyncio, ssl, sys
import websockets
async def main():
    proto, port = sys.argv[1], sys.argv[2]
    ctx = None
    if proto == "wss":
        ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    async with websockets.connect("%s://127.0.0.1:%s/go/ws" % (proto, port), ssl=ctx, max_size=None) as ws:
        assert await ws.recv() == "hello"
        for msg in ["one", b"\x00\x01" * 300000, "three"]:
            await ws.send(msg)
            assert await ws.recv() == msg
    print("echoed")
asyncio.run(asyncio.wait_for(main(), 20))
PYEOF
)
  [ "$out" = echoed ]; check "gorilla_websocket_echo_$proto" $? "$out"
done

# ---- gunicorn ----
for proto in h1 h2c tls; do
  set -- $(client $proto); url=${*: -1}; opts=${*:1:$#-1}
  [ "$(curl -s $opts "$url/gunicorn/hello")" = "hello from gunicorn" ]; check "gunicorn_hello_$proto" $? ""
  got=$(curl -s $opts "$url/gunicorn/stream")
  [ "$got" = "$(printf 'line %d\n' 0 1 2 3 4 | head -c -1)" ]; check "gunicorn_chunked_stream_$proto" $? "$got"
  got=$(curl -s $opts -X POST --data-binary @"$TMP/post.bin" "$url/gunicorn/upload")
  [ "$got" = "$(stat -c %s "$TMP/post.bin") $(sha256sum < "$TMP/post.bin" | cut -d' ' -f1)" ]
  check "gunicorn_upload_5MiB_$proto" $? "$got"
done
f=$(curl -s --http2-prior-knowledge -H 'cookie: a=1' -H 'cookie: b=2' "$H/gunicorn/headers")
grep -q "^cookie: a=1; b=2$" <<< "$f" && grep -q "^x-forwarded-proto: http$" <<< "$f"
check gunicorn_h2_cookies_joined $? "$f"

# ---- h2o serving files ----
want=$(sha256sum < "$TMP/www/two.bin" | cut -d' ' -f1)
for proto in h1 h2c tls; do
  set -- $(client $proto); url=${*: -1}; opts=${*:1:$#-1}
  got=$(curl -s $opts "$url/h2o/two.bin" | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want" ]; check "h2o_file_2MiB_$proto" $? "sha256 $got"
done
h2load -n 2000 -c 10 -m 10 "$H/h2o/index.html" > "$TMP/h2o.h2load" 2>&1
ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/h2o.h2load")
[ "$ok2" = 2000 ]; check h2o_h2c_multiplexed_2000 $? "$(grep -E '^(requests|status)' "$TMP/h2o.h2load" | tr '\n' ' ')"
r=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -r 10-19 "$H/h2o/two.bin")
[ "$r" = "206 10" ]; check h2o_range_passed $? "$r"

# ---- Chromium: an EventSource and a WebSocket through h2park over TLS ----
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
  cat > "$TMP/www/peers.html" <<'EOF'
<!doctype html><meta charset="utf-8"><title>peers</title>
<div id="sse">sse:</div><div id="ws">ws:</div>
<script>
// The event stream stays open until the WebSocket's echo is in: virtual time stands still
// only while a fetch is pending, and once the stream ended it would run out before the
// echo's real round trip on a busy machine.
let events = 0, echoed = false;
const done = () => { if (events >= 3 && echoed) es.close(); };
const es = new EventSource("/go/sse?n=100&gap=100");
es.onmessage = e => { if (events++ < 3) document.getElementById("sse").textContent += e.data + ";"; done(); };
const ws = new WebSocket("wss://" + location.host + "/go/ws");
ws.onmessage = e => { document.getElementById("ws").textContent += e.data + ";";
                      if (e.data === "hello") ws.send("from chromium"); else { ws.close(); echoed = true; done(); } };
</script>
EOF
  chmod a+r "$TMP/www/peers.html"
  dom=$(timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --ignore-certificate-errors \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=5000 --dump-dom "https://127.0.0.1:$T/peers.html" 2>/dev/null)
  grep -q '<div id="sse">sse:0;1;2;</div>' <<< "$dom" && grep -q '<div id="ws">ws:hello;from chromium;</div>' <<< "$dom"
  check chromium_eventsource_and_websocket_over_tls $? "$(grep -o '<div id=[^<]*</div>' <<< "$dom" | tr '\n' ' ')"
  # Over the page's own HTTP/2 connection: RFC 8441's extended CONNECT, no connection of its own.
  grep -q '"method":"CONNECT","target":"/go/ws","protocol":"h2","status":200' "$TMP/peers.access"
  check chromium_websocket_over_http2_stream $? "$(grep '/go/ws' "$TMP/peers.access" | cut -c1-200)"
else
  echo "ok chromium_eventsource_and_websocket_over_tls # SKIP chromium is not installed (apt-get install chromium)"
fi

# Nothing left in use upstream once every exchange is over.
for i in $(seq 1 50); do
  active=$(curl -s "$H/metrics" | sed -n 's/^h2park_upstream_connections{.*state="active"} \([0-9]*\)/\1/p' | paste -sd+ | bc)
  [ "$active" = 0 ] && break
  sleep 0.2
done
[ "$active" = 0 ]; check no_upstream_connection_left_in_use $? "active $active"
grep -q '"upstream_addr":"127.0.0.1:'$GO'","upstream_status":200' "$TMP/peers.access"
check access_log_names_go_upstream $? "$(grep -m1 "$GO" "$TMP/peers.access")"
stop_daemon
