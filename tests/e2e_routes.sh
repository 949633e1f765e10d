#!/bin/bash
# Routes and protocols with real clients: static files (GET, HEAD, 304, index.html,
# Content-Type), every way out of root (404), the built-in routes, 404/405, h2 over TLS
# (curl, nghttp), h2c with prior knowledge and by Upgrade, HTTP/1.1 on the same port.
. "$(dirname "$0")/lib.sh"
make_site
start_daemon || { fail routes_daemon_starts "see above"; exit 1; }
H="http://127.0.0.1:$PORT"
S="https://127.0.0.1:$TPORT"
c2() { curl -s --http2-prior-knowledge "$@"; }

body=$(c2 "$H/"); [ "$body" = "<h1>h2park test</h1>" ]; check get_index_h2c $? "got '$body'"
body=$(curl -s -k --http2 "$S/"); [ "$body" = "<h1>h2park test</h1>" ]; check get_index_tls $? "got '$body'"
proto=$(curl -s -k --http2 -o /dev/null -w '%{http_version}' "$S/"); [ "$proto" = 2 ]; check tls_is_h2 $? "http_version $proto"
hdr=$(c2 -sI "$H/sub/style.css" | tr -d '\r')
echo "$hdr" | grep -q '^content-type: text/css' && echo "$hdr" | grep -q '^content-length: 20' && echo "$hdr" | grep -q '^last-modified: '
check head_css_headers $? "$hdr"
lm=$(echo "$hdr" | sed -n 's/^last-modified: //p')
code=$(c2 -o /dev/null -w '%{http_code}' -H "If-Modified-Since: $lm" "$H/sub/style.css"); [ "$code" = 304 ]; check if_modified_since_304 $? "code $code"
code=$(c2 -o /dev/null -w '%{http_code}' -H "If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT" "$H/sub/style.css"); [ "$code" = 200 ]; check if_modified_since_old_200 $? "code $code"
body=$(c2 "$H/sub/"); [ "$(c2 -o /dev/null -w '%{http_code}' "$H/sub/")" = 404 ]; check dir_without_index_404 $? "dir without index"
mkdir -p "$TMP/www/docs"; printf 'docs\n' > "$TMP/www/docs/index.html"
# Small files are served from a copy the worker keeps for a second: a rewrite shows after
# that, with a content-length that matches the new body.
printf 'first version\n' > "$TMP/www/small.txt"
body=$(c2 "$H/small.txt"); [ "$body" = "first version" ]; check small_file_cached $? "got '$body'"
printf 'second, longer version\n' > "$TMP/www/small.txt"; sleep 1.2
out=$(c2 -i "$H/small.txt" | tr -d '\r'); echo "$out" | grep -qi '^content-length: 23$' && [ "$(echo "$out" | tail -1)" = "second, longer version" ]
check small_file_rewritten_seen $? "$out"
for n in 16384 16385; do
  head -c $n /dev/urandom > "$TMP/www/r$n.bin"
  c2 -o "$TMP/r$n.out" "$H/r$n.bin" && c2 -o "$TMP/r$n.again" "$H/r$n.bin"; cmp -s "$TMP/www/r$n.bin" "$TMP/r$n.out" && cmp -s "$TMP/www/r$n.bin" "$TMP/r$n.again"
  check "file_of_${n}_bytes_identical" $? "$(ls -l "$TMP/r$n.out" "$TMP/r$n.again" 2>&1 | tr '\n' ' ')"
done
body=$(c2 "$H/docs/"); [ "$body" = docs ]; check dir_index_html $? "got '$body'"

for path in "/../outside/secret.txt" "/%2e%2e/outside/secret.txt" "/sub/%2E%2E/%2e%2e/outside/secret.txt" \
            "/link.txt" "/sub/..%2f..%2foutside/secret.txt" "/nope.html" "/%00"; do
  code=$(c2 --path-as-is -o "$TMP/escape.out" -w '%{http_code}' "$H$path")
  if [ "$code" != 404 ] || grep -q secret "$TMP/escape.out"; then fail "outside_root_404 $path" "code $code"; else ok "outside_root_404 $path"; fi
done

[ "$(c2 "$H/-/healthz")" = ok ]; check healthz $? "healthz"
stats=$(stats_json)
for f in conns parked_conns coroutines serve_coroutines handler_coroutines stack_inuse_bytes cached_stack_bytes heap_alloc_bytes \
         heap_inuse_bytes heap_sys_bytes heap_released_bytes rss_bytes parking conns_total streams_total parks_total \
         respawns_total workers; do
  printf '%s' "$stats" | grep -q "\"$f\": " || { fail stats_fields "missing $f in $stats"; break; }
done && ok stats_fields
[ "$(stat_from "$stats" serve_coroutines)" = 1 ] && [ "$(stat_from "$stats" handler_coroutines)" = 1 ] && [ "$(stat_from "$stats" parking)" = true ]
check stats_counts_asking_connection $? "$stats"
m=$(c2 "$H/metrics"); echo "$m" | grep -q '^h2park_connections [0-9]' && echo "$m" | grep -q '^h2park_heap_alloc_bytes [0-9]' && echo "$m" | grep -q '^# TYPE h2park_requests_total counter'
check metrics_prometheus $? "$m"
code=$(c2 -o /dev/null -w '%{http_code}' -X DELETE "$H/"); [ "$code" = 405 ]; check static_405 $? "code $code"
code=$(c2 -o /dev/null -w '%{http_code}' "$H/-/echo"); [ "$code" = 405 ]; check echo_get_405 $? "code $code"
code=$(c2 -o /dev/null -w '%{http_code}' -X POST "$H/-/stats"); [ "$code" = 405 ]; check stats_post_405 $? "code $code"
code=$(c2 -o /dev/null -w '%{http_code}' "$H/-/delay?ms=600001"); [ "$code" = 400 ]; check delay_limit_400 $? "code $code"
# Ten minutes is allowed: the request is still waiting when the client gives up.
code=$(c2 -m 1 -o /dev/null -w '%{http_code}' "$H/-/delay?ms=600000"); [ "$code" = 000 ]; check delay_ten_minutes_waits $? "code $code"
body=$(c2 --data-binary 'hello echo' "$H/-/echo"); [ "$body" = "hello echo" ]; check echo_small $? "got '$body'"

body=$(nghttp "$H/" 2>/dev/null); [ "$body" = "<h1>h2park test</h1>" ]; check nghttp_h2c $? "got '$body'"
body=$(nghttp "$S/-/healthz" 2>/dev/null); [ "$body" = ok ]; check nghttp_tls $? "got '$body'"
out=$(curl -s --http2 -v "$H/" 2>&1); echo "$out" | grep -q '101 Switching Protocols' && echo "$out" | grep -q '<h1>h2park test</h1>'
check upgrade_h2c $? "$(echo "$out" | tail -3)"
out=$(curl -s --http1.1 -i "$H/" | tr -d '\r'); echo "$out" | head -1 | grep -q '^HTTP/1.1 200' && [ "$(echo "$out" | tail -1)" = "<h1>h2park test</h1>" ]
check http11_served $? "$(echo "$out" | head -1)"
printf 'builtin_routes = off\n' > "$TMP/nobuiltin.conf"
stop_daemon
start_daemon -c "$TMP/nobuiltin.conf"
H="http://127.0.0.1:$PORT"
code=$(c2 -o /dev/null -w '%{http_code}' "$H/-/stats"); [ "$code" = 404 ]; check builtin_routes_off $? "code $code"
stop_daemon

# builtin_routes_allow: the built-in routes but /-/healthz answer only the listed
# addresses; anyone else gets what the path would be without them (404, or a file there).
printf 'builtin_routes_allow = 10.0.0.0/8 2001:db8::/32\n' > "$TMP/allow.conf"
start_daemon -c "$TMP/allow.conf"
H="http://127.0.0.1:$PORT"
for path in /-/stats /metrics /-/dashboard /-/dashboard/data '/-/delay?ms=1'; do
  codes="$(curl -s --http1.1 -o /dev/null -w '%{http_code}' "$H$path") $(c2 -o /dev/null -w '%{http_code}' "$H$path")"
  [ "$codes" = "404 404" ]; check "builtin_route_not_allowed_404 $path" $? "codes $codes"
done
codes="$(c2 -o /dev/null -w '%{http_code}' --data x "$H/-/echo") $(c2 -o /dev/null -w '%{http_code}' -X POST "$H/-/stats")"
want="$(c2 -o /dev/null -w '%{http_code}' --data x "$H/nope") $(c2 -o /dev/null -w '%{http_code}' -X POST "$H/nope")"
[ "$codes" = "$want" ]; check builtin_route_not_allowed_post_as_any_path $? "codes $codes, $want for a path that is not there"
[ "$(c2 "$H/-/healthz")" = ok ]; check healthz_open_to_all $? "healthz"
mkdir -p "$TMP/www/-"; printf 'a file\n' > "$TMP/www/-/stats"
sleep 1.1     # what the open-file cache knew of the path (not there) has expired
[ "$(c2 "$H/-/stats")" = "a file" ]; check builtin_route_not_allowed_as_if_absent $? "$(c2 "$H/-/stats" | head -c 80)"
rm -r "$TMP/www/-"
stop_daemon
# Behind a PROXY protocol header, the client it names is the one judged.
P1=$(free_port); P2=$(free_port)
printf 'listen = 127.0.0.1:%s\nlisten = 127.0.0.1:%s proxy_protocol\nroot = %s\n' "$P1" "$P2" "$TMP/www" > "$TMP/proxy.conf"
start_config "$TMP/proxy.conf" "$P1"
via_proxy() { # CLIENT-ADDRESS PATH: the status line's code
  exec 3<>"/dev/tcp/127.0.0.1/$P2"
  printf 'PROXY TCP4 %s 127.0.0.1 40000 %s\r\nGET %s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' "$1" "$P2" "$2" >&3
  timeout 3 head -1 <&3 | cut -d' ' -f2
  exec 3<&- 3>&-
}
codes="$(via_proxy 203.0.113.9 /-/stats) $(via_proxy 203.0.113.9 /-/healthz) $(via_proxy 127.0.0.1 /-/stats)"
[ "$codes" = "404 200 200" ]; check builtin_routes_allow_judges_proxy_client $? "codes $codes"
stop_daemon
# On a "*" socket an IPv4 client is an IPv4-mapped IPv6 address, judged as IPv4; ::1 is
# not 127.0.0.0/8.
P1=$(free_port)
printf 'listen = *:%s\nroot = %s\nbuiltin_routes_allow = 127.0.0.0/8\n' "$P1" "$TMP/www" > "$TMP/dual.conf"
start_config "$TMP/dual.conf" "$P1"
codes="$(code "$P1" /-/stats) $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://[::1]:$P1/-/stats")"
[ "$codes" = "200 404" ]; check builtin_routes_allow_mapped_ipv4 $? "codes $codes"
# A reload applies a new list.
printf 'listen = *:%s\nroot = %s\nbuiltin_routes_allow = ::1\n' "$P1" "$TMP/www" > "$TMP/dual.conf"
reload_and_wait
codes="$(code "$P1" /-/stats) $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://[::1]:$P1/-/stats")"
[ "$codes" = "404 200" ]; check builtin_routes_allow_reloaded $? "codes $codes"
stop_daemon
