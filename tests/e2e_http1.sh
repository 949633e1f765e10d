#!/bin/bash
# HTTP/1.1 on the same listeners as HTTP/2, with real clients: curl (keep-alive reuse),
# h2load --h1, nginx proxy_pass with an upstream keepalive pool, haproxy's httpchk
# health checks, headless Chromium over http://, and the raw peer for what clients never
# send: pipelining, chunked bodies both ways, 100-continue, HEAD, Connection: close,
# Host rules, the limits (431, 414, 408) and the request-smuggling cases RFC 9112
# section 6.3 makes errors.  Idle keep-alive connections park like HTTP/2 ones, and the
# access log names each protocol.  Status lines carry RFC 9110's reason phrases, and none
# for a code without one (a return's, a proxied upstream's).
. "$(dirname "$0")/lib.sh"
make_site
head -c $((3 << 20)) /dev/urandom > "$TMP/www/three.bin"
printf 'preface_timeout = 1s\n' > "$TMP/h1.conf"
start_daemon -c "$TMP/h1.conf" --access-log "$TMP/access.log" || { fail h1_daemon_starts "see above"; exit 1; }
H="http://127.0.0.1:$PORT"

# raw DATA [SECONDS]: sends DATA (printf format) on a fresh connection; prints the answer
# (CR removed) until the daemon closes or SECONDS pass.
raw() {
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"
  printf "$1" >&3
  timeout "${2:-2}" cat <&3 | tr -d '\r'
  exec 3<&- 3>&-
}
status_lines() { grep -oE 'HTTP/1\.[01] [0-9]{3} ' | cut -d' ' -f2 | tr '\n' ' '; }

# ---- real clients ----
body=$(curl -s --http1.1 "$H/"); [ "$body" = "<h1>h2park test</h1>" ]; check curl_http11_get $? "got '$body'"
out=$(curl -sv --http1.1 "$H/" "$H/sub/style.css" -o /dev/null -o /dev/null 2>&1)
echo "$out" | grep -q 'Re-using existing connection'; check curl_keepalive_reuse $? "$(echo "$out" | grep -i connection | head -3)"
got=$(curl -s --http1.1 "$H/three.bin" | cmp - "$TMP/www/three.bin" && echo same); [ "$got" = same ]; check http11_file_3MiB $? "differs"
got=$(curl -s --http1.1 --data-binary @"$TMP/www/three.bin" "$H/-/echo" | cmp - "$TMP/www/three.bin" && echo same)
[ "$got" = same ]; check http11_echo_3MiB $? "differs"
got=$(curl -s --http1.1 -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/www/three.bin" "$H/-/echo" | cmp - "$TMP/www/three.bin" && echo same)
[ "$got" = same ]; check http11_chunked_upload_echo $? "differs"
out=$(curl -s --http1.1 -k -o /dev/null -w '%{http_code} %{http_version}' "https://127.0.0.1:$TPORT/")
[ "$out" = "200 1.1" ]; check tls_alpn_http11 $? "$out"
out=$(printf 'GET /-/healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' | timeout 5 openssl s_client -quiet -connect "127.0.0.1:$TPORT" 2>/dev/null | tr -d '\r' | head -1)
[ "$out" = "HTTP/1.1 200 OK" ]; check tls_without_alpn_is_http11 $? "$out"
out=$(curl -s --http2 "$H/-/healthz" -w ' %{http_version}'); [ "$out" = "ok 2" ]; check upgrade_h2c_still_works $? "$out"
out=$(timeout 30 h2load --h1 -n 2000 -c 10 -m 1 "$H/index.html" 2>&1 | grep '^requests:')
echo "$out" | grep -q '2000 succeeded'; check h2load_h1_2000_requests $? "$out"

# ---- the raw peer ----
out=$(raw 'GET /-/healthz HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nGET /-/delay?ms=50 HTTP/1.1\r\nHost: a\r\n\r\nGET /-/healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
[ "$(echo "$out" | status_lines)" = "200 200 200 200 " ] && echo "$out" | grep -q 'waited 50 ms' && [ "$(echo "$out" | tail -1)" = ok ]
check pipelined_answered_in_order $? "$(echo "$out" | status_lines)"
out=$(raw 'POST /-/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n')
echo "$out" | grep -qi '^transfer-encoding: chunked' && [ "$(echo "$out" | sed '1,/^$/d' | grep -v '^[0-9a-f]*$' | tr -d '\n')" = "hello world" ]
check chunked_response_of_unknown_length $? "$(echo "$out" | tr '\n' '|')"
out=$(raw 'POST /-/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n' 1)
echo "$out" | head -1 | grep -q '^HTTP/1.1 100 Continue'; check expect_100_continue $? "$(echo "$out" | head -1)"
out=$(raw 'HEAD /three.bin HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
echo "$out" | grep -q '^content-length: 3145728' && [ "$(echo "$out" | sed '1,/^$/d' | wc -c)" = 0 ]; check head_no_body $? "$(echo "$out" | tail -2)"
out=$(raw 'GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n')
[ "$(echo "$out" | status_lines)" = "200 " ] && echo "$out" | grep -q '^connection: close'; check connection_close_honoured $? "$(echo "$out" | status_lines)"
out=$(raw 'GET / HTTP/1.0\r\n\r\n'); [ "$(echo "$out" | status_lines)" = "200 " ] && echo "$out" | grep -q '^connection: close'
check http10_closes $? "$(echo "$out" | head -3 | tr '\n' '|')"

bad() { # bad NAME STATUS REQUEST: answered STATUS, then closed
  local out; out=$(raw "$3")
  [ "$(echo "$out" | status_lines)" = "$2 " ]; check "$1" $? "$(echo "$out" | status_lines)"
}
bad host_missing_400 400 'GET / HTTP/1.1\r\n\r\n'
bad host_twice_400 400 'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'
bad smuggle_te_and_cl_400 400 'POST /-/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n'
bad smuggle_two_content_lengths_400 400 'POST /-/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde'
bad smuggle_obs_fold_400 400 'GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n'
bad smuggle_bare_cr_400 400 'GET / HTTP/1.1\r\nHost: a\rX-A: b\r\n\r\n'
# A bad chunk size arrives after the head: the handler may have answered already (then
# the connection just ends); either way the request smuggled behind it is never served.
out=$(raw 'POST /-/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n')
case "$(echo "$out" | status_lines)" in "400 "|"200 ") r=0 ;; *) r=1 ;; esac
check smuggle_bad_chunk_size_ends_connection $r "$(echo "$out" | status_lines)"
# A bare CR in the framing (RFC 9112 2.2), which llhttp alone takes for a line end in
# several places: the request line, the head's end, a chunk line, a chunk's end, the last
# chunk, the trailers' end.  400 and closed, and what follows - a request of its own to
# llhttp, part of the body to a parser that reads the CR otherwise - is never served.
# Each request goes in one write (raw's printf may write it in pieces, and an answer
# begun before the bad byte came could only end the connection).
once() { # once DATA: DATA (Python escapes) in one write; prints the answer, CR removed
  python3 - "$PORT" "$1" <<'PYEOF' | tr -d '\r'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(3)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
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
chunked='POST /-/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n'
badcr="" badline=""
while read -r name framing; do
  out=$(once "$framing"'GET /smuggled-'$name' HTTP/1.1\r\nHost: a\r\n\r\n')
  [ "$(echo "$out" | status_lines)" = "400 " ] && ! grep -q "smuggled-$name " "$TMP/access.log" && continue
  case $name in request_line*|field_line) badline="$badline [$name: $(echo "$out" | status_lines)]" ;;
                *) badcr="$badcr [$name: $(echo "$out" | status_lines)]" ;; esac
done <<EOF
request_line GET / HTTP/1.1\rX\nHost: a\r\n\r\n
request_line_target GET /\rX HTTP/1.1\r\nHost: a\r\n\r\n
field_line GET / HTTP/1.1\r\nHost: a\rX-A: b\r\n\r\n
head_end GET / HTTP/1.1\r\nHost: a\r\n\rX
chunk_size ${chunked}5\rX\r\nhello\r\n0\r\n\r\n
chunk_ext ${chunked}5;a=b\rX\r\nhello\r\n0\r\n\r\n
chunk_data_end ${chunked}5\r\nhello\rX0\r\n\r\n
last_chunk ${chunked}5\r\nhello\r\n0\rX\r\n\r\n
last_chunk_ext ${chunked}5\r\nhello\r\n0;a=b\rX\r\n\r\n
trailer_end ${chunked}5\r\nhello\r\n0\r\nX-T: t\r\n\rX
message_end ${chunked}0\r\n\rX
EOF
sleep 0.3
[ -z "$badline" ]; check smuggle_bare_cr_in_request_line_and_fields_400 $? "$badline"
[ -z "$badcr" ] && ! grep -q smuggled- "$TMP/access.log"
check smuggle_bare_cr_in_framing_400 $? "$badcr $(grep -o 'GET /smuggled-[a-z_]*' "$TMP/access.log" | tr '\n' ' ')"
# A chunk's data not followed by CRLF: llhttp alone skips whichever two bytes come, so
# "hello" LF "10" CRLF CRLF is a body's end to it and a chunk of 16 bytes - the request
# behind it - to a parser that takes an LF alone for a line end.
badcrlf=""
for framing in '5\r\nhelloXY0\r\n\r\n' '5\r\nhello\n10\r\n\r\n' '5\r\nhelloX\n0\r\n\r\n'; do
  out=$(once "${chunked}${framing}"'GET /crlf-smuggled HTTP/1.1\r\nHost: a\r\n\r\n')
  [ "$(echo "$out" | status_lines)" = "400 " ] || badcrlf="$badcrlf [$framing: $(echo "$out" | status_lines)]"
done
sleep 0.3
[ -z "$badcrlf" ] && ! grep -q crlf-smuggled "$TMP/access.log"
check smuggle_chunk_not_ended_by_crlf_400 $? "$badcrlf $(grep -c crlf-smuggled "$TMP/access.log") served"
# The shape as a smuggler sends it: a chunked body whose end hides a second request.
out=$(once "${chunked}"'0\r\n\rXGET /admin-smuggled HTTP/1.1\r\nHost: a\r\n\r\n')
sleep 0.3
[ "$(echo "$out" | status_lines)" = "400 " ] && ! grep -q admin-smuggled "$TMP/access.log" &&
  grep 'POST /-/echo' "$TMP/access.log" | tail -1 | grep -q '" 400 '
check smuggle_bare_cr_after_last_chunk_400_one_answer $? "answers: $(echo "$out" | status_lines); log: $(grep -E 'admin-smuggled|POST /-/echo' "$TMP/access.log" | tail -2 | tr '\n' '|')"
bad smuggle_space_before_colon_400 400 'GET / HTTP/1.1\r\nHost : a\r\n\r\n'
bad smuggle_te_not_chunked_501 501 'POST /-/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n'
bad nul_in_head_400 400 'GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n'
bad connect_405 405 'CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n'
long=$(head -c 70000 /dev/zero | tr '\0' a)
bad head_over_limit_431 431 "GET / HTTP/1.1\r\nHost: a\r\nX-Big: $long\r\n\r\n"
bad target_too_long_414 414 "GET /$(head -c 9000 /dev/zero | tr '\0' a) HTTP/1.1\r\nHost: a\r\n\r\n"
out=$(raw 'GET / HTTP/1.1\r\nHost: a\r\n' 3); [ "$(echo "$out" | status_lines)" = "408 " ]; check slow_head_408 $? "$(echo "$out" | head -1)"
kill -0 "$DPID"; check h1_daemon_alive $? "the daemon died: $(tail -3 "$TMP/daemon.log")"

# Idle keep-alive connections park: no serve coroutine, and their next requests answered.
N=200
h2load --h1 -c $N -t 1 --timing-script-file=<(printf '0.0\t%s/-/healthz\n4000.0\t%s/-/healthz\n' "$H" "$H") "$H" \
  >"$TMP/h1idle.out" 2>&1 & LOAD=$!
wait_stat conns $((N + 1)) 20
sleep 0.5
s=$(stats_json)
[ "$(stat_from "$s" parked_conns)" = $N ] && [ "$(stat_from "$s" serve_coroutines)" = 1 ]
check keepalive_idle_connections_park $? "$s"
wait $LOAD
grep -q "$((2 * N)) succeeded" "$TMP/h1idle.out"; check keepalive_parked_next_request $? "$(grep '^requests' "$TMP/h1idle.out")"

grep -qE ' http/1.1 [0-9.]+$' "$TMP/access.log" && grep -qE ' h2c [0-9.]+$' "$TMP/access.log"
check access_log_names_protocol $? "$(tail -2 "$TMP/access.log")"
stop_daemon

# ---- peers in front: nginx with an upstream keepalive pool, haproxy health checks ----
start_daemon
H="http://127.0.0.1:$PORT"
if command -v nginx >/dev/null; then
  NPORT=$(free_port)             # not PORT + 2: that one may be taken by another program
  start_nginx <<EOF
  client_max_body_size 10m;
  upstream h2park { server 127.0.0.1:$PORT; keepalive 4; }
  server {
    listen 127.0.0.1:$NPORT;
    location / { proxy_pass http://h2park; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
EOF
  for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$NPORT/-/healthz" && break; sleep 0.1; done
  before=$(stat_of conns_total)
  ok_count=0
  for i in $(seq 1 50); do
    [ "$(curl -s "http://127.0.0.1:$NPORT/sub/style.css")" = "body { color: red }" ] && ok_count=$((ok_count + 1))
  done
  got=$(curl -s --data-binary @"$TMP/www/three.bin" "http://127.0.0.1:$NPORT/-/echo" -o "$TMP/nginx/echo.out" -w "%{http_code}"; cmp -s "$TMP/nginx/echo.out" "$TMP/www/three.bin" && echo " same")
  after=$(stat_of conns_total)
  [ $ok_count = 50 ] && [ "$got" = "200 same" ]; check nginx_proxy_pass_http11 $? "$ok_count of 50, echo: $got $(tail -2 "$TMP/nginx/error.log")"
  [ $((after - before)) -le 8 ]; check nginx_upstream_keepalive_reused $? "$((after - before)) connections for 51 requests"
  kill "$NGPID"; wait "$NGPID" 2>/dev/null
else
  echo "ok nginx_proxy_pass_http11 # SKIP nginx not installed"
fi
if command -v haproxy >/dev/null; then
  HPORT=$(free_port)
  start_haproxy_http "$HPORT" "option httpchk GET /-/healthz" "http-check expect status 200" \
    "server h2park 127.0.0.1:$PORT check inter 200ms fall 1 rise 1"
  # Up once haproxy listens and its first check has passed (a loaded machine may take
  # longer than a fixed wait); a check that failed is in its log either way.
  for i in $(seq 1 50); do
    code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HPORT/")
    [ "$code" = 200 ] && break
    sleep 0.2
  done
  [ "$code" = 200 ] && ! grep -qi 'is DOWN' "$TMP/haproxy.log"
  check haproxy_httpchk_up $? "code $code: $(grep -i 'DOWN\|UP' "$TMP/haproxy.log" | head -2)"
  kill "$HPPID"; wait "$HPPID" 2>/dev/null
else
  echo "ok haproxy_httpchk_up # SKIP haproxy not installed"
fi

# ---- a browser ----
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
  printf '<!doctype html><title>t</title><body><p id="x">static</p><script>document.getElementById("x").textContent = "scripted " + location.protocol;</script>\n' > "$TMP/www/dom.html"
  dom=$(timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$TMP/chromium" \
        --dump-dom "$H/dom.html" 2>/dev/null)
  echo "$dom" | grep -q '<p id="x">scripted http:</p>'; check chromium_loads_http $? "$(echo "$dom" | head -c 300)"
else
  echo "ok chromium_loads_http # SKIP chromium is not installed (apt-get install chromium)"
fi
stop_daemon

# ---- status lines: RFC 9110's reason phrases; none made up for a code without one ----
FAULT=$(free_port); SP=$(free_port)
/usr/bin/python3 "$(dirname "$0")/upstream_faults.py" "$FAULT" & PIDS="$PIDS $!"
{ echo "listen = 127.0.0.1:$SP"; echo "root = $TMP/www"; echo "workers = 1"
  for c in 421 429 451 502 504 508 299 599; do printf 'location = /return/%s {\n    return = %s\n}\n' "$c" "$c"; done
  printf 'location /up/ {\n    proxy_pass = http://127.0.0.1:%s/\n}\n' "$FAULT"; } > "$TMP/status.conf"
start_config "$TMP/status.conf" "$SP"
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$FAULT/ok" && break; sleep 0.1; done
status_line() { curl -s --http1.1 -o /dev/null -D - "http://127.0.0.1:$SP$1" | head -1 | tr -d '\r'; }
for want in "421 Misdirected Request" "429 Too Many Requests" "451 Unavailable For Legal Reasons" "502 Bad Gateway" \
            "504 Gateway Timeout" "508 Loop Detected" "299 " "599 "; do
  got=$(status_line "/return/${want%% *}")
  [ "$got" = "HTTP/1.1 $want" ]; check "status_line_${want%% *}" $? "'$got'"
done
# A proxied upstream's status is the code alone: its reason phrase is not passed on (RFC
# 9110 15: a client ignores it; an HTTP/2 client never sees one).
for want in "502 Bad Gateway" "299 " "599 "; do
  got=$(status_line "/up/status?c=${want%% *}")
  [ "$got" = "HTTP/1.1 $want" ]; check "status_line_upstream_${want%% *}" $? "'$got'"
done
got=$(status_line "/up/nowhere")
[ "$got" = "HTTP/1.1 404 Not Found" ]; check status_line_upstream_404 $? "'$got'"
stop_daemon
