#!/bin/bash
# SIGHUP re-reads the configuration file and applies it without a restart: root,
# builtin routes, listen addresses (a new one opened, a removed one closed with the
# requests in flight on it finished), log level, access log, timeouts (for connections
# already open too), parking; workers and coro_stack_size are logged as needing a
# restart.  A bad file, a missing root or a busy port keep the running configuration
# and log why.  Reloads during load lose no request, a burst of them ends on the last
# file, a SIGHUP while stopping is ignored, and a second SIGTERM ends the process at once.
. "$(dirname "$0")/lib.sh"
make_site
mkdir -p "$TMP/www2"
printf 'first root\n' > "$TMP/www/which.txt"
printf 'second root\n' > "$TMP/www2/which.txt"
P1=$(free_port); P2=$(free_port)
while [ "$P2" = "$P1" ]; do P2=$(free_port); done
C="$TMP/site.conf"

conf() { # conf LINES...: the configuration file, one argument per line (workers = 2 and
          # the access log a.log unless the lines say otherwise: a key twice is an error)
  { case "$*" in *"workers ="*) ;; *) echo "workers = 2" ;; esac
    case "$*" in *"access_log ="*) ;; *) echo "access_log = $TMP/a.log" ;; esac
    printf '%s\n' "$@"; } > "$C"
}

conf "listen = 127.0.0.1:$P1" "root = $TMP/www"
start_config "$C" "$P1" || exit 1
[ "$(get "$P1" /which.txt)" = "first root" ]; check reload_before $? "$(get "$P1" /which.txt)"

conf "listen = 127.0.0.1:$P1" "root = $TMP/www2" "builtin_routes = off"
reload_and_wait
[ "$(get "$P1" /which.txt)" = "second root" ]; check reload_root $? "$(get "$P1" /which.txt); $(tail -3 "$TMP/daemon.log")"
[ "$(code "$P1" /-/healthz)" = 404 ]; check reload_builtin_routes_off $? "$(code "$P1" /-/healthz)"

conf "listen = 127.0.0.1:$P1" "root = $TMP/www2"
reload_and_wait
[ "$(code "$P1" /-/healthz)" = 200 ]; check reload_builtin_routes_on $? "$(code "$P1" /-/healthz)"

# A listen address moves: the old one refuses new connections once it is gone, and a
# request in flight on it still gets its answer.
curl -s -o "$TMP/inflight.out" -w '%{http_code}' "http://127.0.0.1:$P1/-/delay?ms=1500" > "$TMP/inflight.code" &
CPID=$!
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2"
sleep 0.3
reload_and_wait
[ "$(get "$P2" /which.txt)" = "second root" ]; check reload_listen_added $? "$(tail -3 "$TMP/daemon.log")"
curl -s -m 2 -o /dev/null "http://127.0.0.1:$P1/-/healthz"; rc=$?
[ $rc = 7 ]; check reload_listen_removed $? "curl exit $rc (7: refused)"
wait "$CPID"
[ "$(cat "$TMP/inflight.code")" = 200 ]; check reload_removed_listener_drains $? "$(cat "$TMP/inflight.code")"

# Sixteen addresses (the most there can be), the last replaced by one listed first: the
# new one must not take the slot of an address that stays.
ports=""
while [ "$(echo $ports | wc -w)" -lt 17 ]; do
  p=$(free_port)
  case " $ports $P1 $P2 " in *" $p "*) ;; *) ports="$ports $p" ;; esac
done
set -- $ports
NEW=$1; shift
lines=(); for p in "$@"; do lines+=("listen = 127.0.0.1:$p"); done
conf "${lines[@]}" "root = $TMP/www2"
reload_and_wait
conf "listen = 127.0.0.1:$NEW" "${lines[@]:0:15}" "root = $TMP/www2"
reload_and_wait
bad=""
for p in "$NEW" "${@:1:15}"; do [ "$(code "$p" /-/healthz)" = 200 ] || bad="$bad $p"; done
curl -s -m 2 -o /dev/null "http://127.0.0.1:${16}/-/healthz" && bad="$bad ${16}(still)"
[ -z "$bad" ]; check reload_sixteen_listeners_one_replaced $? "not right:$bad; $(grep -c listening "$TMP/daemon.log") listening lines"

# Log level: error hides the next reload's info line; debug shows debug lines.
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2" "log_level = error"
kill -HUP "$DPID"; sleep 0.5     # (at level error the reload's end is not logged either)
n=$(grep -c 'SIGHUP: reloading' "$TMP/daemon.log")
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2" "log_level = debug" "listen = 127.0.0.1:$P1 tls"
kill -HUP "$DPID"; sleep 1
[ "$(grep -c 'SIGHUP: reloading' "$TMP/daemon.log")" = "$n" ]; check reload_log_level_error $? "$(tail -3 "$TMP/daemon.log")"
printf 'GET / HTTP/1.1\r\n\r\n' | timeout 2 openssl s_client -connect "127.0.0.1:$P1" >/dev/null 2>&1
printf 'not TLS\r\n\r\n' | curl -s -m 1 "telnet://127.0.0.1:$P1" >/dev/null 2>&1
sleep 0.3
# A preface followed by anything but SETTINGS: nghttp2's complaint is logged at debug only.
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x07\x00\x00\x00\x00\x00' | curl -s -m 1 "telnet://127.0.0.1:$P2" >/dev/null 2>&1
sleep 0.3
grep -q 'info .*refused: TLS handshake' "$TMP/daemon.log" && grep -q 'debug .*nghttp2: .*expected SETTINGS' "$TMP/daemon.log"
check reload_log_level_debug_and_tls_listener $? "$(tail -3 "$TMP/daemon.log")"
echo | openssl s_client -connect "127.0.0.1:$P1" 2>/dev/null | grep -q 'h2park self-signed'
check reload_new_tls_listener_self_signed $? "no self-signed certificate on $P1"

# Access log path.
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2" "access_log = $TMP/b.log"
reload_and_wait
get "$P2" /which.txt?after >/dev/null
grep -q 'which.txt?after' "$TMP/b.log" && ! grep -q 'which.txt?after' "$TMP/a.log"
check reload_access_log $? "$(ls "$TMP")"

# A shorter idle_timeout reaches a connection that was open before the reload.
timeout 10 "$BUILD/tests/h2raw" "$P2" idle 5000 > "$TMP/idle.out" &
RPID=$!
sleep 0.5
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2" "idle_timeout = 1s"
reload_and_wait
wait "$RPID"
grep -q 'GOAWAY last=0 error=0' "$TMP/idle.out"; check reload_idle_timeout_open_connection $? "$(tr '\n' ';' < "$TMP/idle.out")"

# Parking off: every connection gets its serve loop, as at accept with parking off.  The
# idle connections are opened once the 1 s idle_timeout above is gone (a slow reload, as
# under ASan, let it close half of them first), and all of them counted before the reload.
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2"
reload_and_wait
PORT=$P2
h2load_idle 20 "http://127.0.0.1:$P2" 30
wait_stat conns 21 20
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2" "parking = off"
reload_and_wait
wait_stat serve_coroutines 21 10; rc=$?
[ $rc = 0 ] && [ "$(stat_of parking)" = false ]; check reload_parking_off $? "$(stats_json)"
kill "$LOADPID" 2>/dev/null; wait "$LOADPID" 2>/dev/null

# What needs a restart is said, and kept.
conf "listen = 127.0.0.1:$P2" "root = $TMP/www2" "workers = 3" "coro_stack_size = 65536"
reload_and_wait
grep -q 'workers 2 -> 3 takes a restart; still 2' "$TMP/daemon.log" &&
  grep -q 'coro_stack_size 32768 -> 65536 takes a restart' "$TMP/daemon.log" && [ "$(stat_of workers)" = 2 ]
check reload_workers_needs_restart $? "$(grep restart "$TMP/daemon.log")"

# Bad configurations keep the running one, and say where the problem is.
printf 'root = %s\nlistne = 1\n' "$TMP/www" > "$C"
reload_and_wait
grep -q "reload failed, the running configuration stays: $C:2: unknown key 'listne'" "$TMP/daemon.log" &&
  [ "$(get "$P2" /which.txt)" = "second root" ]
check reload_bad_file_keeps_running $? "$(tail -2 "$TMP/daemon.log")"
conf "listen = 127.0.0.1:$P2" "root = $TMP/www" "root = $TMP/www2"
reload_and_wait
grep -q "reload failed, the running configuration stays: $C:5: 'root' given twice at the top level (first at $C:4)" "$TMP/daemon.log" &&
  [ "$(get "$P2" /which.txt)" = "second root" ]
check reload_repeated_key_keeps_running $? "$(tail -2 "$TMP/daemon.log")"
conf "listen = 127.0.0.1:$P2" "root = $TMP/nowhere"
reload_and_wait
grep -q "reload failed.*root $TMP/nowhere ($C:4): No such file" "$TMP/daemon.log" &&
  [ "$(get "$P2" /which.txt)" = "second root" ]
check reload_missing_root_keeps_running $? "$(tail -2 "$TMP/daemon.log")"
BUSY=$(free_port)
hold_port "$BUSY"
conf "listen = 127.0.0.1:$P2" "listen = 127.0.0.1:$BUSY" "root = $TMP/www"
reload_and_wait
grep -q "reload failed.*listen 127.0.0.1:$BUSY: Address already in use" "$TMP/daemon.log" &&
  [ "$(get "$P2" /which.txt)" = "second root" ]
check reload_busy_port_keeps_running $? "$(tail -2 "$TMP/daemon.log")"
kill "$HOLDPID"

# Reloads while requests flow: none fails; a burst of SIGHUPs ends on the last file.
conf "listen = 127.0.0.1:$P2" "root = $TMP/www"
reload_and_wait
h2load -n 30000 -c 4 -m 4 "http://127.0.0.1:$P2/which.txt" > "$TMP/load.out" 2>&1 &
HPID=$!
for i in 1 2 3 4 5 6 7 8 9 10; do
  if [ $((i % 2)) = 0 ]; then conf "listen = 127.0.0.1:$P2" "root = $TMP/www"; else conf "listen = 127.0.0.1:$P2" "root = $TMP/www2"; fi
  kill -HUP "$DPID"; sleep 0.05
done
wait "$HPID"
grep -q 'requests: 30000 total, 30000 started, 30000 done, 30000 succeeded, 0 failed' "$TMP/load.out"
check reload_under_load_no_failed_request $? "$(grep -E 'requests:|status' "$TMP/load.out")"
sleep 1
[ "$(get "$P2" /which.txt)" = "first root" ]; check reload_burst_ends_on_last_file $? "$(get "$P2" /which.txt)"
kill -0 "$DPID"; check reload_daemon_alive $? "daemon gone: $(tail -5 "$TMP/daemon.log")"

# A second SIGTERM does not wait for the streams in flight: the one here is cut, not
# answered (the time it took is printed).
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P2/-/delay?ms=8000" > "$TMP/inflight.code" & INFLIGHT=$!
sleep 0.3
kill -TERM "$DPID"; sleep 0.3
reloads=$(grep -c 'SIGHUP: reloading' "$TMP/daemon.log")
kill -HUP "$DPID"; sleep 0.2                 # stopping: a SIGHUP changes nothing
[ "$(grep -c 'SIGHUP: reloading' "$TMP/daemon.log")" = "$reloads" ]; check sighup_while_stopping_ignored $? "$(tail -2 "$TMP/daemon.log")"
kill -0 "$DPID"; alive=$?
t0=$(date +%s.%N)
kill -TERM "$DPID"; wait "$DPID"; status=$?
echo "# second SIGTERM: exited after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
wait "$INFLIGHT"; inflight=$(cat "$TMP/inflight.code")
[ $alive = 0 ] && [ $status = 1 ] && [ "$inflight" != 200 ] && grep -q 'second SIGTERM: exiting now' "$TMP/daemon.log"
check second_sigterm_exits_at_once $? "alive after the first: $alive, exit $status, the stream in flight answered '$inflight'"
