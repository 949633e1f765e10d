#!/bin/bash
# Handlers that wait, seen from outside: over h2c, TLS and HTTP/1.1, handlers asleep in
# /-/delay for longer than a worker tick are parked - counted in /-/stats and /metrics,
# their stacks' pages given back - and every one still answers; a short wait is never
# parked; parking off parks none.  A handler waiting for request body (a slow upload) and
# one waiting for room in its response (a client that does not read) park too, and what
# they then send and receive is exact.  With parkhandlersatonce=1 every wait parks.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
N=40
# These tests set the parking mode themselves.
unset H2PARK_DEBUG

# The stacks' resident bytes (/-/stats?classes, one mincore over every stack span).
stack_resident() {
  curl -s --http2-prior-knowledge "http://127.0.0.1:$PORT/-/stats?classes" |
    $PY -c 'import json, sys; print(sum(c["resident"] for c in json.load(sys.stdin)["classes"] if c["size"] == "stacks"))'
}

# waiting_run LABEL h2load-args URL: N requests of 3.5 s each, one per connection.
waiting_run() {
  local label=$1 args=$2 url=$3
  # What the stacks hold before the wait (the stats request's own, the last run's freed stacks
  # not yet given back on a loaded machine): the waiting handlers are judged above it.
  local base=0; [ "${SAN:-0}" = 1 ] || base=$(stack_resident)
  timeout 30 h2load $args -c $N -n $N "$url/-/delay?ms=3500" > "$TMP/h2load.out" 2>&1 &
  local lpid=$!
  PIDS="$PIDS $lpid"
  sleep 2.7        # past the second tick of every handler's wait
  local s; s=$(stats_json)
  local parked bytes handlers
  parked=$(stat_from "$s" parked_handlers); bytes=$(stat_from "$s" parked_handler_bytes)
  handlers=$(stat_from "$s" handler_coroutines)
  # Every waiting handler (the one answering /-/stats runs, and is not among them), each
  # holding its live frames only: well under a page.
  [ "$parked" = $N ] && [ "$handlers" = $((N + 1)) ] && [ "$bytes" -gt $((N * 100)) ] && [ "$bytes" -lt $((N * 2048)) ]
  check "waiting_${label}_handlers_parked" $? "$s"
  # Unparked, each would keep two pages or more (its canary's and its top one).  Under
  # ASan the quarantine keeps the stacks of finished coroutines, resident, a while.
  if [ "${SAN:-0}" != 1 ]; then
    local res; res=$(stack_resident)
    [ -n "$res" ] && [ -n "$base" ] && [ $((res - base)) -lt $((N * 2048)) ]
    check "waiting_${label}_stacks_given_back" $? "stacks resident: $res bytes for $N waiting handlers, $base before they came"
  fi
  curl -s --http2-prior-knowledge "http://127.0.0.1:$PORT/metrics" > "$TMP/metrics"
  grep -qx "h2park_handlers_parked $N" "$TMP/metrics" && grep -q "^h2park_handlers_parked_bytes [1-9]" "$TMP/metrics"
  check "waiting_${label}_metrics" $? "$(grep handler "$TMP/metrics")"
  wait $lpid
  grep -q "succeeded, 0 failed" "$TMP/h2load.out" && grep -q "^requests: $N total" "$TMP/h2load.out"
  check "waiting_${label}_all_answered" $? "$(grep -E '^requests|^status' "$TMP/h2load.out")"
  s=$(stats_json)
  [ "$(stat_from "$s" parked_handlers)" = 0 ] && [ "$(stat_from "$s" parked_handler_bytes)" = 0 ] &&
    [ "$(stat_from "$s" handler_parks_total)" -ge $N ]
  check "waiting_${label}_unparked" $? "$s"
}

start_daemon
waiting_run h2c "" "http://127.0.0.1:$PORT"
waiting_run tls "" "https://127.0.0.1:$TPORT"
waiting_run h1 "--h1" "http://127.0.0.1:$PORT"

# A wait shorter than a tick is never parked: it costs nothing.
before=$(stat_of handler_parks_total)
timeout 30 h2load -c $N -n $((N * 5)) "http://127.0.0.1:$PORT/-/delay?ms=150" > "$TMP/h2load.out" 2>&1
[ "$(stat_of handler_parks_total)" = "$before" ] && grep -q "succeeded, 0 failed" "$TMP/h2load.out"
check waiting_short_wait_not_parked $? "parks $before -> $(stat_of handler_parks_total); $(grep '^requests' "$TMP/h2load.out")"

# A slow upload: the handler of /-/echo waits for the rest of the body, 3 s, parked,
# then echoes all of it (HTTP/1.1 chunked and HTTP/2 DATA).
head -c 100000 /dev/urandom > "$TMP/part1"
head -c 100000 /dev/urandom > "$TMP/part2"
cat "$TMP/part1" "$TMP/part2" > "$TMP/whole"
for proto in --http1.1 --http2-prior-knowledge; do
  (cat "$TMP/part1"; sleep 3; cat "$TMP/part2") |
    curl -s -m 20 $proto -X POST -T - -o "$TMP/echoed" "http://127.0.0.1:$PORT/-/echo" &
  cpid=$!
  sleep 2.5
  p=$(stat_of parked_handlers)
  wait $cpid
  [ "$p" = 1 ] && cmp -s "$TMP/whole" "$TMP/echoed"
  check "waiting_slow_upload_parked${proto#--http}" $? "parked $p; echoed $(stat -c %s "$TMP/echoed" 2>/dev/null) bytes"
done

# A client that reads none of its response for 3 s: /-/echo's handler waits for room in
# its output, parked, and every byte arrives in order once the client reads.
$PY - "$PORT" "$TMP/stats.txt" <<'PY' > "$TMP/unread.out" 2>&1
import hashlib, os, socket, sys, threading, time, urllib.request
port, where = int(sys.argv[1]), sys.argv[2]
body = os.urandom(4 << 20)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
head = b"POST /-/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
threading.Thread(target=lambda: s.sendall(head + body), daemon=True).start()
time.sleep(3)
stats = urllib.request.urlopen("http://127.0.0.1:%d/-/stats" % port, timeout=5).read().decode()
open(where, "w").write(stats)
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(65536)
rest = got.split(b"\r\n\r\n", 1)[1]
while len(rest) < len(body):
    chunk = s.recv(1 << 20)
    if not chunk:
        break
    rest += chunk
print("same" if hashlib.sha256(rest[:len(body)]).digest() == hashlib.sha256(body).digest() else "differs", len(rest))
PY
p=$(stat_from "$(cat "$TMP/stats.txt" 2>/dev/null)" parked_handlers)
[ "$p" = 1 ] && grep -q "^same" "$TMP/unread.out"
check waiting_unread_response_parked $? "parked $p; $(cat "$TMP/unread.out")"
stop_daemon
[ "$DSTATUS" = 0 ]; check waiting_clean_exit $? "exit status $DSTATUS"

# Parking off: no handler parks.
H2PARK_DEBUG=http2serveparking=0 start_daemon
timeout 30 h2load -c 10 -n 10 "http://127.0.0.1:$PORT/-/delay?ms=3000" > "$TMP/h2load.out" 2>&1 &
lpid=$!
sleep 2.5
p=$(stat_of parked_handlers); t=$(stat_of handler_parks_total)
wait $lpid
[ "$p" = 0 ] && [ "$t" = 0 ] && grep -q "succeeded, 0 failed" "$TMP/h2load.out"
check waiting_parking_off_parks_none $? "parked $p, parks $t; $(grep '^requests' "$TMP/h2load.out")"
stop_daemon

# Every wait parked at once: bodies and responses of every size still come out exact.
H2PARK_DEBUG=parkhandlersatonce=1 start_daemon
head -c 3000000 /dev/urandom > "$TMP/big"
ok_all=0
for proto in --http1.1 --http2-prior-knowledge; do
  for i in 1 2 3; do
    curl -s -m 20 $proto --data-binary @"$TMP/big" -o "$TMP/echoed" "http://127.0.0.1:$PORT/-/echo" &&
      cmp -s "$TMP/big" "$TMP/echoed" || ok_all=1
  done
done
curl -sk -m 20 --http2 --data-binary @"$TMP/big" -o "$TMP/echoed" "https://127.0.0.1:$TPORT/-/echo" &&
  cmp -s "$TMP/big" "$TMP/echoed" || ok_all=1
[ $ok_all = 0 ] && [ "$(stat_of handler_parks_total)" -gt 10 ]
check waiting_park_at_once_echo_exact $? "parks $(stat_of handler_parks_total)"
stop_daemon
[ "$DSTATUS" = 0 ]; check waiting_park_at_once_clean_exit $? "exit status $DSTATUS"
