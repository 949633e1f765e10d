#!/bin/bash
# systemd's side of h2park, with systemd's own tools: socket activation through
# systemd-socket-activate (LISTEN_FDS/LISTEN_PID, sockets matched to listen lines by
# address, "*:PORT" included), sd_notify readiness (READY=1, RELOADING=1, STOPPING=1
# on a NOTIFY_SOCKET this test listens on), and the point of it all: h2park restarted
# again and again under a held socket while h2load keeps connecting, with no request
# failed.  Hostile LISTEN_FDS values and sockets that match no listen line exit 2; a
# NOTIFY_SOCKET that leads nowhere is ignored.
. "$(dirname "$0")/lib.sh"
make_site
P=$(free_port)
ABS_H2PARK=$(cd "$(dirname "$H2PARK")" && pwd)/$(basename "$H2PARK")

# The service manager's end of NOTIFY_SOCKET: every datagram, one per line ("|" for \n).
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", "|") + "\n")
' "$TMP/notify.sock" "$TMP/notify.log" &
PIDS="$PIDS $!"; disown
for i in $(seq 1 20); do [ -S "$TMP/notify.sock" ] && break; sleep 0.05; done

wait_log() { # wait_log FILE PATTERN: up to 5 s for PATTERN to appear
  for i in $(seq 1 50); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# systemd-socket-activate binds, waits for the first connection, then execs h2park.
systemd-socket-activate -l "127.0.0.1:$P" -E NOTIFY_SOCKET="$TMP/notify.sock" -- \
  "$ABS_H2PARK" --listen "127.0.0.1:$P" --root "$TMP/www" --workers 2 >"$TMP/daemon.log" 2>&1 &
DPID=$!; PIDS="$PIDS $DPID"
sleep 0.3
[ "$(code "$P" /-/healthz)" = 200 ]; check activation_serves $? "$(cat "$TMP/daemon.log")"
grep -q "listening on 127.0.0.1:$P (HTTP/1.1 and h2c, a socket from systemd)" "$TMP/daemon.log" &&
  [ "$(ss -Hltn "( sport = :$P )" | wc -l)" = 1 ]
check activation_takes_the_socket $? "$(ss -Hltnp "( sport = :$P )")"
wait_log "$TMP/notify.log" 'READY=1'; check notify_ready $? "$(cat "$TMP/notify.log")"
kill -HUP "$DPID"
wait_log "$TMP/notify.log" 'RELOADING=1|MONOTONIC_USEC=' && sleep 0.3 &&
  [ "$(grep -c '^READY=1' "$TMP/notify.log")" = 2 ] && [ "$(sed -n 2p "$TMP/notify.log" | cut -c1-11)" = RELOADING=1 ]
check notify_reloading_then_ready $? "$(cat "$TMP/notify.log")"
kill -TERM "$DPID"; wait "$DPID"
grep -q '^STOPPING=1' "$TMP/notify.log"; check notify_stopping $? "$(cat "$TMP/notify.log")"

# A NOTIFY_SOCKET that is no socket, too long, or relative is ignored, not fatal.
long=$(printf '/%0200d' 0)
for ns in "$TMP/nothing-here" "@" "relative.sock" "$long" "$TMP/www/index.html"; do
  NOTIFY_SOCKET=$ns "$H2PARK" --listen "127.0.0.1:$P" --root "$TMP/www" --workers 1 >"$TMP/daemon.log" 2>&1 &
  DPID=$!; PIDS="$PIDS $DPID"
  for i in $(seq 1 30); do [ "$(code "$P" /-/healthz)" = 200 ] && break; sleep 0.1; done
  [ "$(code "$P" /-/healthz)" = 200 ] && kill -HUP "$DPID" && sleep 0.2 && kill -TERM "$DPID" && wait "$DPID" ||
    echo "$ns" >> "$TMP/notify-bad"
done
[ ! -f "$TMP/notify-bad" ]; check notify_socket_hostile_ignored $? "failed with: $(cat "$TMP/notify-bad" 2>/dev/null)"

# "*:PORT" takes systemd's dual-stack socket ("-l PORT" binds [::]:PORT for both).
systemd-socket-activate -l "$P" -- "$ABS_H2PARK" --listen "*:$P" --root "$TMP/www" --workers 1 \
  >"$TMP/daemon.log" 2>&1 &
DPID=$!; PIDS="$PIDS $DPID"
sleep 0.3
v4=$(code "$P" /-/healthz)
v6=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://[::1]:$P/-/healthz")
[ "$v4" = 200 ] && [ "$v6" = 200 ] && grep -q 'a socket from systemd' "$TMP/daemon.log"
check activation_dual_stack $? "IPv4 $v4, IPv6 $v6: $(cat "$TMP/daemon.log")"
kill -TERM "$DPID"; wait "$DPID"

# A listen line without a socket is bound by h2park itself; a socket without a listen
# line is a mistake in the unit or the configuration.
Q=$(free_port)
systemd-socket-activate -l "127.0.0.1:$P" -- "$ABS_H2PARK" --listen "127.0.0.1:$P" --listen "127.0.0.1:$Q" \
  --root "$TMP/www" --workers 1 >"$TMP/daemon.log" 2>&1 &
DPID=$!; PIDS="$PIDS $DPID"
sleep 0.3
[ "$(code "$P" /-/healthz)" = 200 ] && [ "$(code "$Q" /-/healthz)" = 200 ] &&
  grep -q "listening on 127.0.0.1:$Q (HTTP/1.1 and h2c)$" "$TMP/daemon.log"
check activation_mixed_with_own_sockets $? "$(cat "$TMP/daemon.log")"
kill -TERM "$DPID"; wait "$DPID"
systemd-socket-activate -l "127.0.0.1:$P" -- "$ABS_H2PARK" --listen "127.0.0.1:$Q" --root "$TMP/www" \
  >"$TMP/daemon.log" 2>&1 &
DPID=$!; PIDS="$PIDS $DPID"
sleep 0.3
curl -s -m 2 -o /dev/null "http://127.0.0.1:$P/" 2>/dev/null
wait "$DPID"; rc=$?
[ $rc = 2 ] && grep -q "socket activation: socket 3 (127.0.0.1:$P) matches no listen line" "$TMP/daemon.log"
check activation_unmatched_socket_exit_2 $? "exit $rc: $(cat "$TMP/daemon.log")"

hostile() { # hostile NAME WANT LISTEN_FDS [bash redirections for fd 3]
  local name=$1 want=$2 fds=$3 redirect=${4:-}
  timeout 10 bash -c "$redirect LISTEN_PID=\$\$ LISTEN_FDS='$fds' exec '$ABS_H2PARK' --listen 127.0.0.1:$Q --root '$TMP/www'" \
    >"$TMP/err.out" 2>&1; local rc=$?
  [ $rc = 2 ] && grep -qF "$want" "$TMP/err.out"
  check "$name" $? "exit $rc: $(head -2 "$TMP/err.out")"
}
hostile listen_fds_not_a_number "LISTEN_FDS='3x' is not a count" 3x
hostile listen_fds_negative "LISTEN_FDS='-1' is not a count" -1
hostile listen_fds_huge "LISTEN_FDS='99999999999999999999' is not a count" 99999999999999999999
hostile listen_fds_a_file "descriptor 3 is not a listening TCP socket" 1 "exec 3</etc/hostname;"
hostile listen_fds_closed "descriptor 3 is not a listening TCP socket" 1 "exec 3<&-;"
hostile listen_fds_udp "descriptor 3 is not a listening TCP socket" 1 \
  "exec 3< <(sleep 5); exec 3<&-; exec 3<>/dev/udp/127.0.0.1/9;"
# For another process: ignored, as sd_listen_fds does; h2park binds its own.
# Started directly, not under timeout(1): its own alarm's second TERM could land in the
# sanitizer build's exit-time leak check and stall it.
LISTEN_PID=1 LISTEN_FDS=1 "$ABS_H2PARK" --listen 127.0.0.1:$Q --root "$TMP/www" --workers 1 \
  >"$TMP/daemon.log" 2>&1 &
DPID=$!; PIDS="$PIDS $DPID"
sleep 0.4
[ "$(code "$Q" /-/healthz)" = 200 ]; check listen_pid_of_another_ignored $? "$(cat "$TMP/daemon.log")"
kill -TERM "$DPID"; wait "$DPID"

# Restarts under a held socket: systemd-socket-activate holds it and runs a loop that
# starts h2park again each time it exits (as systemd does with the socket unit), with
# LISTEN_PID set to each new process.  h2load opens a connection per request, 60 every
# 100 ms, while h2park is stopped eight times; none of its requests may fail.  Each stop
# waits until the daemon before it has started (on a loaded machine a start can take longer
# than the 0.2 s between stops, and a second TERM to the one still stopping stopped nothing).
cat > "$TMP/loop.sh" <<EOF
#!/bin/bash
while [ ! -e "$TMP/stop" ]; do
  (echo \$BASHPID > "$TMP/pid"; LISTEN_PID=\$BASHPID exec "$ABS_H2PARK" --listen "127.0.0.1:$P" --root "$TMP/www" \
    --workers 2 >>"$TMP/daemon.log" 2>&1)
done
EOF
chmod +x "$TMP/loop.sh"
: > "$TMP/daemon.log"
systemd-socket-activate -l "127.0.0.1:$P" "$TMP/loop.sh" >"$TMP/holder.log" 2>&1 &
HOLDER=$!; PIDS="$PIDS $HOLDER"
sleep 0.3
[ "$(code "$P" /-/healthz)" = 200 ] || echo "# the first daemon did not answer: $(cat "$TMP/daemon.log")"
timeout 60 h2load -c 1200 -n 1200 -r 60 --rate-period 100ms "http://127.0.0.1:$P/index.html" > "$TMP/load.out" 2>&1 &
LOAD=$!; PIDS="$PIDS $LOAD"
served=""
for i in 1 2 3 4 5 6 7 8; do
  sleep 0.2
  for _ in $(seq 100); do
    [ "$(grep -c 'a socket from systemd' "$TMP/daemon.log")" -ge "$i" ] && break
    sleep 0.1
  done
  pid=$(cat "$TMP/pid"); served="$served $pid"
  kill -TERM "$pid"
done
wait "$LOAD"
for _ in $(seq 100); do
  [ "$(grep -c 'a socket from systemd' "$TMP/daemon.log")" -ge 9 ] && break
  sleep 0.1
done
touch "$TMP/stop"; kill -TERM "$(cat "$TMP/pid")" 2>/dev/null
starts=$(grep -c 'a socket from systemd' "$TMP/daemon.log")
grep -q 'requests: 1200 total, 1200 started, 1200 done, 1200 succeeded, 0 failed' "$TMP/load.out" && [ "$starts" -ge 9 ]
check restart_under_held_socket_no_failed_request $? "$starts starts; $(grep -E 'requests:|status codes' "$TMP/load.out")"
echo "# restarts: 8 (pids$served), $(grep -o 'finished in [0-9.]*s, [0-9.]* req/s' "$TMP/load.out")"
kill "$HOLDER" 2>/dev/null || true     # (the loop ends by itself once told to stop)
