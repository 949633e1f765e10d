#!/bin/bash
# HTTP/1.1 against a hostile client, through every llhttp callback and every state it can
# run in (server/proto/h1.c's table): trailers after an early answer (the body being
# dropped, no request at all), trailers while the handler runs (never merged into the
# head, never moving it), trailers of pipelined requests, trailer limits; the request
# line of RFC 9112 (absolute-form, versions, HTTP/0.9, HTTP/1.0 with Transfer-Encoding, an
# invalid Host); obs-fold cut by read boundaries; every error the parser decides on in the
# access log; no answer to a request that was answered already.  The same over TLS and
# behind haproxy in mode http, which forwards request trailers.  Each group runs against a
# daemon of its own, so one that kills the daemon fails its own tests and not the rest.
. "$(dirname "$0")/lib.sh"
make_site
printf 'preface_timeout = 1s\n' > "$TMP/short.conf"
printf 'preface_timeout = 30s\n' > "$TMP/patient.conf"
group() { # group [CONFIG]: a fresh daemon, with the 1 s head timeout unless told otherwise
  stop_daemon 2>/dev/null
  : > "$TMP/access.log"
  start_daemon -c "${1:-$TMP/short.conf}" --access-log "$TMP/access.log" || fail http1_attacks_daemon_starts "see above"
}
alive() { kill -0 "$DPID" 2>/dev/null; check "$1_daemon_alive" $? "the daemon died: $(grep -v ' info ' "$TMP/daemon.log" | tail -3)"; }

# steps PART...: sends each part (printf format) on one connection, 0.3 s apart (GAP; so
# the daemon answers, or reads, in between), then prints what came back (CR removed) until
# the daemon closes or 2 s pass.  TLS=1: over TLS (openssl s_client), to the TLS port.
steps() {
  if [ "${TLS:-0}" = 1 ]; then
    { for part in "$@"; do printf "$part"; sleep "${GAP:-0.3}"; done; sleep 1.5; } |
      timeout 5 openssl s_client -quiet -connect "127.0.0.1:$TPORT" 2>/dev/null | tr -d '\r'
    return
  fi
  local data
  exec 3<>"/dev/tcp/127.0.0.1/$PORT"
  for part in "$@"; do printf -v data "$part"; printf '%s' "$data" >&3; sleep "${GAP:-0.3}"; done
  timeout 2 cat <&3 | tr -d '\r'
  exec 3<&- 3>&-
}
status_lines() { grep -oE 'HTTP/1\.[01] [0-9]{3} ' | cut -d' ' -f2 | tr '\n' ' '; }
logged() { sleep 0.2; grep -c "$1" "$TMP/access.log"; }
CHUNKED='Host: a\r\nTransfer-Encoding: chunked\r\n'
NEXT='GET /-/healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'

# ---- trailers: after an early answer (no request: the body is being dropped) ----
trailer_cases() { # PREFIX: the same attacks, over cleartext or TLS
  local p=$1 out
  group
  out=$(steps "POST /-/healthz HTTP/1.1\r\n$CHUNKED\r\n3\r\nabc\r\n" "0\r\nX-Trailer: y\r\n\r\n$NEXT")
  [ "$(echo "$out" | status_lines)" = "405 200 " ]; check "${p}trailer_after_early_answer_then_next_request" $? "$(echo "$out" | status_lines)"
  out=$(steps "GET /nope HTTP/1.1\r\n$CHUNKED\r\n3\r\nabc\r\n" "0\r\nX-A: 1\r\nX-B: 2\r\n\r\n$NEXT")
  [ "$(echo "$out" | status_lines)" = "404 200 " ]; check "${p}trailers_after_early_404" $? "$(echo "$out" | status_lines)"
  alive "${p}trailers_after_early_answer"
  # ... and all at once: the trailers are parsed while the handler has yet to run.
  group
  out=$(steps "POST /-/healthz HTTP/1.1\r\n${CHUNKED}\r\n3\r\nabc\r\n0\r\nX-Trailer: y\r\n\r\nPOST /-/echo HTTP/1.1\r\n${CHUNKED}\r\n2\r\nhi\r\n0\r\nX-T: z\r\n\r\n$NEXT")
  [ "$(echo "$out" | status_lines)" = "405 200 200 " ] && echo "$out" | grep -qx hi
  check "${p}pipelined_requests_with_trailers" $? "$(echo "$out" | status_lines)"
  alive "${p}pipelined_trailers"
}
trailer_cases ""
TLS=1 trailer_cases "tls_"

# ---- trailers while the handler runs: apart from the head ----
group
# Host, Expect, Content-Length, Connection and Upgrade as trailers change nothing (RFC
# 9110 section 6.5.1): the head's Host stays the request's, the connection stays open.
out=$(steps "POST /-/echo HTTP/1.1\r\n$CHUNKED\r\n5\r\nhello\r\n" \
            "0\r\nHost: evil.example\r\nExpect: nonsense\r\nContent-Length: 99\r\nConnection: close\r\nUpgrade: h2c\r\n\r\n$NEXT")
[ "$(echo "$out" | status_lines)" = "200 200 " ] && echo "$out" | grep -qx hello && [ "$(logged '"POST /-/echo HTTP/1.1" 200 .* "a" http/1.1')" = 1 ]
check trailers_never_merged_into_head $? "$(echo "$out" | status_lines) $(grep echo "$TMP/access.log")"
# 60 trailers of 550 bytes (33 KiB, under max_header_list_size): appended to the head,
# they moved it under the running handler (a use after free the SAN build aborts on).
big=$(for i in $(seq 1 60); do printf 'X-Pad-%d: %s\\r\\n' "$i" "$(head -c 540 /dev/zero | tr '\0' p)"; done)
out=$(steps "POST /-/echo?big HTTP/1.1\r\nHost: a\r\nUser-Agent: ua\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n$big\r\n$NEXT")
[ "$(echo "$out" | status_lines)" = "200 200 " ] && echo "$out" | grep -qx hello &&
  [ "$(logged '"POST /-/echo?big HTTP/1.1" 200 5 "-" "ua" "a" http/1.1')" = 1 ]
check trailers_33k_head_unmoved $? "$(echo "$out" | status_lines) $(grep 'echo?big' "$TMP/access.log" | head -c 300)"
alive trailers_while_handling
# More than 64 trailer fields, or a head and trailers together over max_header_list_size,
# before an answer (the handler sleeps before it answers): 431, logged.
many=$(for i in $(seq 1 65); do printf 'X-T%d: v\\r\\n' "$i"; done)
out=$(steps "GET /-/delay?ms=500 HTTP/1.1\r\n$CHUNKED\r\n2\r\nhi\r\n0\r\n$many\r\n")
[ "$(echo "$out" | status_lines)" = "431 " ] && [ "$(logged '"GET /-/delay?ms=500 HTTP/1.1" 431 ')" = 1 ]
check trailers_over_64_fields_431 $? "$(echo "$out" | status_lines)"
huge=$(for i in $(seq 1 40); do printf 'X-Big-%d: %s\\r\\n' "$i" "$(head -c 1700 /dev/zero | tr '\0' b)"; done)
out=$(steps "GET /-/delay?ms=500 HTTP/1.1\r\n$CHUNKED\r\n2\r\nhi\r\n0\r\n$huge\r\n")
[ "$(echo "$out" | status_lines)" = "431 " ]; check trailers_over_max_header_list_size_431 $? "$(echo "$out" | status_lines)"
# Bad trailers are bad input like a bad head: 400.  So is Transfer-Encoding among them
# (llhttp's own rule: a framing field where framing is over).
out=$(steps "POST /-/echo HTTP/1.1\r\n$CHUNKED\r\n2\r\nhi\r\n0\r\nTransfer-Encoding: gzip\r\n\r\n")
[ "$(echo "$out" | status_lines)" = "400 " ]; check trailer_transfer_encoding_400 $? "$(echo "$out" | status_lines)"
out=$(steps "POST /-/echo HTTP/1.1\r\n$CHUNKED\r\n2\r\nhi\r\n0\r\nBad Name: v\r\n\r\n")
[ "$(echo "$out" | status_lines)" = "400 " ]; check trailer_bad_name_400 $? "$(echo "$out" | status_lines)"
out=$(steps "POST /-/echo HTTP/1.1\r\n$CHUNKED\r\n2\r\nhi\r\n0\r\nX-A: v\r\n folded\r\n\r\n")
[ "$(echo "$out" | status_lines)" = "400 " ]; check trailer_obs_fold_400 $? "$(echo "$out" | status_lines)"
# Past the limit after an early answer: no second answer, the connection just ends.
out=$(steps "POST /-/healthz HTTP/1.1\r\n$CHUNKED\r\n3\r\nabc\r\n" "0\r\n$many\r\n$NEXT")
[ "$(echo "$out" | status_lines)" = "405 " ]; check trailers_over_limit_after_answer_close_silently $? "$(echo "$out" | status_lines)"
alive trailer_limits

# ---- obs-fold cut by read boundaries (each part its own read, or TLS record): a fold
# is refused however the bytes arrive, a value merely split is not; a head sent in five
# reads takes over a second on a loaded machine, so not the 1 s head timeout here ----
group "$TMP/patient.conf"
for t in "" tls_; do
  out=$(GAP=0.1 TLS=$([ "$t" = tls_ ] && echo 1 || echo 0) steps 'GET /-/healthz HTTP/1.1\r\nHost: a\r\nX-A: 1' '\r' '\n' ' ' 'folded\r\nConnection: close\r\n\r\n')
  [ "$(echo "$out" | status_lines)" = "400 " ]; check "${t}obs_fold_across_reads_400" $? "$(echo "$out" | status_lines)"
  out=$(GAP=0.1 TLS=$([ "$t" = tls_ ] && echo 1 || echo 0) steps 'GET /-/healthz HTTP/1.1\r\nHost: a\r\nX-A: 1' '2' '3\r\nConnection: close\r\n\r\n')
  [ "$(echo "$out" | status_lines)" = "200 " ]; check "${t}value_split_across_reads_200" $? "$(echo "$out" | status_lines)"
done
out=$(steps "POST /-/healthz HTTP/1.1\r\n$CHUNKED\r\n2\r\nhi\r\n" '0\r\nX-A: 1' '\r' '\n' ' ' "folded\r\n\r\n$NEXT")
[ "$(echo "$out" | status_lines)" = "405 " ]; check trailer_obs_fold_across_reads_refused $? "$(echo "$out" | status_lines)"
alive obs_fold

# ---- a body dropped after the answer: past its bound the connection ends, with no
# answer to a request that had its answer ----
group
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /-/healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 3145728\r\n\r\n' >&3
sleep 0.3
head -c $((3 << 20)) /dev/zero >&3 2>/dev/null
out=$(timeout 3 cat <&3 | tr -d '\r')
exec 3<&- 3>&-
[ "$(echo "$out" | status_lines)" = "405 " ]; check dropped_body_over_bound_no_second_answer $? "$(echo "$out" | status_lines)"
alive dropped_body

# ---- the request line (RFC 9112 section 3) ----
group
line() { # NAME WANT REQUEST [LOG-PATTERN]: one request, its status (and its access-log line)
  local out; out=$(steps "$3")
  [ "$(echo "$out" | status_lines)" = "$2 " ] && { [ -z "${4:-}" ] || [ "$(logged "$4")" -ge 1 ]; }
  check "$1" $? "$(echo "$out" | status_lines) $(tail -1 "$TMP/access.log")"
}
line absolute_form_200 200 'GET http://example.org/index.html HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n' \
  '"GET /index.html HTTP/1.1" 200 .* "example.org"'
line absolute_form_empty_path_200 200 'GET HTTP://example.org:8080?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' \
  '"GET /?x=1 HTTP/1.1" 200 .* "example.org:8080"'
line absolute_form_still_needs_host_400 400 'GET http://example.org/ HTTP/1.1\r\n\r\n'
line absolute_form_other_scheme_400 400 'GET ftp://example.org/ HTTP/1.1\r\nHost: a\r\n\r\n'
line absolute_form_userinfo_400 400 'GET http://user@example.org/ HTTP/1.1\r\nHost: a\r\n\r\n'
line absolute_form_empty_host_400 400 'GET http:///index.html HTTP/1.1\r\nHost: a\r\n\r\n'
line http_2_0_request_line_505 505 'GET / HTTP/2.0\r\n\r\n' '"GET / HTTP/1.1" 505 '
line http_3_0_request_line_505 505 'GET / HTTP/3.0\r\nHost: a\r\n\r\n'
line http_0_x_request_line_505 505 'GET / HTTP/0.9\r\nHost: a\r\n\r\n'
line http_1_2_answered_as_1_1 200 'GET /-/healthz HTTP/1.2\r\nHost: a\r\nConnection: close\r\n\r\n'
out=$(steps 'GET /-/healthz HTTP/1.2\r\nHost: a\r\n\r\nGET /-/healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
[ "$(echo "$out" | status_lines)" = "200 200 " ]; check http_1_2_keeps_alive $? "$(echo "$out" | status_lines)"
line http_0_9_line_400 400 'GET /\r\n\r\n' '"GET / HTTP/1.1" 400 '
out=$(steps 'POST /-/echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\nGET /-/healthz HTTP/1.0\r\n\r\n')
[ "$(echo "$out" | status_lines)" = "400 " ]; check http_1_0_transfer_encoding_400_and_close $? "$(echo "$out" | status_lines)"
line host_invalid_400 400 'GET / HTTP/1.1\r\nHost: a b\r\n\r\n'
line host_bad_port_400 400 'GET / HTTP/1.1\r\nHost: a:+80\r\n\r\n'
line host_userinfo_400 400 'GET / HTTP/1.1\r\nHost: u@a\r\n\r\n'
line host_ipv6_literal_200 200 'GET /-/healthz HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n'
line host_empty_200 200 'GET /-/healthz HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n'
line asterisk_form_only_for_options_400 400 'GET * HTTP/1.1\r\nHost: a\r\n\r\n'
line options_other_target_400 400 'OPTIONS index.html HTTP/1.1\r\nHost: a\r\n\r\n'
alive request_line

# ---- every answer the parser decides on is in the access log ----
group
line head_without_host_logged 400 'GET /x HTTP/1.1\r\n\r\n' '"GET /x HTTP/1.1" 400 12 '
line target_too_long_logged 414 "GET /$(head -c 9000 /dev/zero | tr '\0' a) HTTP/1.1\r\nHost: a\r\n\r\n" '"GET /aaaa[a]* HTTP/1.1" 414 '
line head_too_large_logged 431 "GET /big HTTP/1.1\r\nHost: a\r\nX-Big: $(head -c 70000 /dev/zero | tr '\0' a)\r\n\r\n" '"GET /big HTTP/1.1" 431 '
line garbage_logged 400 'garbage\r\n\r\n' '"- - HTTP/1.1" 400 '
out=$(steps 'GET /slow HTTP/1.1\r\nHost: a\r\nUser-Agent: slowpoke\r\nX-Unfinished: ' '' '' '' '' '' '' '' '')
[ "$(echo "$out" | status_lines)" = "408 " ] && [ "$(logged '"GET /slow HTTP/1.1" 408 .* "slowpoke" "a"')" = 1 ]
check slow_head_408_logged $? "$(echo "$out" | status_lines) $(tail -1 "$TMP/access.log")"
alive parser_errors_logged

# ---- behind haproxy in mode http, which forwards request trailers ----
if command -v haproxy >/dev/null; then
  group
  HPORT=$(free_port)
  start_haproxy_http "$HPORT" "server h2park 127.0.0.1:$PORT"
  for i in $(seq 1 50); do [ "$(code "$HPORT" /-/healthz)" = 200 ] && break; sleep 0.1; done
  hsteps() { local save=$PORT; PORT=$HPORT; steps "$@"; PORT=$save; }
  out=$(hsteps "POST /-/healthz HTTP/1.1\r\n$CHUNKED\r\n3\r\nabc\r\n" "0\r\nX-Trailer: y\r\n\r\n" "$NEXT")
  [ "$(echo "$out" | status_lines)" = "405 200 " ]; check haproxy_trailer_after_early_answer $? "$(echo "$out" | status_lines)"
  out=$(hsteps "POST /-/echo HTTP/1.1\r\n$CHUNKED\r\n5\r\nhello\r\n" "0\r\nHost: evil.example\r\nX-T: y\r\n\r\n" "$NEXT")
  [ "$(echo "$out" | status_lines)" = "200 200 " ] && echo "$out" | grep -qx hello
  check haproxy_trailers_while_handling $? "$(echo "$out" | status_lines)"
  alive haproxy_trailers
  kill "$HPPID"; wait "$HPPID" 2>/dev/null
else
  echo "ok haproxy_trailer_after_early_answer # SKIP haproxy not installed"
fi
stop_daemon
