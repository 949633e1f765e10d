#!/bin/bash
# TLS handshakes under a storm and returning clients: thousands of ClientHellos at once
# (tests/tls_storm.py: every one answered, because a handshake's deadline counts from
# when the worker takes it up, and a connection made before the storm answers during
# it), a storm of real clients (h2load) all served with the defaults; session tickets
# (tests/tls_resume.py, Python's ssl): TLS 1.3 and 1.2 clients resume, never with another
# site's name, not with tickets off, across a reload, across two daemons sharing a key
# file, through a key rotation; key files that are missing, short, long or doubled are
# configuration errors, and a reload with one keeps the old configuration.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
make_site
ulimit -n 20000 2>/dev/null
D=$TMP/tls
mkdir -p "$D"
for n in a b; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$D/$n.key" -out "$D/$n.pem" -days 2 \
    -subj "/CN=$n.test" -addext "subjectAltName=DNS:$n.test" >/dev/null 2>&1
done
openssl rand 80 > "$D/key1"; openssl rand 80 > "$D/key2"; openssl rand 48 > "$D/key48"
head -c 79 "$D/key1" > "$D/short"; cat "$D/key1" "$D/key2" > "$D/long"; cp "$D/key1" "$D/key1copy"

# conf FILE PORT TLSPORT LINES...: a configuration with sites a.test and b.test on TLSPORT.
conf() {
  local f=$1 p=$2 t=$3; shift 3
  printf '%s\n' "listen = 127.0.0.1:$p" "listen = 127.0.0.1:$t tls" "root = $TMP/www" "workers = 1" "$@" \
    "site a.test {" "cert = $D/a.pem" "key = $D/a.key" "}" "site b.test {" "cert = $D/b.pem" "key = $D/b.key" "}" > "$f"
}
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

# ---- a storm ----
P=$(free_port); T=$(free_port)
conf "$D/storm.conf" "$P" "$T" "handshake_timeout = 1s"
start_config "$D/storm.conf" "$P" || exit 1
out=$(timeout 120 $PY "$(dirname "$0")/tls_storm.py" "$T" 3000 60)
echo "# storm of 3000 ClientHellos, handshake_timeout 1s: $out"
case $out in *"flights=3000 "*) r=0 ;; *) r=1 ;; esac
check storm_every_clienthello_answered $r "$out (a deadline counted while the handshake waited for the worker)"
case $out in *"healthz=200 "*) r=0 ;; *) r=1 ;; esac
check storm_established_connection_answers $r "$out"
# Each storm connection ends timed out (no Finished came) or failed (the client closed it).
ended() { echo $(( $(metric "$P" 'h2park_tls_handshakes_total{result="timed_out"}') + \
                   $(metric "$P" 'h2park_tls_handshakes_total{result="failed"}') )); }
for i in $(seq 1 50); do [ "$(ended)" = 3000 ] && break; sleep 0.2; done
e=$(ended); waiting=$(metric "$P" h2park_tls_handshakes_waiting); conns=$(metric "$P" h2park_connections)
[ "$e" = 3000 ] && [ "$waiting" = 0 ] && [ "$conns" = 1 ]
check storm_handshakes_end_and_nothing_waits $? "timed out or failed: $e, waiting $waiting, connections $conns"
stop_daemon

P=$(free_port); T=$(free_port)
conf "$D/storm2.conf" "$P" "$T"
start_config "$D/storm2.conf" "$P" || exit 1
out=$(timeout 180 h2load -c 2000 -n 2000 -t 1 "https://127.0.0.1:$T/index.html" 2>&1 | grep -E '^requests:')
echo "# h2load -c 2000 over TLS, the defaults: $out"
case $out in *"2000 succeeded"*) r=0 ;; *) r=1 ;; esac
check storm_of_real_clients_all_served $r "$out"
full=$(metric "$P" 'h2park_tls_handshakes_total{result="full"}')
[ "$full" -ge 2000 ]; check storm_handshakes_counted $? "full=$full"
stop_daemon

# ---- resumption ----
resume() { timeout 60 $PY "$(dirname "$0")/tls_resume.py" "$@" | tr '\n' ' '; }
P=$(free_port); T=$(free_port)
conf "$D/r.conf" "$P" "$T"
start_config "$D/r.conf" "$P" || exit 1
for v in 1.3 1.2; do
  out=$(resume $v "$T:a.test" "$T:a.test" "$T:A.Test")
  [ "$out" = "reused=False status=200 reused=True status=200 reused=True status=200 " ]
  check "resumed_tls$v" $? "$out"
  out=$(resume $v "$T:a.test" "$T:b.test" "$T:a.test")
  [ "$out" = "reused=False status=200 reused=False status=200 reused=True status=200 " ]
  check "another_sites_name_never_resumes_tls$v" $? "$out (a session of a.test offered for b.test)"
done
# Server names the early site choice reads from the raw ClientHello: too long, odd, a
# number: the listener's default site or a refusal, and the daemon lives on.
for name in "$(printf 'a%.0s' $(seq 1 300))" "a..b" "-x-" "127.0.0.1" "A.TEST."; do
  echo | timeout 10 openssl s_client -connect "127.0.0.1:$T" -servername "$name" >/dev/null 2>&1
done
[ "$(curl -sk -o /dev/null -w '%{http_code}' --resolve "a.test:$T:127.0.0.1" "https://a.test:$T/")" = 200 ]
check odd_server_names_survived $? "$(tail -3 "$TMP/daemon.log")"
res=$(metric "$P" 'h2park_tls_handshakes_total{result="resumed"}')
[ "$res" = 6 ]; check resumed_counted $? "resumed=$res"
sleep 1.2   # a dashboard sample, once a second
d=$(curl -s "http://127.0.0.1:$P/-/dashboard/data")
$PY -c 'import json, sys; d = json.loads(sys.argv[1]); n = len(d["seconds"]); assert n >= 1 and all(len(d[k]) == n for k in ("handshakes_full_total", "handshakes_resumed_total", "handshakes_waiting")); assert d["handshakes_resumed_total"][-1] == 6 and d["handshakes_full_total"][-1] >= 6, (d["handshakes_full_total"], d["handshakes_resumed_total"])' "$d"
check dashboard_handshakes_data $? "$(grep -oE '"handshakes_[a-z_]*":\[[^]]*' <<< "$d" | cut -c1-60 | tr '\n' ' ')"
# Across a reload: the process's own keys stay.
coproc RES { timeout 60 $PY "$(dirname "$0")/tls_resume.py" 1.3 "$T:a.test" wait "$T:a.test"; }
read -r first <&"${RES[0]}"; read -r w <&"${RES[0]}"
reload_and_wait
echo go >&"${RES[1]}"; read -r second <&"${RES[0]}"; wait "$RES_PID" 2>/dev/null
[ "$first $w $second" = "reused=False status=200 waiting reused=True status=200" ]
check resumed_across_reload $? "$first / $w / $second"
stop_daemon

P=$(free_port); T=$(free_port)
conf "$D/off.conf" "$P" "$T" "ssl_session_tickets = off"
start_config "$D/off.conf" "$P" || exit 1
out=$(resume 1.3 "$T:a.test" "$T:a.test"; resume 1.2 "$T:a.test" "$T:a.test")
[ "$out" = "reused=False status=200 reused=False status=200 reused=False status=200 reused=False status=200 " ]
check tickets_off_never_resume $? "$out"
stop_daemon

# ---- key files: a fleet, and a rotation ----
P=$(free_port); T=$(free_port); P2=$(free_port); T2=$(free_port)
conf "$D/k1.conf" "$P" "$T" "ssl_session_ticket_key = $D/key1"
conf "$D/k2.conf" "$P2" "$T2" "ssl_session_ticket_key = key1copy"   # relative: from the file's directory
conf "$D/k3.conf" "$P2" "$T2" "ssl_session_ticket_key = $D/key2"
start_config "$D/k1.conf" "$P" || exit 1
A=$DPID
start_config "$D/k2.conf" "$P2" || exit 1
out=$(resume 1.3 "$T:a.test" "$T2:a.test"; resume 1.2 "$T:a.test" "$T2:a.test")
[ "$out" = "reused=False status=200 reused=True status=200 reused=False status=200 reused=True status=200 " ]
check shared_key_file_resumes_on_another_daemon $? "$out"
kill "$DPID"; wait "$DPID" 2>/dev/null
start_config "$D/k3.conf" "$P2" || exit 1
out=$(resume 1.3 "$T:a.test" "$T2:a.test")
[ "$out" = "reused=False status=200 reused=False status=200 " ]
check another_key_never_resumes $? "$out"
kill "$DPID"; wait "$DPID" 2>/dev/null
DPID=$A
# Rotation on daemon A: key2 first (new tickets), key1 second (old tickets still open).
coproc RES { timeout 60 $PY "$(dirname "$0")/tls_resume.py" 1.3 "$T:a.test" wait "$T:a.test" wait "$T:a.test"; }
read -r first <&"${RES[0]}"; read -r w <&"${RES[0]}"
conf "$D/k1.conf" "$P" "$T" "ssl_session_ticket_key = $D/key2" "ssl_session_ticket_key = $D/key1"
reload_and_wait
echo go >&"${RES[1]}"; read -r second <&"${RES[0]}"; read -r w <&"${RES[0]}"
conf "$D/k1.conf" "$P" "$T" "ssl_session_ticket_key = $D/key2"
reload_and_wait
echo go >&"${RES[1]}"; read -r third <&"${RES[0]}"; wait "$RES_PID" 2>/dev/null
[ "$first|$second|$third" = "reused=False status=200|reused=True status=200|reused=False status=200" ]
check rotation_old_key_second_then_gone $? "$first|$second|$third"
# A reload with a bad key file keeps what runs.
conf "$D/k1.conf" "$P" "$T" "ssl_session_ticket_key = $D/short"
reload_and_wait
grep -q "reload failed" "$TMP/daemon.log" && [ "$(code "$P" /index.html)" = 200 ]
check bad_key_file_reload_keeps_running $? "$(tail -3 "$TMP/daemon.log")"
stop_daemon

# ---- configuration errors ----
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_ticket_key = $D/short"
config_error key_file_short "e.conf:5: ssl_session_ticket_key $D/short: 79 bytes" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_ticket_key = $D/long"
config_error key_file_long "81 bytes or more" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_ticket_key = $D/nothere"
config_error key_file_missing "e.conf:5: ssl_session_ticket_key $D/nothere: No such file or directory" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_ticket_key = $D" 
config_error key_file_directory "not a regular file" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_ticket_key = $D/key1" "ssl_session_ticket_key = $D/key1copy"
config_error key_file_same_name "the same key name as $D/key1 ($D/e.conf:5)" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_timeout = 8d"
config_error session_timeout_bad "ssl_session_timeout: '8d' is not a duration from 1s to 7 days" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_timeout = 0s"
config_error session_timeout_zero "ssl_session_timeout: '0s'" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "ssl_session_ticket_key = $D/key48" "ssl_session_timeout = 169h"
config_error session_timeout_over_7_days "'169h' is not a duration" -c "$D/e.conf" --check
conf "$D/e.conf" "$(free_port)" "$(free_port)" "handshake_timeout = soon"
config_error handshake_timeout_bad "handshake_timeout: 'soon' is not a duration" -c "$D/e.conf" --check
# A 48-byte key (AES-128) works.
P=$(free_port); T=$(free_port)
conf "$D/k48.conf" "$P" "$T" "ssl_session_ticket_key = $D/key48"
start_config "$D/k48.conf" "$P" || exit 1
out=$(resume 1.3 "$T:a.test" "$T:a.test")
[ "$out" = "reused=False status=200 reused=True status=200 " ]
check key_file_of_48_bytes_resumes $? "$out"
stop_daemon
