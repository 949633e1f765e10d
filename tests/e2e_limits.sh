#!/bin/bash
# Per-client limits with real clients, each from loopback addresses of its own
# (127.0.0.x, ::1): max_conns_per_client refusing at accept before a TLS handshake
# (openssl s_client sees no ServerHello), over IPv6, behind haproxy's PROXY v2 header and,
# counted by request, behind nginx's X-Forwarded-For; counts that survive a reload;
# limit_req's burst over HTTP/1.1 one by one and pipelined and over h2c with 100 streams
# at once, a held request parked while it waits, key=host, Retry-After, refused_by and the
# per-rule metrics; and a spray of 100,000 IPv6 /64s (by X-Forwarded-For) and 3,000
# 127.x addresses against a 64 KiB table, which stays at its size and evicts.  Figures
# (times, RSS) are printed, never judged.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$TMP/www/r" "$TMP/www/slow" "$TMP/www/h" "$TMP/www/p"
for d in r slow h p; do printf 'x\n' > "$TMP/www/$d/x"; done

# hold.py HOST PORT N SOURCE tls|plain SECONDS: N connections from SOURCE, TLS ones through
# their handshake; prints "open=N closed=N" once each is known, then holds them.
cat > "$TMP/hold.py" <<'EOF'
import socket, ssl, sys, time
host, port, n, src, mode, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], float(sys.argv[6])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
held, opened, closed = [], 0, 0
for i in range(n):
    s = socket.create_connection((host, port), timeout=3, source_address=(src, 0))
    try:
        if mode == "tls":
            s = ctx.wrap_socket(s, server_hostname="localhost")
            opened += 1
        else:
            s.settimeout(0.3)
            try:
                closed += s.recv(1) == b""
                continue
            except socket.timeout:
                opened += 1
        held.append(s)
    except (ssl.SSLError, ConnectionError, OSError):
        closed += 1
print("open=%d closed=%d" % (opened, closed), flush=True)
time.sleep(secs)
EOF
# burst.py HOST PORT SOURCE PATH N h2|pipeline: N requests at once - N streams on one h2c
# connection, or N pipelined HTTP/1.1 requests in one write - and the statuses by count.
cat > "$TMP/burst.py" <<'EOF'
import collections, re, socket, sys
host, port, src, path, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
s = socket.create_connection((host, port), timeout=10, source_address=(src, 0))
got = collections.Counter()
if mode == "pipeline":
    reqs = "".join("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (path, "Connection: close\r\n" if i == n - 1 else "") for i in range(n))
    s.sendall(reqs.encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    for status in re.findall(rb"HTTP/1\.1 (\d\d\d) ", data):
        got[int(status)] += 1
else:
    import h2.connection, h2.config, h2.events
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.initiate_connection()
    c.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
    for i in range(n):
        c.send_headers(1 + 2 * i, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "t")], end_stream=True)
    s.sendall(c.data_to_send())
    done = 0
    while done < n:
        b = s.recv(65536)
        if not b:
            break
        for e in c.receive_data(b):
            if isinstance(e, h2.events.ResponseReceived):
                got[int(dict(e.headers)[":status"])] += 1
            elif isinstance(e, h2.events.DataReceived):
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                done += 1
        s.sendall(c.data_to_send())
print(" ".join("%d:%d" % kv for kv in sorted(got.items())))
EOF
metric() { curl -s "http://127.0.0.1:$1/metrics" | grep -F "$2" | awk '{print $2}' | head -1; }

# ---- connections per client ----
P=$(free_port); T=$(free_port)
conf_conns() {
  printf '%s\n' "listen = 127.0.0.1:$P" "listen = 127.0.0.1:$T tls" "listen = [::1]:$P" "cert = $TMP/cert.pem" \
    "key = $TMP/key.pem" "root = $TMP/www" "workers = 2" "max_conns_per_client = $1"
}
conf_conns 3 > "$TMP/conns.conf"
start_config "$TMP/conns.conf" "$P" || exit 1
"$PY" "$TMP/hold.py" 127.0.0.1 "$T" 5 127.0.0.2 tls 30 > "$TMP/hold1.out" & HOLD1=$!; PIDS="$PIDS $HOLD1"
for i in $(seq 1 50); do [ -s "$TMP/hold1.out" ] && break; sleep 0.1; done
grep -qx 'open=3 closed=2' "$TMP/hold1.out"
check conns_per_client_refused_beyond_n $? "$(cat "$TMP/hold1.out")"
# The fourth from that client: closed before any ServerHello (nothing read, no certificate).
timeout 10 openssl s_client -connect "127.0.0.1:$T" -bind 127.0.0.2:0 -servername localhost < /dev/null > "$TMP/sclient.out" 2>&1
grep -q 'SSL handshake has read 0 bytes' "$TMP/sclient.out" && ! grep -q 'Server certificate' "$TMP/sclient.out"
check conns_refused_before_server_hello $? "$(grep -E 'handshake has read|certificate|errno' "$TMP/sclient.out" | head -3)"
timeout 10 openssl s_client -connect "127.0.0.1:$T" -bind 127.0.0.3:0 -servername localhost < /dev/null > "$TMP/sclient3.out" 2>&1
grep -q 'Server certificate' "$TMP/sclient3.out"
check conns_other_client_handshakes $? "$(grep -E 'handshake has read|errno' "$TMP/sclient3.out" | head -3)"
"$PY" "$TMP/hold.py" 127.0.0.1 "$P" 4 127.0.0.2 plain 0 > "$TMP/hold2.out"
grep -qx 'open=0 closed=4' "$TMP/hold2.out"
check conns_counted_across_listeners $? "cleartext from the same client: $(cat "$TMP/hold2.out")"
refused=$(metric "$P" 'h2park_limit_conns_refused_total{reason="over_limit",at="accept"}')
logged=$(grep -c '127.0.0.2:.*refused on .*max_conns_per_client (3)' "$TMP/daemon.log")
[ "${refused:-0}" -ge 7 ] && [ "$logged" = 1 ]
check conns_refused_counted_logged_once $? "refused $refused, log lines $logged"
"$PY" "$TMP/hold.py" ::1 "$P" 4 ::1 plain 30 > "$TMP/hold6.out" & HOLD6=$!; PIDS="$PIDS $HOLD6"
for i in $(seq 1 50); do [ -s "$TMP/hold6.out" ] && break; sleep 0.1; done
grep -qx 'open=3 closed=1' "$TMP/hold6.out"
check conns_per_client_ipv6 $? "$(cat "$TMP/hold6.out")"
# A reload keeps the counts: the limit raised to 4 lets one more in; closing them all
# releases every count in the new configuration's table.
conf_conns 4 > "$TMP/conns.conf"
reload_and_wait
"$PY" "$TMP/hold.py" 127.0.0.1 "$P" 2 127.0.0.2 plain 0 > "$TMP/hold3.out"
grep -qx 'open=1 closed=1' "$TMP/hold3.out"
check conns_counted_across_reload $? "$(cat "$TMP/hold3.out")"
kill "$HOLD1" "$HOLD6"; wait "$HOLD1" "$HOLD6" 2>/dev/null
sleep 0.5
"$PY" "$TMP/hold.py" 127.0.0.1 "$T" 5 127.0.0.2 tls 0 > "$TMP/hold4.out"
grep -qx 'open=4 closed=1' "$TMP/hold4.out"
check conns_released_after_reload $? "$(cat "$TMP/hold4.out")"
stop_daemon

# ---- behind haproxy: the PROXY v2 header's client ----
if command -v haproxy > /dev/null; then
  PP=$(free_port); HP=$(free_port)
  printf '%s\n' "listen = 127.0.0.1:$PP proxy_protocol" "root = $TMP/www" "workers = 2" "max_conns_per_client = 2" \
    "preface_timeout = 20s" > "$TMP/pp.conf"
  "$H2PARK" -c "$TMP/pp.conf" > "$TMP/pp.log" 2>&1 & PPD=$!; PIDS="$PIDS $PPD"
  for i in $(seq 1 50); do grep -q 'h2park .*workers' "$TMP/pp.log" && break; sleep 0.1; done
  printf 'global\n  log stderr format short local0 info\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\nfrontend f\n  bind 127.0.0.1:%s\n  default_backend b\nbackend b\n  server h 127.0.0.1:%s send-proxy-v2\n' \
    "$HP" "$PP" > "$TMP/haproxy.cfg"
  haproxy -f "$TMP/haproxy.cfg" > "$TMP/haproxy.log" 2>&1 & HPPID=$!; PIDS="$PIDS $HPPID"
  sleep 1
  "$PY" "$TMP/hold.py" 127.0.0.1 "$HP" 4 127.0.0.2 plain 20 > "$TMP/hp1.out" & H1=$!; PIDS="$PIDS $H1"
  for i in $(seq 1 80); do [ -s "$TMP/hp1.out" ] && break; sleep 0.1; done
  "$PY" "$TMP/hold.py" 127.0.0.1 "$HP" 2 127.0.0.3 plain 0 > "$TMP/hp2.out"
  grep -qx 'open=2 closed=2' "$TMP/hp1.out" && grep -qx 'open=2 closed=0' "$TMP/hp2.out"
  check conns_per_client_by_proxy_v2_address $? "127.0.0.2: $(cat "$TMP/hp1.out"); 127.0.0.3: $(cat "$TMP/hp2.out"); $(grep refused "$TMP/pp.log" | head -2)"
  grep -q '127.0.0.2:[0-9]*: refused on' "$TMP/pp.log"
  check conns_proxy_v2_logged_by_client $? "$(grep refused "$TMP/pp.log" | head -2)"
  kill "$H1" "$HPPID" "$PPD"; wait "$H1" "$HPPID" "$PPD" 2>/dev/null
else
  echo "ok conns_per_client_by_proxy_v2_address # SKIP haproxy not installed"
fi

# ---- requests per client ----
P=$(free_port)
cat > "$TMP/req.conf" <<EOF
listen = 127.0.0.1:$P
root = $TMP/www
workers = 2
access_log = $TMP/req.access
access_log_format = json
real_ip_from = 127.0.0.1
max_conns_per_client = 3
limit_zone_size = 64k
location /r/ {
    limit_req = 1r/m burst=5 nodelay
}
location /p/ {
    limit_req = 1r/m burst=9 nodelay
}
location /slow/ {
    limit_req = 20r/m burst=5
}
location /h/ {
    limit_req = 1r/m burst=1 nodelay key=host
}
location /spray {
    limit_req = 100r/s burst=100 nodelay
    return = 200 "ok"
}
EOF
start_config "$TMP/req.conf" "$P" || exit 1
codes=""
for i in $(seq 1 10); do codes="$codes$(curl -s --interface 127.0.0.2 -o /dev/null -w '%{http_code} ' "http://127.0.0.1:$P/r/x")"; done
[ "$codes" = "200 200 200 200 200 200 429 429 429 429 " ]
check limit_req_burst_nodelay_h1 $? "$codes"
retry=$(curl -s --interface 127.0.0.2 -D - -o /dev/null "http://127.0.0.1:$P/r/x" | tr -d '\r' | sed -n 's/^retry-after: //p')
[ -n "$retry" ] && [ "$retry" -ge 55 ] && [ "$retry" -le 64 ]
check limit_req_retry_after $? "Retry-After: $retry (1r/m drains a request in 62.5 s: nginx keeps 1000/60 = 16 thousandths a second)"
codes=$(curl -s --interface 127.0.0.3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/r/x")
[ "$codes" = 200 ]
check limit_req_per_client $? "another client: $codes"
sleep 0.3
grep '"status":429' "$TMP/req.access" | head -1 | grep -q '"refused_by":"limit_req = 1r/m burst=5 nodelay (.*req.conf:10)"'
check limit_req_refused_by_logged $? "$(grep '"status":429' "$TMP/req.access" | head -1)"
n=$(metric "$P" 'h2park_limit_req_refused_total{rule="'"$TMP"'/req.conf:10"}')
[ "$n" = 5 ]
check limit_req_refused_counted_per_rule $? "refused: $n"
out=$("$PY" "$TMP/burst.py" 127.0.0.1 "$P" 127.0.0.4 /p/x 100 h2)
[ "$out" = "200:10 429:90" ]
check limit_req_h2_100_streams_at_once $? "$out"
out=$("$PY" "$TMP/burst.py" 127.0.0.1 "$P" 127.0.0.5 /p/x 100 pipeline)
[ "$out" = "200:10 429:90" ]
check limit_req_h1_100_pipelined $? "$out"
# key=host: one bucket for every client of a host.
a=$(curl -s --interface 127.0.0.6 -o /dev/null -w '%{http_code}' -H 'Host: one.example' "http://127.0.0.1:$P/h/x")
b=$(curl -s --interface 127.0.0.7 -o /dev/null -w '%{http_code}' -H 'Host: one.example' "http://127.0.0.1:$P/h/x")
c=$(curl -s --interface 127.0.0.8 -o /dev/null -w '%{http_code}' -H 'Host: ONE.example' "http://127.0.0.1:$P/h/x")
d=$(curl -s --interface 127.0.0.8 -o /dev/null -w '%{http_code}' -H 'Host: two.example' "http://127.0.0.1:$P/h/x")
[ "$a $b $c $d" = "200 200 429 200" ]
check limit_req_key_host $? "$a $b $c $d"
# Held requests wait parked: three at once at 20r/m are answered at once, after 3 s and 6 s.
start=$(date +%s.%N)
for i in 1 2 3; do
  curl -s --interface 127.0.0.9 -o /dev/null -w "%{http_code} %{time_total}\n" "http://127.0.0.1:$P/slow/x" >> "$TMP/slow.out" &
  PIDS="$PIDS $!"
done
sleep 2.5
parked=$(stat_from "$(curl -s "http://127.0.0.1:$P/-/stats")" parked_handlers)
for i in $(seq 1 100); do [ "$(wc -l < "$TMP/slow.out")" = 3 ] && break; sleep 0.1; done
delayed=$(metric "$P" 'h2park_limit_req_delayed_total{rule="'"$TMP"'/req.conf:16"}')
[ "$(grep -c '^200 ' "$TMP/slow.out")" = 3 ] && [ "${parked:-0}" -ge 2 ] && [ "$delayed" = 2 ]
check limit_req_delay_parks $? "parked at 2.5 s: $parked, delayed $delayed; $(tr '\n' ';' < "$TMP/slow.out")"
echo "# limit_req 20r/m: three at once answered after $(sort -n -k2 "$TMP/slow.out" | awk '{printf "%s s ", $2}')(0, 3 and 6 s due)"

# Behind nginx: each request is a connection of the client X-Forwarded-For names.
if command -v nginx > /dev/null; then
  N=$(free_port)
  start_nginx <<EOF
  server {
    listen 127.0.0.1:$N;
    location / {
      proxy_pass http://127.0.0.1:$P;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
EOF
  for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$N/" && break; sleep 0.1; done
  : > "$TMP/xff.out"
  for i in 1 2 3 4; do
    curl -s --interface 127.0.0.10 -o /dev/null -w "%{http_code}\n" "http://127.0.0.1:$N/-/delay?ms=1500" >> "$TMP/xff.out" &
    PIDS="$PIDS $!"
  done
  sleep 0.5
  other=$(for i in 1 2 3; do curl -s --interface 127.0.0.11 -o /dev/null -w "%{http_code} " "http://127.0.0.1:$N/-/healthz"; done)
  for i in $(seq 1 50); do [ "$(wc -l < "$TMP/xff.out")" = 4 ] && break; sleep 0.1; done
  sleep 0.3
  [ "$(sort "$TMP/xff.out" | tr '\n' ' ')" = "200 200 200 429 " ] && [ "$other" = "200 200 200 " ] &&
    grep '"status":429' "$TMP/req.access" | grep -q '"client":"127.0.0.10".*"refused_by":"max_conns_per_client = 3 (.*req.conf:7)"'
  check conns_per_client_by_x_forwarded_for $? "127.0.0.10: $(tr '\n' ' ' < "$TMP/xff.out"); 127.0.0.11: $other; $(grep '"status":429' "$TMP/req.access" | grep 127.0.0.10 | head -1)"
  n=$(metric "$P" 'h2park_limit_conns_refused_total{reason="over_limit",at="request"}')
  [ "$n" = 1 ]
  check conns_by_request_counted $? "$n"
  kill "$NGPID"; wait "$NGPID" 2>/dev/null
else
  echo "ok conns_per_client_by_x_forwarded_for # SKIP nginx not installed"
fi

# The dashboard: the clients the table tracks and what the limits refused, sampled once a
# second (worker 0), and drawn.  By now well over a hundred requests were refused.
sleep 2.2
d=$(curl -s "http://127.0.0.1:$P/-/dashboard/data")
"$PY" -c 'import json, sys; d = json.loads(sys.argv[1]); n = len(d["seconds"]); assert n >= 2 and all(len(d[k]) == n for k in ("clients_tracked", "limited_total", "auth_failed_total")), d.keys(); assert d["clients_tracked"][-1] >= 3 and d["limited_total"][-1] >= 100 and d["auth_failed_total"][-1] == 0, (d["clients_tracked"][-1], d["limited_total"][-1])' "$d"
check dashboard_limits_data $? "$(grep -oE '"(clients_tracked|limited_total)":\[[^]]*' <<< "$d" | cut -c1-40 | tr '\n' ' ')"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
  dom=$(timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=3000 --dump-dom "http://127.0.0.1:$P/-/dashboard" 2>/dev/null)
  grep -q 'id="chart-clients"' <<< "$dom" && grep -q 'id="chart-refused"' <<< "$dom" &&
    grep -qE '<polyline [^>]*data-series="clients_tracked"[^>]*points="[0-9]' <<< "$dom" &&
    grep -qE '<polyline [^>]*data-series="limited"[^>]*points="[0-9]' <<< "$dom"
  check dashboard_limits_drawn_in_chromium $? "$(grep -oE '<section id="chart-(clients|refused)".{0,200}' <<< "$dom" | head -2)"
else
  echo "ok dashboard_limits_drawn_in_chromium # SKIP chromium is not installed (apt-get install chromium)"
fi

# ---- a spray: 100,000 IPv6 /64s by X-Forwarded-For, then 3,000 addresses of 127/8 ----
cat > "$TMP/spray.py" <<'EOF'
import socket, sys, threading
port, total, conns = int(sys.argv[1]), int(sys.argv[2]), 4
ok = [0] * conns
def run(k):
    s = socket.create_connection(("127.0.0.1", port))
    n = total // conns
    def write():
        for chunk in range(0, n, 500):
            s.sendall("".join("GET /spray HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 2001:db8:%x:%x::1\r\n%s\r\n"
                              % (k, i, "Connection: close\r\n" if i == n - 1 else "") for i in range(chunk, min(n, chunk + 500))).encode())
    w = threading.Thread(target=write); w.start()
    data = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        data.append(b)
    ok[k] = b"".join(data).count(b"HTTP/1.1 200 ")
    w.join()
ts = [threading.Thread(target=run, args=(k,)) for k in range(conns)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sum(ok))
EOF
j=$(curl -s "http://127.0.0.1:$P/-/stats"); rss0=$(stat_from "$j" rss_bytes); ev0=$(stat_from "$j" client_table_evictions_total)
s0=$(date +%s.%N)
answered=$("$PY" "$TMP/spray.py" "$P" 100000)
s1=$(date +%s.%N)
j=$(curl -s "http://127.0.0.1:$P/-/stats")
rss1=$(stat_from "$j" rss_bytes); ent=$(stat_from "$j" client_table_entries); cap=$(stat_from "$j" client_table_capacity)
ev1=$(stat_from "$j" client_table_evictions_total)
growth=$(( (rss1 - rss0) / 1024 ))
echo "# spray: 100000 /64s in $(echo "$s1 - $s0" | bc) s, $answered answered 200; table $ent of $cap entries, $((ev1 - ev0)) evictions; RSS $((rss0 / 1024)) -> $((rss1 / 1024)) KiB ($growth KiB)"
bounded=0; [ "${SAN:-0}" = 1 ] || [ "$growth" -lt 32768 ] || bounded=1
[ "$answered" = 100000 ] && [ "$cap" = 2048 ] && [ "$ent" = "$cap" ] && [ $((ev1 - ev0)) -ge $((100000 - cap)) ] && [ $bounded = 0 ]
check spray_ipv6_table_bounded_evicts $? "$answered answered, $ent/$cap entries, $((ev1 - ev0)) evictions, RSS +$growth KiB"
"$PY" - "$P" > "$TMP/spray4.out" <<'EOF'
import socket, sys
port, ok = int(sys.argv[1]), 0
for i in range(3000):
    src = "127.%d.%d.%d" % (1 + i // 65000, (i // 250) % 250 + 1, i % 250 + 1)
    s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
    s.sendall(b"GET /-/healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    ok += data.startswith(b"HTTP/1.1 200")
    s.close()
print(ok)
EOF
j=$(curl -s "http://127.0.0.1:$P/-/stats"); ent=$(stat_from "$j" client_table_entries); ev2=$(stat_from "$j" client_table_evictions_total)
[ "$(cat "$TMP/spray4.out")" = 3000 ] && [ "$ent" = 2048 ] && [ $((ev2 - ev1)) -ge 3000 ]
check spray_ipv4_addresses_evicted $? "$(cat "$TMP/spray4.out") answered, $ent entries, $((ev2 - ev1)) evictions"
stop_daemon
