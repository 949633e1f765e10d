#!/bin/bash
# Misbehaving peers get the answer RFC 9113 asks for and the daemon lives on: garbage
# instead of a request (400), an invalid frame, a decreasing stream id, an empty :path,
# headers over the limit, rapid resets, TLS offering neither h2 nor http/1.1, and
# clients that vanish mid-stream.  Afterwards no connection is left and heap_alloc is back where it
# was (within 1%), measured after a first round has warmed every lazy allocation.
. "$(dirname "$0")/lib.sh"
make_site
RAW=$BUILD/tests/h2raw
head -c $((20 << 20)) /dev/urandom > "$TMP/www/big.bin"
head -c $((8 << 20)) /dev/urandom > "$TMP/post.bin"
start_daemon

expect_raw() { # expect_raw CHECK NAME SCENARIO PATTERN...
  local chk=$1 name=$2 scenario=$3 out; shift 3
  out=$($RAW "$PORT" "$scenario" 1500)
  [ "$chk" = 1 ] || return 0
  for pat in "$@"; do
    echo "$out" | grep -q "$pat" || { fail "$name" "no '$pat' in: $(echo "$out" | sort | uniq -c | tr '\n' ';')"; return; }
  done
  ok "$name"
}

round() { # one pass of every bad input; $1 = 1 to check the answers
  local chk=$1 out
  expect_raw "$chk" garbage_http11_400 garbage 'HTTP/1.1 400' CLOSED
  expect_raw "$chk" bad_ping_length_frame_size_error badping 'GOAWAY last=0 error=6' CLOSED
  expect_raw "$chk" decreasing_stream_id_protocol_error decreasing 'GOAWAY last=5 error=1' CLOSED
  expect_raw "$chk" empty_path_stream_protocol_error emptypath 'RST_STREAM stream=1 error=1'
  expect_raw "$chk" rapid_reset_enhance_your_calm rapidreset 'GOAWAY last=[0-9]* error=11' CLOSED
  expect_raw "$chk" headers_over_limit_431 bigheaders 'HEADERS flags=4 stream=1 status=431'
  expect_raw "$chk" vanish_mid_request_body vanish 'status=200'

  out=$(timeout 5 openssl s_client -connect "127.0.0.1:$TPORT" -alpn spdy/3,foo </dev/null 2>&1)
  [ "$chk" = 1 ] && { echo "$out" | grep -qi 'no application protocol'; check tls_alpn_neither_h2_nor_http11_alert $? "$(echo "$out" | grep -i alert | head -2)"; }

  # Clients that vanish: mid-download, mid-upload (over h2c and TLS), and a load tool killed.
  curl -s --http2-prior-knowledge --limit-rate 2M "http://127.0.0.1:$PORT/big.bin" -o /dev/null & v1=$!
  curl -s -k --http2 --limit-rate 2M "https://127.0.0.1:$TPORT/big.bin" -o /dev/null & v2=$!
  curl -s --http2-prior-knowledge --limit-rate 2M --data-binary @"$TMP/post.bin" "http://127.0.0.1:$PORT/-/echo" -o /dev/null & v3=$!
  curl -s -k --http2 --limit-rate 2M --data-binary @"$TMP/post.bin" "https://127.0.0.1:$TPORT/-/echo" -o /dev/null & v4=$!
  curl -s --http2-prior-knowledge "http://127.0.0.1:$PORT/-/delay?ms=5000" -o /dev/null & v5=$!
  h2load -c 50 -m 10 -n 1000000 "http://127.0.0.1:$PORT/big.bin" >/dev/null 2>&1 & v6=$!
  sleep 0.8
  kill -9 $v1 $v2 $v3 $v4 $v5 $v6 2>/dev/null
  wait $v1 $v2 $v3 $v4 $v5 $v6 2>/dev/null
  wait_stat conns 1 20
}

round 0
wait_stat conns 1 20
sleep 0.5
before=$(stat_of heap_alloc_bytes)
round 1
kill -0 "$DPID"; check daemon_survives_bad_input $? "the daemon died: $(tail -5 "$TMP/daemon.log")"
wait_stat conns 1 20; check no_connection_left $? "conns $(stat_of conns)"
sleep 0.5
after=$(stat_of heap_alloc_bytes)
awk -v a="$before" -v b="$after" 'BEGIN { d = b - a; if (d < 0) d = -d; exit !(d <= a / 100) }'
check heap_alloc_back_within_1pct $? "heap_alloc $before -> $after"
stop_daemon
