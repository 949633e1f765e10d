#!/bin/bash
# Parking, seen from outside: N idle connections (h2load, one request each, the next one
# later) are all parked and cost no serve coroutine with parking on; with parking off
# (H2PARK_DEBUG=http2serveparking=0, and --parking off) each keeps one.  Then every
# parked connection's next request is answered.  Also: a connection whose 100 streams
# wait in /-/delay parks and does not delay its other requests.
. "$(dirname "$0")/lib.sh"
make_site
N=${IDLE_CONNS:-1000}

idle_run() { # idle_run LABEL EXPECT_SERVE PROTO-BASE [daemon args...]
  local label=$1 expect=$2 scheme=$3; shift 3
  start_daemon "$@" || { fail "idle_${label}_daemon" "did not start"; return; }
  local base="http://127.0.0.1:$PORT"
  [ "$scheme" = https ] && base="https://127.0.0.1:$TPORT"
  h2load_idle "$N" "$base" 6
  if ! wait_stat conns $((N + 1)) 30; then
    fail "idle_${label}_connected" "conns $(stat_of conns), want $((N + 1))"
    kill "$LOADPID" 2>/dev/null; stop_daemon; return
  fi
  sleep 0.5
  # The stats connections of the polls above may not have been seen closing yet (a loaded
  # machine): the figures are read once the asking connection is the only one besides the N.
  local s i
  for i in $(seq 1 25); do s=$(stats_json); [ "$(stat_from "$s" conns)" = $((N + 1)) ] && break; sleep 0.2; done
  local parked serve; parked=$(stat_from "$s" parked_conns); serve=$(stat_from "$s" serve_coroutines)
  local want_parked=$N; [ "$expect" != 1 ] && want_parked=0
  [ "$parked" = "$want_parked" ] && [ "$serve" = "$expect" ]
  check "idle_${label}_${N}_conns" $? "parked_conns $parked (want $want_parked), serve_coroutines $serve (want $expect): $s"
  wait "$LOADPID"
  local done_ok; done_ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' "$TMP/h2load.out")
  [ "$done_ok" = $((2 * N)) ]; check "idle_${label}_next_request_answered" $? "$(grep -E '^requests' "$TMP/h2load.out")"
  stop_daemon
  [ "$DSTATUS" = 0 ]; check "idle_${label}_clean_exit" $? "exit status $DSTATUS"
}

idle_run h2c_parking_on 1 http
H2PARK_DEBUG=http2serveparking=0 idle_run h2c_parking_off $((N + 1)) http
idle_run tls_parking_on 1 https
idle_run tls_parking_off $((N + 1)) https --parking off

# Precedence: --parking beats H2PARK_DEBUG, which beats the config file.
printf 'parking = off\n' > "$TMP/off.conf"
H2PARK_DEBUG=http2serveparking=1 start_daemon -c "$TMP/off.conf"
[ "$(stat_of parking)" = true ]; check parking_env_beats_file $? "parking $(stat_of parking)"
stop_daemon
H2PARK_DEBUG=http2serveparking=1,nosuchknob=3 start_daemon --parking off
[ "$(stat_of parking)" = false ] && grep -q "unknown setting 'nosuchknob'" "$TMP/daemon.log"
check parking_flag_beats_env $? "parking $(stat_of parking); $(head -3 "$TMP/daemon.log")"
stop_daemon

# 100 handlers asleep in /-/delay on one connection: that connection parks, the waiting
# handlers are counted, and a request for / on the same connection is not held up.
# 101 streams at once: above the default max_concurrent_streams of 100.
printf 'max_concurrent_streams = 128\n' > "$TMP/streams.conf"
for parking in on off; do
  start_daemon -c "$TMP/streams.conf" --parking $parking
  args=()
  for i in $(seq 1 100); do args+=("http://127.0.0.1:$PORT/-/delay?ms=2000&n=$i"); done
  nghttp -n -s -m 1 "${args[@]}" "http://127.0.0.1:$PORT/" > "$TMP/delay.out" 2>&1 &
  NGPID=$!; PIDS="$PIDS $NGPID"
  # The 101 handlers live for 2 s from when nghttp's requests arrive, which a busy machine
  # may delay past a fixed wait (CI once sampled before nghttp had connected): their
  # count is awaited, then the connection is given time to park.
  wait_stat handler_coroutines 101 10
  sleep 0.5
  s=$(stats_json)
  h=$(stat_from "$s" handler_coroutines); p=$(stat_from "$s" parked_conns); sc=$(stat_from "$s" serve_coroutines)
  if [ $parking = on ]; then
    [ "$h" = 101 ] && [ "$p" = 1 ] && [ "$sc" = 1 ]
  else
    [ "$h" = 101 ] && [ "$p" = 0 ] && [ "$sc" = 2 ]
  fi
  check "delay_100_streams_parking_${parking}" $? "$s"
  wait $NGPID
  # nghttp -s: the last request (/) finished before any of the 2 s ones (an order, not a
  # time: its time is printed).
  ends=$(awk '$2 ~ /^\+/ && ($NF == "/" || $NF ~ /delay\?ms=2000/) { v=$2; sub(/^\+/, "", v); m=1;
      if (v ~ /us$/) m=0.001; else if (v ~ /ms$/) m=1; else if (v ~ /s$/) m=1000;
      sub(/[a-z]+$/, "", v); print ($NF == "/" ? "slash" : "delay"), v * m }' "$TMP/delay.out")
  slash_ms=$(awk '$1 == "slash" { print $2; exit }' <<< "$ends")
  first_delay_ms=$(awk '$1 == "delay" && (m == "" || $2 < m) { m = $2 } END { print m }' <<< "$ends")
  delay_ok=$(grep -c 'delay?ms=2000' "$TMP/delay.out")
  echo "# parking $parking: / answered after ${slash_ms} ms, the first of the 2 s delays after ${first_delay_ms} ms"
  awk -v s="$slash_ms" -v d="$first_delay_ms" 'BEGIN { exit !(s != "" && d != "" && s + 0 < d + 0) }' && [ "$delay_ok" -ge 100 ]
  check "delay_does_not_hold_other_streams_parking_${parking}" $? "/ after '${slash_ms}' ms, first delay after '${first_delay_ms}' ms; $delay_ok delayed rows; $(tail -3 "$TMP/delay.out")"
  stop_daemon
done

# The stacks of finished handlers are kept for the next ones, and what no coroutine takes
# goes back within two worker ticks, scavenge or not (scavenge_interval = 0 here): 300
# handlers at once, then the stats are polled as they come back.
printf 'scavenge_interval = 0\n' > "$TMP/noscavenge.conf"
start_daemon -c "$TMP/noscavenge.conf"
h2load -c 3 -m 100 -n 300 "http://127.0.0.1:$PORT/-/delay?ms=300" > "$TMP/burst.out" 2>&1
burst=$(stat_of cached_stack_bytes)
if [ "${SAN:-0}" = 1 ]; then
  # ASan builds keep none: each stack goes back through the heap's quarantine.
  grep -q '300 succeeded' "$TMP/burst.out" && [ "${burst:-1}" -eq 0 ]
  check no_stacks_kept_under_asan $? "cached_stack_bytes ${burst:-none} after: $(grep -E '^requests' "$TMP/burst.out")"
else
  grep -q '300 succeeded' "$TMP/burst.out" && [ "${burst:-0}" -gt 0 ]
  check stacks_kept_after_burst $? "cached_stack_bytes ${burst:-none} after: $(grep -E '^requests' "$TMP/burst.out")"
  # The polls' own connections and handlers take a stack each and give it back, so one or
  # two stay in use.
  for i in $(seq 1 25); do
    left=$(stat_of cached_stack_bytes)
    [ "${left:-$burst}" -le $(( burst / 50 )) ] && break
    sleep 0.2
  done
  [ "${left:-$burst}" -le $(( burst / 50 )) ]
  check stacks_given_back_within_two_ticks $? "cached_stack_bytes ${left:-none} after up to 5 s, ${burst:-none} right after the burst"
fi
stop_daemon
