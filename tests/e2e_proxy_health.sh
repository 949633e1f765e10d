#!/bin/bash
# Active health checks (health_check in an upstream section) against nginx, whose health
# location answers 503 while a file exists (while its other locations still answer, so only
# an active check sees it), a port nothing listens on (health_check = tcp), a listener that
# never answers, and the fault server's broken answers (a status of two digits, half a head,
# an obs-fold, a head that comes too late).  Two workers: the checks are the process's,
# one probe per interval whatever the number of workers.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
for need in nginx curl; do
  command -v $need >/dev/null || { echo "ok proxy_health # SKIP $need not installed"; exit 0; }
done
HERE=$(cd "$(dirname "$0")" && pwd)
A=$(free_port); B=$(free_port); DEAD=$(free_port); FT=$(free_port); HOLD=$(free_port)
start_nginx <<EOF
  server { listen 127.0.0.1:$A;
    location = /healthz { access_log $TMP/nginx/checks-a.log; if (-f $TMP/down-a) { return 503; } return 200 "ok\n"; }
    location / { return 200 "A\n"; } }
  server { listen 127.0.0.1:$B;
    location = /healthz { return 200 "ok\n"; }
    location / { return 200 "B\n"; } }
EOF
trap 'kill -TERM $NGPID 2>/dev/null; wait $NGPID 2>/dev/null; cleanup' EXIT
$PY "$HERE/upstream_faults.py" "$FT" & PIDS="$PIDS $!"
hold_port "$HOLD" || { fail proxy_health_hold_port "nothing listens on $HOLD"; exit 1; }
for i in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$A/" && curl -s -o /dev/null "http://127.0.0.1:$FT/ok" && break
  sleep 0.1
done

P=$(free_port)
conf() { # the configuration, with the pair's health_check line as $1
  cat <<EOF2
listen = 127.0.0.1:$P
workers = 2
root = $TMP/www
access_log = $TMP/access.log
access_log_format = json
upstream pair {
    server = 127.0.0.1:$A
    server = 127.0.0.1:$B
    $1
}
upstream single {
    server = 127.0.0.1:$A
    health_check = /healthz interval=0.3s
}
upstream tcpcheck {
    server = 127.0.0.1:$DEAD
    server = 127.0.0.1:$B
    health_check = tcp interval=0.3s
}
upstream silent {
    server = 127.0.0.1:$HOLD
    server = 127.0.0.1:$B
    health_check = /healthz interval=0.3s timeout=0.3s
}
location /pair/ {
    proxy_pass = http://pair/
}
location /single/ {
    proxy_pass = http://single/
}
location /tcp/ {
    proxy_pass = http://tcpcheck/
}
location /silent/ {
    proxy_pass = http://silent/
}
EOF2
  for f in status-20 half fold slow-head; do
    printf 'upstream f-%s {\n    server = 127.0.0.1:%s\n    health_check = /%s interval=0.3s timeout=0.5s\n}\n' "$f" "$FT" \
      "$f$([ $f = slow-head ] && echo '?s=3')"
  done
}
conf "health_check = /healthz interval=0.3s fails=2 passes=2" > "$TMP/health.conf"
PORT=$P; start_config "$TMP/health.conf" "$P" || { fail proxy_health_daemon_starts "$(grep -v info "$TMP/daemon.log" | head -2)"; exit 1; }
answers() { for i in $(seq 1 20); do curl -s -m 5 "http://127.0.0.1:$P$1"; done | sort | uniq -c | awk '{ printf "%s%s", $2, $1 == 20 ? "" : "+" }'; }
metric() { curl -s "http://127.0.0.1:$P/metrics" | sed -n "s/^$1 //p"; }
sleep 1

# ---- a server whose health location fails is left out, and comes back ----
r=$(answers /pair/x)
[ "$r" = "A+B+" ]; check both_up_while_checks_pass $? "$r"
touch "$TMP/down-a"
sleep 1.2
r=$(answers /pair/x)
[ "$r" = B ]; check failing_check_leaves_server_out $? "$r"
grep -q "upstream 127.0.0.1:$A: health check failed 2 times (status 503): left out" "$TMP/daemon.log"
check failing_check_logged_with_cause $? "$(grep 'health check' "$TMP/daemon.log" | tail -2)"
up=$(metric "h2park_upstream_up{upstream=\"pair\",server=\"127.0.0.1:$A\"}")
fails=$(metric "h2park_upstream_health_checks_total{upstream=\"pair\",server=\"127.0.0.1:$A\",result=\"fail\"}")
[ "$up" = 0 ] && [ "${fails:-0}" -ge 2 ]; check failing_check_in_metrics $? "up $up, $fails failed checks"
c=$(code "$P" /single/x)
[ "$c" = 502 ] && grep -q '"target":"/single/x".*"upstream_error":"no live upstreams"' "$TMP/access.log"
check single_server_left_out_502_no_live_upstreams $? "$c"
rm -f "$TMP/down-a"
sleep 1.2
r=$(answers /pair/x)
[ "$r" = "A+B+" ]; check passing_checks_bring_it_back $? "$r"
grep -q "upstream 127.0.0.1:$A: health check passed 2 times: back in" "$TMP/daemon.log"
check back_in_logged $? "$(grep 'health check' "$TMP/daemon.log" | tail -2)"
[ "$(code "$P" /single/x)" = 200 ]; check single_server_back $? ""

# ---- one probe per interval for the process, not one per worker ----
n0=$(wc -l < "$TMP/nginx/checks-a.log"); sleep 3; n1=$(wc -l < "$TMP/nginx/checks-a.log")
# Two groups check A every 0.3 s: 20 probes in 3 s (40 if each of the two workers probed).
[ $((n1 - n0)) -ge 14 ] && [ $((n1 - n0)) -le 26 ]; check one_probe_per_interval_for_the_process $? "$((n1 - n0)) probes of A in 3 s"

# ---- tcp, silence and broken answers ----
r=$(answers /tcp/x); cf=$(metric "h2park_upstream_failures_total{upstream=\"tcpcheck\",server=\"127.0.0.1:$DEAD\",cause=\"connect\"}")
[ "$r" = B ] && [ "${cf:-1}" = 0 ]; check tcp_check_keeps_requests_off_a_dead_server $? "$r, $cf connect failures of requests"
grep -q "upstream 127.0.0.1:$DEAD: health check failed 1 time (connect: Connection refused): left out" "$TMP/daemon.log"
check tcp_check_cause_logged $? "$(grep "$DEAD" "$TMP/daemon.log" | tail -1)"
r=$(answers /silent/x)
[ "$r" = B ] && grep -q "upstream 127.0.0.1:$HOLD: health check failed 1 time (no response in time): left out" "$TMP/daemon.log"
check silent_server_left_out_by_timeout $? "$r; $(grep "$HOLD" "$TMP/daemon.log" | tail -1)"
for f in "status-20:invalid response: upstream sent an invalid status code" "half:the server closed without a response" "fold:invalid response" "slow-head:no response in time"; do
  grep -q "upstream 127.0.0.1:$FT: health check failed 1 time (${f#*:}" "$TMP/daemon.log" &&
    [ "$(metric "h2park_upstream_up{upstream=\"f-${f%%:*}\",server=\"127.0.0.1:$FT\"}")" = 0 ]
  check "broken_answer_${f%%:*}_fails_the_check" $? "$(grep "$FT" "$TMP/daemon.log" | tr "\n" " ")"
done
kill -0 "$DPID"; check daemon_alive_after_broken_answers $? ""

# ---- a reload that takes the check away leaves the server to passive health ----
touch "$TMP/down-a"; sleep 1.2
[ "$(answers /pair/x)" = B ] || fail reload_precondition "A not left out"
conf "" > "$TMP/health.conf"
reload_and_wait
r=$(answers /pair/x)
[ "$r" = "A+B+" ]; check reload_without_check_brings_server_back $? "$r"
conf "health_check = /healthz interval=0.3s" > "$TMP/health.conf"
reload_and_wait; sleep 1
r=$(answers /pair/x)
[ "$r" = B ]; check reload_with_check_again $? "$r"
stop_daemon

# ---- configuration errors name file and line, exit 2 ----
bad() { printf 'listen = 127.0.0.1:%s\nupstream u {\n  server = 127.0.0.1:1\n  health_check = %s\n}\n%b' "$(free_port)" "$1" "${2:-}" > "$TMP/bad.conf"; }
bad "/x interval=fast"; config_error config_health_check_bad_interval "bad.conf:4: health_check: bad value 'fast' for interval" -c "$TMP/bad.conf" --check
bad "/x every=1s"; config_error config_health_check_unknown_option "bad.conf:4: health_check: unknown option 'every'" -c "$TMP/bad.conf" --check
bad "healthz"; config_error config_health_check_needs_path_or_tcp "bad.conf:4: health_check: expected PATH or tcp" -c "$TMP/bad.conf" --check
bad "/x fails=0"; config_error config_health_check_zero_fails "bad.conf:4: health_check: bad value '0' for fails" -c "$TMP/bad.conf" --check
bad "/x" 'location /g/ {\n  proxy_pass = h2c://u\n}\n'
config_error config_health_check_path_over_h2c "bad.conf:7: upstream u is passed to over h2c:// here, but its health_check at $TMP/bad.conf:4 asks for a path over HTTP/1.1" -c "$TMP/bad.conf" --check
