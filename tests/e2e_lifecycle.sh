#!/bin/bash
# The daemon's life: SIGTERM lets a request in flight finish and exits 0; SIGHUP
# reopens the access log and reloads the certificate, SIGUSR1 reopens the access log
# alone; the access log has one line per request; configuration mistakes exit 2 naming
# file, line and problem.
. "$(dirname "$0")/lib.sh"
make_site

start_daemon --access-log "$TMP/access.log"
curl -s --http2-prior-knowledge -o "$TMP/slow.out" -w '%{http_code}' "http://127.0.0.1:$PORT/-/delay?ms=1500" > "$TMP/slow.code" &
CPID=$!
sleep 0.4
kill -TERM "$DPID"
wait "$CPID"
wait "$DPID"; status=$?
[ "$(cat "$TMP/slow.code")" = 200 ] && grep -q 'waited 1500 ms' "$TMP/slow.out" && [ "$status" = 0 ]
check sigterm_finishes_inflight_then_exit_0 $? "code $(cat "$TMP/slow.code"), exit $status"
grep -q '"GET /-/delay?ms=1500 HTTP/2.0" 200 ' "$TMP/access.log" && grep -qE ' h2c [0-9.]+$' "$TMP/access.log"
check access_log_line_per_request $? "$(tail -2 "$TMP/access.log")"

start_daemon --access-log "$TMP/access.log"
curl -s -o /dev/null -k --http2 "https://127.0.0.1:$TPORT/"
mv "$TMP/access.log" "$TMP/access.log.1"
serial1=$(echo | openssl s_client -connect "127.0.0.1:$TPORT" -alpn h2 2>/dev/null | openssl x509 -noout -serial)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" \
  -days 2 -subj /CN=reloaded >/dev/null 2>&1
kill -HUP "$DPID"
sleep 0.3
curl -s -o /dev/null -k --http2 "https://127.0.0.1:$TPORT/sub/style.css"
serial2=$(echo | openssl s_client -connect "127.0.0.1:$TPORT" -alpn h2 2>/dev/null | openssl x509 -noout -serial)
[ -f "$TMP/access.log" ] && grep -q 'style.css' "$TMP/access.log" && ! grep -q 'style.css' "$TMP/access.log.1"
check sighup_reopens_access_log $? "$(ls "$TMP")"
[ -n "$serial1" ] && [ "$serial1" != "$serial2" ]; check sighup_reloads_certificate $? "$serial1 / $serial2"
# SIGUSR1 (nginx's, and logrotate's usual postrotate): the access log reopened, nothing
# else read again - the certificate stays the one loaded.
mv "$TMP/access.log" "$TMP/access.log.2"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/key.pem" -out "$TMP/cert.pem" \
  -days 2 -subj /CN=not-reloaded >/dev/null 2>&1
kill -USR1 "$DPID"
for i in $(seq 1 50); do grep -q 'SIGUSR1: reopened access_log' "$TMP/daemon.log" && break; sleep 0.1; done
curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$PORT/index.html"
serial3=$(echo | openssl s_client -connect "127.0.0.1:$TPORT" -alpn h2 2>/dev/null | openssl x509 -noout -serial)
[ -f "$TMP/access.log" ] && grep -q 'index.html' "$TMP/access.log" && ! grep -q 'index.html' "$TMP/access.log.2" &&
  grep -q "SIGUSR1: reopened access_log $TMP/access.log" "$TMP/daemon.log"
check sigusr1_reopens_access_log $? "$(ls "$TMP"; kill -0 "$DPID" || echo 'daemon gone'; tail -2 "$TMP/daemon.log")"
[ -n "$serial3" ] && [ "$serial3" = "$serial2" ]; check sigusr1_reloads_nothing_else $? "$serial2 / $serial3"
# A client offering OpenSSL's defaults (AES-256-GCM first) gets AES-128-GCM: the cheaper
# suite, chosen by the server, in TLS 1.3 and 1.2.
suite13=$(echo | openssl s_client -connect "127.0.0.1:$TPORT" -alpn h2 2>/dev/null | sed -n 's/.*Cipher is //p' | head -1)
suite12=$(echo | openssl s_client -tls1_2 -connect "127.0.0.1:$TPORT" -alpn h2 2>/dev/null | sed -n 's/.*Cipher is //p' | head -1)
[ "$suite13" = TLS_AES_128_GCM_SHA256 ] && [[ "$suite12" = ECDHE-*-AES128-GCM-SHA256 ]]
check tls_prefers_aes128_gcm $? "TLS 1.3: $suite13, TLS 1.2: $suite12"
kill -0 "$DPID"; check sighup_keeps_running $? "daemon gone"
stop_daemon

printf 'workers = 2\n# fine\nlistne = 127.0.0.1:1\n' > "$TMP/typo.conf"
config_error config_unknown_key_exit_2 "$TMP/typo.conf:3: unknown key 'listne'" -c "$TMP/typo.conf"
printf 'idle_timeout = soon\n' > "$TMP/bad.conf"
config_error config_bad_value_exit_2 "$TMP/bad.conf:1: idle_timeout: 'soon' is not a duration" -c "$TMP/bad.conf"
config_error config_missing_file_exit_2 "cannot read" -c "$TMP/none.conf"
config_error config_unreadable_cert_exit_2 "cannot load certificate $TMP/nocert.pem" --tls-listen 127.0.0.1:1 \
  --cert "$TMP/nocert.pem" --key "$TMP/key.pem" --root "$TMP/www"
config_error config_bad_flag_value_exit_2 "command line: workers: 'lots'" --workers lots --root "$TMP/www"
config_error config_missing_root_exit_2 "root $TMP/nowhere" --listen 127.0.0.1:1 --root "$TMP/nowhere"
# A port some other program holds (without SO_REUSEPORT).
BUSY=$(( 41000 + RANDOM % 9000 ))
openssl s_server -accept "127.0.0.1:$BUSY" -cert "$TMP/cert.pem" -key "$TMP/key.pem" -quiet >/dev/null 2>&1 &
SPID=$!; PIDS="$PIDS $SPID"
sleep 0.5
config_error config_busy_port_exit_2 "listen 127.0.0.1:$BUSY: Address already in use" --listen "127.0.0.1:$BUSY" \
  --root "$TMP/www"
kill "$SPID" 2>/dev/null
out=$("$H2PARK" --help); echo "$out" | grep -q -- '--tls-listen' && echo "$out" | grep -q -- '--parking'
check help_lists_flags $? "$out"
out=$("$H2PARK" --version); echo "$out" | grep -q 'size-specialized malloc' && echo "$out" | grep -q coroutines
check version_says_build $? "$out"

# Timeouts, with short settings.
printf 'preface_timeout = 1s\nidle_timeout = 1500ms\n' > "$TMP/short.conf"
start_daemon -c "$TMP/short.conf"
exec 5<>"/dev/tcp/127.0.0.1/$PORT"          # connects, never speaks
sleep 2.2
if timeout 1 cat <&5 >/dev/null 2>&1; then closed=0; else closed=$?; fi
exec 5<&- 5>&-
[ "$closed" = 0 ]; check preface_timeout_closes $? "connection still open after 2.2 s (read status $closed)"
out=$(timeout 10 "$BUILD/tests/h2raw" "$PORT" idle 4000)
echo "$out" | grep -q 'GOAWAY last=0 error=0' && echo "$out" | grep -q CLOSED
check idle_timeout_goaway_no_error $? "$(echo "$out" | tr '\n' ';')"
stop_daemon
# max_conns = 3: three held connections, and a fourth waits until one closes.
printf 'max_conns = 3\n' > "$TMP/limit.conf"
start_daemon -c "$TMP/limit.conf"
h2load_idle 3 "http://127.0.0.1:$PORT" 30
sleep 1.5       # (asking /-/stats would take a fourth connection)
code=$(curl -s --http2-prior-knowledge -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/-/healthz")
[ "$code" = 000 ]; check max_conns_pauses_accepting $? "a fourth connection was served: $code; $(ss -Htn "( sport = :$PORT )" | wc -l) sockets; $(cat "$TMP/h2load.out" | tail -3)"
kill "$LOADPID" 2>/dev/null; wait "$LOADPID" 2>/dev/null
code=$(curl -s --http2-prior-knowledge -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/-/healthz")
[ "$code" = 200 ]; check max_conns_resumes_accepting $? "code $code after the others closed"
stop_daemon
