#!/bin/bash
# The HTTP semantics and observability users of nginx and h2o expect, over HTTP/1.1 and
# HTTP/2 alike: Date and Server on every answer, ETags of size and mtime (weak for a file
# changed within the last second) and the conditionals
# (304, 412), byte ranges (206, 416, If-Range), the redirect of a directory named
# without its slash, precompressed files by Accept-Encoding with Vary, Content-Type for
# the web's types; the access log in combined and json (and refused connections in the
# error log); /metrics checked by Prometheus' promtool; the live dashboard drawn by
# headless Chromium.
. "$(dirname "$0")/lib.sh"
make_site
head -c 100000 /dev/urandom > "$TMP/www/data.bin"
printf 'console.log(1)\n' > "$TMP/www/app.js"
printf 'a,b\n' > "$TMP/www/t.csv"
printf '<svg/>' > "$TMP/www/i.svg"
printf 'x' > "$TMP/www/f.woff2"; printf 'x' > "$TMP/www/m.wasm"; printf 'x' > "$TMP/www/unknown.zzz"
printf 'plain text, compressible plain text, compressible plain text\n' > "$TMP/www/page.txt"
gzip -k9 "$TMP/www/page.txt"
mkdir -p "$TMP/www/evil.example" "$TMP/www/\\evil.example"
printf 'pretend brotli' > "$TMP/www/page.txt.br"
# Files older than a second have strong ETags (one modified within the last second a weak
# one, below); a copy that keeps size and mtime (cp -p, rsync -t) keeps the ETag.
touch -d '-1 hour' "$TMP/www"/* "$TMP/www/sub"/*
printf 'old\n' > "$TMP/www/old.txt"; touch -d '2001-02-03 04:05:06 UTC' "$TMP/www/old.txt"
cp -p "$TMP/www/data.bin" "$TMP/www/copy.bin"
start_daemon --access-log "$TMP/access.log" || { fail semantics_daemon_starts "see above"; exit 1; }
H="http://127.0.0.1:$PORT"
c1() { curl -s --http1.1 "$@"; }
c2() { curl -s --http2-prior-knowledge "$@"; }
hdr() { tr -d '\r' | sed -n "s/^$1: //Ip" | head -1; }

for v in 1 2; do
  c=c$v
  out=$($c -D - -o /dev/null "$H/"); d=$(echo "$out" | hdr date)
  [ -n "$d" ] && [ "$(date -u -d "$d" +%s 2>/dev/null || echo 0)" -gt $(( $(date +%s) - 60 )) ] && [ "$(echo "$out" | hdr server)" = h2park ]
  check "h$v: date_and_server_on_200" $? "$(echo "$out" | tr -d '\r' | head -4 | tr '\n' '|')"
  out=$($c -D - -o /dev/null "$H/nope"); [ -n "$(echo "$out" | hdr date)" ]; check "h$v: date_on_404" $? "no Date"
  out=$($c -D - -o /dev/null "$H/data.bin"); etag=$(echo "$out" | hdr etag)
  want=$(python3 -c 'import os,sys; s=os.stat(sys.argv[1]); print("\"%x-%x\"" % (s.st_size, s.st_mtime_ns))' "$TMP/www/data.bin")
  [ "$etag" = "$want" ] && [ "$(echo "$out" | hdr accept-ranges)" = bytes ]
  check "h$v: strong_etag_of_size_and_mtime" $? "etag '$etag', want '$want'"
  copy=$($c -D - -o /dev/null "$H/copy.bin" | hdr etag); [ "$copy" = "$etag" ]
  check "h$v: etag_same_for_a_copy" $? "copy '$copy', original '$etag'"
  code=$($c -o /dev/null -w '%{http_code}' -H "If-None-Match: $etag" "$H/data.bin"); [ "$code" = 304 ]; check "h$v: if_none_match_304" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -H "If-None-Match: W/$etag" "$H/data.bin"); [ "$code" = 304 ]; check "h$v: if_none_match_weak_compare_304" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -H 'If-None-Match: "other"' "$H/data.bin"); [ "$code" = 200 ]; check "h$v: if_none_match_other_200" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -H 'If-Match: "other"' "$H/data.bin"); [ "$code" = 412 ]; check "h$v: if_match_other_412" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -H "If-Match: $etag" "$H/data.bin"); [ "$code" = 200 ]; check "h$v: if_match_same_200" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -H 'If-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT' "$H/data.bin"); [ "$code" = 412 ]
  check "h$v: if_unmodified_since_older_412" $? "$code"
  out=$($c -D - -o "$TMP/r.out" -r 1000-1999 "$H/data.bin"); code=$(echo "$out" | head -1 | cut -d' ' -f2)
  [ "$code" = 206 ] && [ "$(echo "$out" | hdr content-range)" = "bytes 1000-1999/100000" ] && cmp -s "$TMP/r.out" <(tail -c +1001 "$TMP/www/data.bin" | head -c 1000)
  check "h$v: range_206" $? "$code $(echo "$out" | hdr content-range)"
  $c -o "$TMP/r.out" -r -500 "$H/data.bin"; cmp -s "$TMP/r.out" <(tail -c 500 "$TMP/www/data.bin"); check "h$v: suffix_range" $? "differs"
  $c -o "$TMP/r.out" -r 99000- "$H/data.bin"; cmp -s "$TMP/r.out" <(tail -c 1000 "$TMP/www/data.bin"); check "h$v: open_range" $? "differs"
  out=$($c -D - -o /dev/null -r 200000-300000 "$H/data.bin"); code=$(echo "$out" | head -1 | cut -d' ' -f2)
  [ "$code" = 416 ] && [ "$(echo "$out" | hdr content-range)" = "bytes */100000" ]; check "h$v: range_unsatisfiable_416" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -r 0-1,5-6 "$H/data.bin"); [ "$code" = 200 ]; check "h$v: multi_range_whole_200" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -r 0-9 -H "If-Range: $etag" "$H/data.bin"); [ "$code" = 206 ]; check "h$v: if_range_same_206" $? "$code"
  code=$($c -o /dev/null -w '%{http_code}' -r 0-9 -H 'If-Range: "old"' "$H/data.bin"); [ "$code" = 200 ]; check "h$v: if_range_changed_200" $? "$code"
  # Numbers in fields are digits and nothing else (RFC 9110 section 14.1.1: a range that
  # does not parse is ignored); the unit is case-insensitive.
  for r in 'bytes= 1-2' 'bytes=+1-2' 'bytes=1-+2' 'bytes=-+5' 'bytes=1 -2' 'bytes=0x1-2' 'bytes=1-2x'; do
    code=$($c -o /dev/null -w '%{http_code}' -H "Range: $r" "$H/data.bin"); [ "$code" = 200 ]; check "h$v: range_not_digits_ignored ($r)" $? "$code"
  done
  code=$($c -o /dev/null -w '%{http_code}' -H 'Range: bytes=99999999999999999999-' "$H/data.bin"); [ "$code" = 416 ]
  check "h$v: range_past_int64_unsatisfiable" $? "$code"
  out=$($c -D - -o /dev/null -H 'Range: bytes=99990-99999999999999999999' "$H/data.bin")
  [ "$(echo "$out" | hdr content-range)" = "bytes 99990-99999/100000" ]; check "h$v: range_last_past_int64_clamped" $? "$(echo "$out" | hdr content-range)"
  code=$($c -o /dev/null -w '%{http_code}' -H 'Range: BYTES=1-2' "$H/data.bin"); [ "$code" = 206 ]; check "h$v: range_unit_any_case_206" $? "$code"
  # Dates are one of the three forms exactly; a sloppy one is no validator (ignored).
  for d in 'Sat, 03 Feb 2001 04:05:06 GMT' 'Saturday, 03-Feb-01 04:05:06 GMT' 'Sat Feb  3 04:05:06 2001'; do
    code=$($c -o /dev/null -w '%{http_code}' -H "If-Modified-Since: $d" "$H/old.txt"); [ "$code" = 304 ]
    check "h$v: if_modified_since_exact_304 ($d)" $? "$code"
  done
  for d in 'Sat,  3 Feb 2001 04:05:06 GMT' 'Sat, 3 Feb 2001 04:05:06 GMT' 'Sat, 03 Feb 2001 4:05:06 GMT' \
           'Sat, 03 Feb 2001 04:05:06 gmt' 'Sat, 03 Feb +2001 04:05:06 GMT' 'Sat Feb 3 04:05:06 2001' \
           'Saturday, 03-Feb-01 4:05:06 GMT' 'Sat, 03 Feb 2001 04:05:06 GMT junk'; do
    code=$($c -o /dev/null -w '%{http_code}' -H "If-Modified-Since: $d" "$H/old.txt"); [ "$code" = 200 ]
    check "h$v: if_modified_since_sloppy_ignored ($d)" $? "$code"
  done
  # A weight is a qvalue (0 or 1 and up to three decimals), else the coding is not accepted.
  for ae in 'gzip;q=+1' 'gzip;q=1e0' 'gzip;q= 1' 'gzip;q=0.0001' 'gzip;q=2'; do
    out=$($c -D - -o /dev/null -H "Accept-Encoding: $ae" "$H/page.txt"); [ -z "$(echo "$out" | hdr content-encoding)" ]
    check "h$v: accept_encoding_bad_qvalue_refuses ($ae)" $? "$(echo "$out" | hdr content-encoding)"
  done
  out=$($c -D - -o /dev/null -H 'Accept-Encoding: gzip ; q=0.5, br;q=0' "$H/page.txt"); [ "$(echo "$out" | hdr content-encoding)" = gzip ]
  check "h$v: accept_encoding_qvalue_with_spaces" $? "$(echo "$out" | hdr content-encoding)"
  code=$($c -o /dev/null -w '%{http_code}' "$H/-/delay?ms=+5"); [ "$code" = 400 ]; check "h$v: delay_ms_digits_only_400" $? "$code"
  # Modified within the last second: the tag is weak, so If-Match and If-Range (strong
  # comparisons) never match it, while If-None-Match (weak) does.
  printf 'fresh %s\n' "$v" > "$TMP/www/fresh$v.txt"
  weak=$($c -D - -o /dev/null "$H/fresh$v.txt" | hdr etag)
  codes="$($c -o /dev/null -w '%{http_code}' -H "If-Match: $weak" "$H/fresh$v.txt") $($c -o /dev/null -w '%{http_code}' -r 0-1 -H "If-Range: $weak" "$H/fresh$v.txt") $($c -o /dev/null -w '%{http_code}' -H "If-None-Match: $weak" "$H/fresh$v.txt")"
  [ "${weak#W/\"}" != "$weak" ] && [ "$codes" = "412 200 304" ]
  check "h$v: fresh_file_weak_etag" $? "etag '$weak', If-Match/If-Range/If-None-Match: $codes"
  out=$($c -D - -o /dev/null "$H/sub?x=1"); [ "$(echo "$out" | head -1 | cut -d' ' -f2)" = 301 ] && [ "$(echo "$out" | hdr location)" = "/sub/?x=1" ]
  check "h$v: directory_without_slash_301" $? "$(echo "$out" | head -1)"
  # A redirect never names another host: // and /\ at a Location's start are what a browser
  # reads as one (an open redirect).
  for t in '//evil.example' '///evil.example' '/\evil.example'; do
    out=$($c --path-as-is -D - -o /dev/null "$H$t"); loc=$(echo "$out" | hdr location)
    case $loc in /evil.example/|/%5Cevil.example/) r=0 ;; *) r=1 ;; esac
    check "h$v: redirect_location_same_host ($t)" $r "$(echo "$out" | head -1 | tr -d '\r') location '$loc'"
  done
  out=$($c -D - -o "$TMP/gz.out" -H 'Accept-Encoding: gzip' "$H/page.txt")
  [ "$(echo "$out" | hdr content-encoding)" = gzip ] && [ "$(echo "$out" | hdr vary)" = accept-encoding ] && cmp -s "$TMP/gz.out" "$TMP/www/page.txt.gz" &&
    [ "$(echo "$out" | hdr content-type)" = "text/plain; charset=utf-8" ]
  check "h$v: precompressed_gzip" $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
  out=$($c -D - -o "$TMP/br.out" -H 'Accept-Encoding: gzip, br' "$H/page.txt")
  [ "$(echo "$out" | hdr content-encoding)" = br ] && cmp -s "$TMP/br.out" "$TMP/www/page.txt.br"; check "h$v: precompressed_br_preferred" $? "$(echo "$out" | hdr content-encoding)"
  out=$($c -D - -o /dev/null -H 'Accept-Encoding: gzip;q=0, br;q=0' "$H/page.txt")
  [ -z "$(echo "$out" | hdr content-encoding)" ] && [ "$(echo "$out" | hdr vary)" = accept-encoding ]; check "h$v: identity_when_refused_still_varies" $? "$(echo "$out" | hdr content-encoding)"
done

types=""
for f in app.js t.csv i.svg f.woff2 m.wasm unknown.zzz index.html; do
  types="$types $(c1 -o /dev/null -w '%{content_type}' "$H/$f" | tr -d ' ')"
done
[ "$types" = " text/javascript;charset=utf-8 text/csv;charset=utf-8 image/svg+xml font/woff2 application/wasm application/octet-stream text/html;charset=utf-8" ]
check content_types $? "$types"
code=$(c1 -o /dev/null -w '%{http_code}' -H 'If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT' -H 'If-None-Match: "other"' "$H/data.bin")
[ "$code" = 200 ]; check if_none_match_wins_over_if_modified_since $? "$code"

# The access log, combined: what goaccess and the like read.
c1 -A 'agent "quoted"' -e http://example.org/from "$H/index.html" >/dev/null
c2 "$H/nope" >/dev/null
sleep 0.3
line=$(grep 'index.html' "$TMP/access.log" | tail -1)
echo "$line" | grep -qE '^127\.0\.0\.1 - - \[[0-9]{2}/[A-Z][a-z]{2}/[0-9]{4}:[0-9:]{8} \+0000\] "GET /index.html HTTP/1.1" 200 [0-9]+ "http://example.org/from" "agent \\x22quoted\\x22" "127.0.0.1:[0-9]+" http/1.1 [0-9.]+$'
check access_log_combined $? "$line"
grep -q '"GET /nope HTTP/2.0" 404 .* h2c ' "$TMP/access.log"; check access_log_combined_h2c $? "$(tail -1 "$TMP/access.log")"
# Refused connections leave a line in the error log, at info.
printf 'GARBAGE\r\n\r\n' > /dev/tcp/127.0.0.1/$PORT 2>/dev/null
timeout 5 openssl s_client -connect "127.0.0.1:$TPORT" -alpn spdy/3 </dev/null >/dev/null 2>&1
sleep 0.3
grep -q 'info  127.0.0.1:[0-9]*: refused: HTTP/1.1 400' "$TMP/daemon.log" && grep -q 'refused: TLS handshake' "$TMP/daemon.log"
check refused_connections_logged $? "$(grep refused "$TMP/daemon.log" | head -2)"

# /metrics: Prometheus conventions, checked by its own tool.
m=$(c1 "$H/metrics")
for fam in h2park_connections h2park_connections_parked h2park_connections_accepted_total h2park_connections_closed_total \
           h2park_request_duration_seconds h2park_responses_total h2park_sent_bytes_total h2park_received_bytes_total \
           h2park_coroutines h2park_heap_alloc_bytes process_cpu_seconds_total process_resident_memory_bytes \
           process_open_fds process_start_time_seconds h2park_build_info; do
  echo "$m" | grep -q "^# TYPE $fam " || { fail metrics_families "no $fam"; break; }
done && ok metrics_families
echo "$m" | grep -q '^h2park_request_duration_seconds_count{protocol="http/1.1"} [1-9]' && echo "$m" | grep -q '^h2park_responses_total{code="4xx"} [1-9]'
check metrics_count_requests $? "$(echo "$m" | grep -E 'duration_seconds_count|responses_total' | tr '\n' '|')"
# Request durations resolve this server's latencies: buckets from 25 us up, in order, and
# a small response timed to the microsecond (read from the loop's clock, which stands still
# within an iteration, twenty of them summed to 0).
for i in $(seq 1 20); do curl -s --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$PORT/-/healthz"; done
m=$(c1 "$H/metrics")
les=$(echo "$m" | sed -n 's/^h2park_request_duration_seconds_bucket{protocol="h2c",le="\([^"]*\)"}.*/\1/p' | tr '\n' ' ')
sum=$(echo "$m" | sed -n 's/^h2park_request_duration_seconds_sum{protocol="h2c"} //p')
echo "$les" | awk '{ if ($1 != "2.5e-05" || $NF != "+Inf") exit 1; for (i = 2; i < NF; i++) if ($i + 0 <= $(i - 1) + 0) exit 1 }' &&
  awk -v s="$sum" 'BEGIN { exit !(s > 0) }'
check metrics_duration_buckets_from_25us $? "le: $les; h2c sum $sum"
echo "# h2c request durations (cumulative by bucket): $(echo "$m" | grep '^h2park_request_duration_seconds_bucket{protocol="h2c"' | sed 's/.*le="\([^"]*\)"} /\1:/' | tr '\n' ' ')"
if command -v promtool >/dev/null; then
  out=$(echo "$m" | promtool check metrics 2>&1); [ -z "$out" ]; check promtool_check_metrics $? "$out"
else
  echo "ok promtool_check_metrics # SKIP promtool not installed (apt-get install prometheus)"
fi
# HPACK: the fields that repeat (server, content-type) are indexed and the second response
# refers to them; the date and a file's modification time are sent never-indexed (they
# change), and its etag without indexing (nghttp2's rule).
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
f=$($PY "$(dirname "$0")/h2fields.py" "$PORT" /index.html)
echo "$f" | $PY -c 'import re, sys; e1, e2, b1, b2, never = re.match(r"entries=(\d+)/(\d+) bytes=(\d+)/(\d+) never=(\S+)$", sys.stdin.read().strip()).groups(); assert int(e1) >= 2 and e1 == e2 and int(b2) < int(b1) and never == "date,last-modified"'
check hpack_repeating_fields_indexed $? "$f"
stop_daemon

# json access log, Server turned off, and no response field indexed.
printf 'access_log_format = json\nserver_header = off\nhpack_encoder_table_size = 0\n' > "$TMP/json.conf"
start_daemon -c "$TMP/json.conf" --access-log "$TMP/json.log"
H="http://127.0.0.1:$PORT"
out=$(c1 -D - -o /dev/null -A 'a"b' "$H/")
[ -z "$(echo "$out" | hdr server)" ]; check server_header_off $? "$(echo "$out" | hdr server)"
sleep 0.3
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
tail -1 "$TMP/json.log" | $PY -c 'import json, sys; d = json.loads(sys.stdin.read()); assert d["user_agent"] == "a\"b" and d["status"] == 200 and d["protocol"] == "http/1.1" and d["target"] == "/", d'
check access_log_json $? "$(tail -1 "$TMP/json.log")"
# The client's address and port in fields of their own; the time to the millisecond.
port=$(c1 -o /dev/null -w '%{local_port}' "$H/sub/style.css")
sleep 0.3
grep '"target":"/sub/style.css"' "$TMP/json.log" | tail -1 | $PY -c 'import json, re, sys; d = json.loads(sys.stdin.read()); assert d["client"] == "127.0.0.1" and d["client_port"] == int(sys.argv[1]) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", d["time"]), d' "$port"
check access_log_json_client_port_and_milliseconds $? "curl's port $port: $(grep style.css "$TMP/json.log" | tail -1)"
f=$($PY "$(dirname "$0")/h2fields.py" "$PORT" /index.html)
case $f in "entries=0/0 "*) true ;; *) false ;; esac; check hpack_encoder_table_size_zero $? "$f"

# The dashboard: its data, and the page as a browser draws it.
h2load_idle 50 "$H" 10
sleep 2.5
d=$(c1 "$H/-/dashboard/data")
echo "$d" | $PY -c 'import json, sys; d = json.load(sys.stdin); n = len(d["seconds"]); assert n >= 2 and all(len(d[k]) == n for k in ("conns", "parked", "serve", "handlers", "parked_handlers", "parked_handler_bytes", "requests_total", "rss", "stack", "heap", "clients_tracked", "limited_total", "auth_failed_total")) and max(d["parked"]) >= 50, d'
check dashboard_data $? "$(echo "$d" | head -c 300)"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
  dom=$(timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=3000 --dump-dom "$H/-/dashboard" 2>/dev/null)
  drawn=$(echo "$dom" | grep -oE '<polyline [^>]*points="[0-9][^"]+"' | wc -l)
  [ "$drawn" = 16 ] && echo "$dom" | grep -qE '[0-9]+ connections, [0-9]+ parked'; check dashboard_drawn_in_chromium $? "$drawn polylines drawn"
else
  echo "ok dashboard_drawn_in_chromium # SKIP chromium is not installed (apt-get install chromium)"
fi
kill "$LOADPID" 2>/dev/null
stop_daemon
