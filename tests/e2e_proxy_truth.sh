#!/bin/bash
# The proxy tells the truth: no response reaches a client that another request was
# answered with, nothing a client sends is taken upstream as something it was not
# judged as, and nothing a client sends ends up in a field of a response.  Each check is
# an attack on one promise of docs/proxy.md and docs/configuration.md: a hostile
# upstream (tests/upstream_faults.py) answering twice in every framing, or with a bare CR
# in its status line or its chunked framing; clients sending a fragment in the target past a deny to a real
# upstream (nginx), an HTTP/2 WebSocket handshake with a body, control bytes in a path
# that a redirect names.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
for need in curl nginx; do
  command -v $need >/dev/null || { echo "ok proxy_truth # SKIP $need not installed"; exit 0; }
done
$PY -c 'import h2, websockets' 2>/dev/null || { echo "ok proxy_truth # SKIP python3-h2 or python3-websockets not installed"; exit 0; }

GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$TMP/gocache" go build -o "$TMP/upstream_go" "$HERE/upstream_go.go" \
  > "$TMP/gobuild.log" 2>&1 || { echo "ok proxy_truth # SKIP the Go upstream does not build: $(head -1 "$TMP/gobuild.log")"; exit 0; }

FAULT=$(free_port); NG=$(free_port); GO=$(free_port)
$PY "$HERE/upstream_faults.py" "$FAULT" & PIDS="$PIDS $!"
"$TMP/upstream_go" "$GO" & PIDS="$PIDS $!"
mkdir -p "$TMP/ngroot/admin" "$TMP/ngroot/public"
echo 'ADMIN SECRET' > "$TMP/ngroot/admin/index.html"; echo public > "$TMP/ngroot/public/index.html"
chmod -R a+rX "$TMP/ngroot"
start_nginx <<EOF
  server { listen 127.0.0.1:$NG; root $TMP/ngroot; access_log $TMP/nginx/access.log; }
EOF
trap 'kill -TERM $NGPID 2>/dev/null; wait $NGPID 2>/dev/null; cleanup' EXIT
for i in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$FAULT/ok" && curl -s -o /dev/null "http://127.0.0.1:$NG/public/" &&
    curl -s -o /dev/null "http://127.0.0.1:$GO/cancelled" && break
  sleep 0.1
done

DEAD=$(free_port)
mkdir -p "$TMP/pages"; echo 'MAINTENANCE PAGE' > "$TMP/pages/50x.html"; echo 'SLOW PAGE' > "$TMP/pages/slow.html"
proxy_conf_head truth > "$TMP/truth.conf"
cat >> "$TMP/truth.conf" <<EOF
error_page = 502 /50x.html
location = /50x.html {
    root = $TMP/pages
}
location = /slow.html {
    root = $TMP/pages
}
location /dead/ {
    proxy_pass = http://127.0.0.1:$DEAD/
}
location /slow/ {
    proxy_pass = http://127.0.0.1:$FAULT/
    proxy_read_timeout = 1s
    error_page = 504 /slow.html
}
upstream faults {
    server = 127.0.0.1:$FAULT
    keepalive = 4
}
location / {
    proxy_pass = http://127.0.0.1:$NG
}
location /admin/ {
    deny = all
}
location /f/ {
    proxy_pass = http://faults/
}
location /go/ {
    proxy_pass = http://127.0.0.1:$GO/
}
EOF
start_config "$TMP/truth.conf" "$P" || { fail truth_daemon_starts "see above"; exit 1; }

# pipeline PORT "METHOD PATH"...: the requests on one connection in one write, the last
# asking to close; prints what came back.
pipeline() {
  local port=$1; shift
  $PY - "$port" "$@" <<'PYEOF'
import socket, sys
port, reqs = int(sys.argv[1]), sys.argv[2:]
data = b""
for i, r in enumerate(reqs):
    method, path = r.split(" ", 1)
    close = "Connection: close\r\n" if i == len(reqs) - 1 else ""
    data += ("%s %s HTTP/1.1\r\nHost: a\r\n%s\r\n" % (method, path, close)).encode("latin-1")
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(5)
s.sendall(data)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except OSError:
    pass
sys.stdout.buffer.write(out)
PYEOF
}

# ---- a response nobody asked for, right behind the one asked for ----
# The next request on the same client connection is taken at once, in the same turn of
# the loop: it must not be given the pooled connection with the stray response waiting.
for framing in length chunked head 204 304 1xx; do
  method=GET; [ $framing = head ] && method=HEAD
  for round in 1 2 3; do
    out=$(pipeline "$P" "$method /f/stray-$framing" "GET /f/ok" "GET /f/ok")
    printf '%s' "$out" | grep -q SMUGGLED && break
  done
  ! printf '%s' "$out" | grep -q SMUGGLED && [ "$(printf '%s' "$out" | tr -d '\r' | tail -1)" = ok ]
  check stray_response_never_next_clients_$framing $? "$(printf '%s' "$out" | tr -d '\r' | grep -E '^HTTP|SMUGGLED|^ok' | tr '\n' '|')"
done
# Two clients, one after the other on fresh connections: the second never gets the
# first one's stray response either.
bad=0
for i in 1 2 3 4 5; do
  curl -s -o /dev/null "http://127.0.0.1:$P/f/stray-length" & a=$!
  sleep 0.2
  out=$(curl -s "http://127.0.0.1:$P/f/ok"); wait $a
  [ "$out" = ok ] || bad=$((bad + 1))
done
[ $bad = 0 ]; check stray_response_never_another_clients $? "$bad of 5 got '$out'"

# ---- a bare CR in the upstream's status line is no line end ----
code=$(curl -s -o "$TMP/body.out" -w '%{http_code}' "http://127.0.0.1:$P/f/bare-cr-status")
[ "$code" = 502 ] && ! grep -q SMUGGLED "$TMP/body.out"; check bare_cr_in_status_line_502 $? "$code $(head -c 100 "$TMP/body.out")"
grep 'bare-cr-status' "$TMP/daemon.log" | grep -q 'bare CR'; check bare_cr_cause_logged $? "$(grep bare-cr "$TMP/daemon.log" | tail -1)"

# ---- a bare CR in the chunked framing is no line end either ----
# The head went on before the framing came: the client's response is cut short (never
# complete, so never taken for the upstream's), with none of what llhttp alone would have
# made of the bytes, and the connection is closed, not pooled: the response nobody asked
# for behind it reaches nobody.  Over HTTP/1.1 and HTTP/2, the framing in the head's read
# and in one of its own.
bad=""
for place in size ext data last trailer end; do
  for q in "" "?split"; do
    for proto in --http1.1 --http2-prior-knowledge; do
      rm -f "$TMP/body.out"; code=$(curl -s -m 5 $proto -o "$TMP/body.out" -w '%{http_code}' "http://127.0.0.1:$P/f/bare-cr-chunk-$place$q"); rc=$?
      body=$(tr "\r\n" "<>" < "$TMP/body.out" 2>/dev/null)
      next=$(curl -s -m 5 $proto "http://127.0.0.1:$P/f/ok")
      case "$place:$body" in size:) ;; size:*) rc=0 ;; *:|*:h|*:he|*:hel|*:hell|*:hello) ;; *) rc=0 ;; esac
      [ $rc != 0 ] && ! grep -q SMUGGLED "$TMP/body.out" && [ "$next" = ok ] ||
        bad="$bad [$place$q $proto: curl $rc, $code '$body', next '$next']"
    done
  done
done
[ -z "$bad" ]; check bare_cr_in_chunked_framing_cut_short $? "$bad"
n=$(grep 'bare-cr-chunk' "$TMP/daemon.log" | grep -cE 'bare CR in its chunked framing|chunk not ended by CRLF')
[ "$n" = 24 ]; check bare_cr_in_chunked_framing_cause_logged $? "$n of 24: $(grep bare-cr-chunk "$TMP/daemon.log" | tail -1)"
out=$(pipeline "$P" "GET /f/bare-cr-chunk-end?split" "GET /f/ok" "GET /f/ok")
! printf '%s' "$out" | grep -q SMUGGLED && [ "$(printf '%s' "$out" | grep -c '^HTTP/1.1 ')" = 1 ]
check bare_cr_in_chunked_framing_ends_the_client_connection $? "$(printf '%s' "$out" | tr -d '\r' | grep -E '^HTTP|SMUGGLED|^ok' | tr '\n' '|')"

# ---- a fragment in the target: judged and passed on as one string ----
out=$(pipeline "$P" "GET /public/#/../../admin/" | tr -d '\r')
st=$(printf '%s' "$out" | head -1 | cut -d' ' -f2)
[ "$st" = 400 ] && ! printf '%s' "$out" | grep -q 'ADMIN SECRET'; check fragment_in_target_400_h1 $? "$st $(printf '%s' "$out" | tail -1)"
out=$($PY - "$P" <<'PYEOF'
import socket, sys
import h2.config, h2.connection, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.settimeout(5)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, validate_outbound_headers=False))
c.initiate_connection()
c.send_headers(1, [(":method", "GET"), (":scheme", "http"), (":path", "/public/#/../../admin/"),
                   (":authority", "a")], end_stream=True)
s.sendall(c.data_to_send())
status, body = "none", b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        done = False
        for e in c.receive_data(d):
            if isinstance(e, h2.events.ResponseReceived):
                status = dict(e.headers)[b":status"].decode()
            elif isinstance(e, h2.events.DataReceived):
                body += e.data
            elif isinstance(e, h2.events.StreamReset):
                status, done = "reset", True
            elif isinstance(e, h2.events.StreamEnded):
                done = True
        s.sendall(c.data_to_send())
        if done:
            break
except OSError:
    pass
print(status, body.decode("latin-1").strip())
PYEOF
)
case "$out" in 400*|reset*) ! printf '%s' "$out" | grep -q 'ADMIN SECRET' ;; *) false ;; esac
check fragment_in_target_refused_h2 $? "$out"
! grep -q admin "$TMP/nginx/access.log"; check fragment_never_reached_upstream $? "$(grep admin "$TMP/nginx/access.log" | head -2)"

# ---- an HTTP/2 WebSocket handshake with a body ----
# Its DATA would go up behind a GET that declares no length: a pooled upstream reads it
# as the next request.  Refused before anything goes up.
st=$($PY "$HERE/ws_h2_client.py" "$P" /public smuggle 2>&1 | tail -1)
[ "$st" = 400 ]; check h2_websocket_handshake_with_body_400 $? "$st"
sleep 0.3
! grep -q smuggled "$TMP/nginx/access.log"; check h2_websocket_body_never_upstream $? "$(grep smuggled "$TMP/nginx/access.log" | head -2)"

# ---- a proxy_pass that leads back to this daemon: 508 at the first return ----
L=$(free_port)
cat > "$TMP/loop.conf" <<EOF
listen = 127.0.0.1:$L
workers = 1
location / {
    proxy_pass = http://127.0.0.1:$L
}
EOF
"$H2PARK" -c "$TMP/loop.conf" > "$TMP/loop.log" 2>&1 & LPID=$!; PIDS="$PIDS $LPID"
wait_for_port() { local i; for i in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$1/-/healthz" && return 0; sleep 0.1; done; return 1; }
wait_for_port "$L"
st=$(curl -s -m 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$L/x")
loops=$(grep -c 'proxy loop' "$TMP/loop.log")
[ "$st" = 508 ] && [ "$loops" = 1 ]; check proxy_loop_508_at_first_return $? "status $st, $loops loop lines"
# A client sending loops as fast as it can gets a 508 each, the error log a line a second.
codes=$(for i in $(seq 1 30); do printf 'url = "http://127.0.0.1:%s/x%s"\noutput = "/dev/null"\n' "$L" "$i"; done |
        curl -s -m 20 -K - -w '%{http_code}\n' | sort | uniq -c | tr -s ' ')
loops=$(grep -c 'proxy loop' "$TMP/loop.log")
[ "$codes" = " 30 508" ] && [ "$loops" -le 4 ]; check proxy_loop_error_log_rate_limited $? "codes $codes, $loops loop lines"
# Two daemons in a chain are not a loop: each has its own mark.
M=$(free_port)
printf 'listen = 127.0.0.1:%s\nworkers = 1\nlocation / {\n    proxy_pass = http://127.0.0.1:%s\n}\n' "$M" "$P" > "$TMP/chain.conf"
"$H2PARK" -c "$TMP/chain.conf" > "$TMP/chain.log" 2>&1 & PIDS="$PIDS $!"
wait_for_port "$M"
out=$(curl -s -m 10 "http://127.0.0.1:$M/public/")
[ "$out" = public ]; check two_daemons_in_a_chain_not_a_loop $? "$out"

# ---- error pages for the proxy's own answers ----
out=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$P/dead/x")
[ "$out" = "MAINTENANCE PAGE
 502" ]; check error_page_for_proxy_502_inherited $? "$out"
out=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$P/slow/slow-head?s=3")
[ "$out" = "SLOW PAGE
 504" ]; check error_page_for_proxy_504_in_its_location $? "$out"
out=$(curl -s --http2-prior-knowledge -w ' %{http_code}' "http://127.0.0.1:$P/dead/x")
[ "$out" = "MAINTENANCE PAGE
 502" ]; check error_page_for_proxy_502_h2 $? "$out"

# ---- a client that gives up: the upstream let go at once, the request logged 499 ----
# wait_for COMMAND: true once COMMAND succeeds, within 10 s.
wait_for() { local i; for i in $(seq 1 100); do eval "$1" && return 0; sleep 0.1; done; return 1; }
cancelled() { [ "$(curl -s "http://127.0.0.1:$GO/cancelled")" -ge "$1" ]; }
logged_499() { grep '"target":"/go/poll?ms=30000&c='"$1"'"' "$TMP/truth.access" | grep -q '"status":499'; }
# HTTP/1.1: the request sent whole, then the connection closed.
$PY -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /go/poll?ms=30000&c=h1 HTTP/1.1\r\nHost: a\r\n\r\n")
time.sleep(0.5)
s.close()' "$P"
wait_for "cancelled 1"; check client_close_h1_cancels_upstream $? "Go saw $(curl -s "http://127.0.0.1:$GO/cancelled") cancelled"
wait_for "logged_499 h1"; check client_close_h1_logged_499 $? "$(grep 'c=h1' "$TMP/truth.access" | tail -1)"
# HTTP/2: the stream reset, the connection kept; then a stream whose connection closes.
$PY - "$P" <<'PYEOF'
import socket, sys, time
import h2.config, h2.connection, h2.errors
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
for sid, tag in ((1, "h2reset"), (3, "h2close")):
    c.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":path", "/go/poll?ms=30000&c=" + tag),
                         (":authority", "a")], end_stream=True)
s.sendall(c.data_to_send())
time.sleep(0.5)
c.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
s.sendall(c.data_to_send())
time.sleep(0.5)
s.close()
PYEOF
wait_for "cancelled 3"; check client_gone_h2_cancels_upstream $? "Go saw $(curl -s "http://127.0.0.1:$GO/cancelled") cancelled"
wait_for "logged_499 h2reset && logged_499 h2close"
check client_gone_h2_logged_499 $? "$(grep -E 'c=h2' "$TMP/truth.access" | tail -2)"
n=$(curl -s "http://127.0.0.1:$P/metrics" | sed -n 's/^h2park_requests_client_closed_total //p')
[ "${n:-0}" -ge 3 ]; check client_closed_counted_in_metrics $? "h2park_requests_client_closed_total ${n:-none}"
# A request cut short by this side, or by a client leaving halfway through its body, is not
# a client giving up on its answer: 408 when the body stopped coming (body_timeout), 400
# when the client left mid-body, 503 when stopping cut it (nginx's codes for each).
C=$(free_port)
printf '%s\n' "listen = 127.0.0.1:$C" "workers = 1" "body_timeout = 1s" "shutdown_timeout = 1s" \
  "access_log = $TMP/cut.access" "access_log_format = json" "location /go/ {" "    proxy_pass = http://127.0.0.1:$GO/" "}" > "$TMP/cut.conf"
"$H2PARK" -c "$TMP/cut.conf" > "$TMP/cut.log" 2>&1 & CPID=$!; PIDS="$PIDS $CPID"
wait_for_port "$C"
$PY - "$C" <<'PYEOF'
import socket, sys, time
port = int(sys.argv[1])
stalled = socket.create_connection(("127.0.0.1", port))
stalled.sendall(b"POST /go/upload?c=stalled HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123456789")
left = socket.create_connection(("127.0.0.1", port))
left.sendall(b"POST /go/upload?c=left HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123456789")
time.sleep(0.5)
left.close()
time.sleep(2.5)
stalled.close()
PYEOF
cut_status() { grep '"target":"/go/'"$1"'"' "$TMP/cut.access" | grep -o '"status":[0-9]*' | head -1; }
wait_for '[ -n "$(cut_status "upload?c=stalled")" ] && [ -n "$(cut_status "upload?c=left")" ]'
s1=$(cut_status "upload?c=stalled") s2=$(cut_status "upload?c=left")
[ "$s1" = '"status":408' ]; check body_timeout_logged_408_not_499 $? "$s1"
[ "$s2" = '"status":400' ]; check client_left_mid_body_logged_400_not_499 $? "$s2"
$PY -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /go/poll?ms=30000&c=stopped HTTP/1.1\r\nHost: a\r\n\r\n")
time.sleep(0.5)
open(sys.argv[2], "w").write("sent")
s.settimeout(10)
try:
    s.recv(100)
except OSError:
    pass' "$C" "$TMP/cut.sent" &
wait_for '[ -f "$TMP/cut.sent" ]'
kill -TERM "$CPID"; wait "$CPID" 2>/dev/null
s3=$(cut_status "poll?ms=30000&c=stopped")
[ "$s3" = '"status":503' ]; check shutdown_cut_logged_503_not_499 $? "$s3"
# A client that half-closes after a request answered at once still gets its answer.
out=$($PY -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.settimeout(5)
s.sendall(b"GET /-/healthz HTTP/1.1\r\nHost: a\r\n\r\n"); s.shutdown(socket.SHUT_WR)
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print(out.decode().split("\r\n")[0])' "$P")
[ "$out" = "HTTP/1.1 200 OK" ]; check half_close_after_quick_answer_still_answered $? "$out"

# ---- control bytes from a request never reach a field; no redirect leaves the site ----
R=$(free_port)
cat > "$TMP/ret.conf" <<EOF
listen = 127.0.0.1:$R
root = $TMP/www
workers = 1
location / {
    return = 302 \$uri
}
location /abs/ {
    return = 301 https://example.com\$uri
}
location /req/ {
    return = 302 \$request_uri
}
location /args/ {
    return = 302 /x?\$args
}
EOF
DPID0=$DPID
start_config "$TMP/ret.conf" "$R" || { fail return_daemon_starts "see above"; exit 1; }
# location_judged TARGET: "ok" or what is wrong with the answer's Location: a byte a field
# must not carry, a field the request made, or - read as a browser reads it (tabs and line
# ends dropped, leading C0 and spaces stripped, a backslash a slash) - another host.
location_judged() {
  pipeline "$R" "GET $1" | $PY -c '
import sys
out = sys.stdin.buffer.read()
head = out.split(b"\r\n\r\n", 1)[0]
lines = head.split(b"\r\n")
status = (lines[0].split(b" ") + [b"?"])[1]
fields = [l.split(b":", 1) for l in lines[1:]]
names = [f[0].strip().lower() for f in fields]
loc = [f[1].strip() for f in fields if len(f) == 2 and f[0].strip().lower() == b"location"]
if status == b"400":
    print("ok (400)"); sys.exit()
if b"set-cookie" in names or b"x-injected" in names:
    print("a field of the request\x27s making: %r" % head); sys.exit()
if len(loc) != 1:
    print("no one Location: %r" % head); sys.exit()
v = loc[0]
if any(b < 0x21 or b == 0x7f or b == 0x5c for b in v):
    print("Location carries %r" % v); sys.exit()
seen = v.replace(b"\t", b"").replace(b"\r", b"").replace(b"\n", b"").lstrip(bytes(range(0x21))).replace(b"\\", b"/")
if seen.startswith(b"//"):
    print("Location %r names another host" % v); sys.exit()
print("ok %s" % v.decode("latin-1"))
'
}
bad=""
for t in "/%09/evil.example" "/%0d%0aSet-Cookie:%20a=b" "/%0aX-Injected:%201" "/%0d/evil.example" "/%5c/evil.example" \
         "/%5C%5Cevil.example" "/%20%20/evil.example" "/%0b/evil.example" "/%e2%80%a8/x" \
         "/abs/%0d%0aSet-Cookie:%20a=b" "/abs/%09x" "/req/%0d%0aSet-Cookie:%20a=b" "/req/	/evil.example" \
         "/req/\\/evil.example" "/args/?a%0d%0aSet-Cookie:%20a=b" "/args/?	x" "//%09/evil.example" "/%09%09//evil.example"; do
  out=$(location_judged "$t")
  case "$out" in ok*) ;; *) bad="$bad [$t: $out]" ;; esac
done
[ -z "$bad" ]; check redirect_never_splits_nor_leaves_site $? "$bad"
out=$(location_judged "/a%3Fb%25c/")
[ "$out" = "ok /a%3Fb%25c/" ]; check redirect_uri_names_same_path $? "$out"
