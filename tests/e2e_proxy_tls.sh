#!/bin/bash
# TLS upstreams (proxy_pass https://) against real TLS peers: nginx with a certificate of a
# test CA made here (two server blocks telling by SNI which one answered, and one that
# asks for a client certificate), and the fault server over Python's ssl for what nginx
# cannot be made to do (a close mid-response, bytes after a response).  Verification is on
# by default: a certificate of another CA, of another name, or checked against the
# system's CAs is refused (502, the cause in the error log); SNI is the name checked.
. "$(dirname "$0")/lib.sh"
make_site
PY=/usr/bin/python3
for need in nginx curl openssl; do
  command -v $need >/dev/null || { echo "ok proxy_tls # SKIP $need not installed"; exit 0; }
done
HERE=$(cd "$(dirname "$0")" && pwd)
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www"
head -c $((3 << 20)) /dev/urandom > "$TMP/www/three.bin"; chmod a+r "$TMP/www/three.bin"

# ---- a test CA, another CA, and certificates of the first ----
make_ca testca; make_ca otherca
make_leaf app "DNS:app.test,IP:127.0.0.1" serverAuth
make_leaf other "DNS:other.test" serverAuth
make_leaf h2park-client "DNS:client.test" clientAuth
chmod a+r "$TMP"/*.key "$TMP"/*.pem

NGS=$(free_port); NGM=$(free_port); FT=$(free_port); NG12=$(free_port); NG13=$(free_port)
start_nginx <<EOF
  keepalive_requests 100000;
  server { listen 127.0.0.1:$NGS ssl default_server; server_name app.test; root $TMP/www;
    ssl_certificate $TMP/app.pem; ssl_certificate_key $TMP/app.key;
    location = /who { return 200 "app sni=\$ssl_server_name\n"; }
    location = /conn { return 200 "\$connection\n"; } }
  server { listen 127.0.0.1:$NGS ssl; server_name other.test;
    ssl_certificate $TMP/other.pem; ssl_certificate_key $TMP/other.key;
    location = /who { return 200 "other sni=\$ssl_server_name\n"; }
    location = /conn { return 200 "\$connection\n"; } }
  server { listen 127.0.0.1:$NGM ssl; server_name app.test;
    ssl_certificate $TMP/app.pem; ssl_certificate_key $TMP/app.key;
    ssl_client_certificate $TMP/testca.pem; ssl_verify_client on;
    location = /who { return 200 "client=\$ssl_client_s_dn\n"; } }
  server { listen 127.0.0.1:$NG12 ssl; server_name app.test; ssl_protocols TLSv1.2;
    ssl_certificate $TMP/app.pem; ssl_certificate_key $TMP/app.key;
    location = /reused { return 200 "\$ssl_session_reused \$ssl_protocol\n"; } }
  server { listen 127.0.0.1:$NG13 ssl; server_name app.test; ssl_protocols TLSv1.3; root $TMP/www;
    ssl_certificate $TMP/app.pem; ssl_certificate_key $TMP/app.key;
    location = /reused { return 200 "\$ssl_session_reused \$ssl_protocol\n"; } }
EOF
trap 'kill -TERM $NGPID 2>/dev/null; wait $NGPID 2>/dev/null; cleanup' EXIT
$PY "$HERE/upstream_faults.py" "$FT" "$TMP/app.pem" "$TMP/app.key" & PIDS="$PIDS $!"
for i in $(seq 1 50); do
  curl -s -o /dev/null --cacert "$TMP/testca.pem" "https://127.0.0.1:$NGS/who" &&
    curl -s -o /dev/null --cacert "$TMP/testca.pem" "https://127.0.0.1:$FT/ok" && break
  sleep 0.1
done

P=$(free_port)
CA="proxy_ssl_trusted_certificate = $TMP/testca.pem"
loc() { # PATH PROXY_PASS [lines...]
  local path=$1 pass=$2; shift 2
  echo "location $path {"; echo "    proxy_pass = $pass"; for l in "$@"; do echo "    $l"; done; echo "}"
}
{ echo "listen = 127.0.0.1:$P"; echo "workers = 1"; echo "root = $TMP/www"; echo "access_log = $TMP/access.log"
  echo "access_log_format = json"; echo "proxy_connect_timeout = 3s"; echo "proxy_read_timeout = 3s"
  echo "upstream tlsgroup {"; echo "    server = 127.0.0.1:$NGS"; echo "    keepalive = 8"; echo "}"
  for v in 12 13; do
    port=NG$v; [ $v = 12 ] && port=NGS   # (nginx's default protocols here: TLS 1.2)
    echo "upstream idlepool$v {"; echo "    server = 127.0.0.1:${!port}"; echo "    keepalive = 64"; echo "    keepalive_timeout = 2s"; echo "}"
    loc /idle$v/ "https://idlepool$v/" "$CA" "proxy_ssl_name = app.test"
  done
  # Health checks over TLS, verified as the group's requests are (by the first location's
  # settings): by the right CA they pass, by another every check fails.
  echo "upstream checked {"; echo "    server = 127.0.0.1:$NGS"; echo "    health_check = /who interval=0.3s"; echo "}"
  echo "upstream checkedwrong {"; echo "    server = 127.0.0.1:$NGS"; echo "    health_check = /who interval=0.3s"; echo "}"
  loc /checked/ "https://checked/" "$CA" "proxy_ssl_name = app.test"
  loc /checkedwrong/ "https://checkedwrong/" "proxy_ssl_trusted_certificate = $TMP/otherca.pem" "proxy_ssl_name = app.test"
  for v in 12 13; do
    port=NG$v; echo "upstream resume$v {"; echo "    server = 127.0.0.1:${!port}"; echo "    keepalive = 0"; echo "}"
    loc /r$v/ "https://resume$v/" "$CA" "proxy_ssl_name = app.test"
    loc /r$v-otherca/ "https://resume$v/" "proxy_ssl_trusted_certificate = $TMP/otherca.pem" "proxy_ssl_name = app.test"
    loc /r$v-othername/ "https://resume$v/" "$CA" "proxy_ssl_name = other.test"
    loc /r$v-off/ "https://resume$v/" "$CA" "proxy_ssl_name = app.test" "proxy_ssl_session_reuse = off"
  done
  loc /ip/ "https://127.0.0.1:$NGS/" "$CA"
  loc /app/ "https://127.0.0.1:$NGS/" "$CA" "proxy_ssl_name = app.test"
  loc /other/ "https://127.0.0.1:$NGS/" "$CA" "proxy_ssl_name = other.test" "proxy_set_host = other.test"
  loc /nosni/ "https://127.0.0.1:$NGS/" "$CA" "proxy_ssl_name = app.test" "proxy_ssl_server_name = off"
  loc /nosni-other/ "https://127.0.0.1:$NGS/" "$CA" "proxy_ssl_name = other.test" "proxy_ssl_server_name = off"
  loc /wrongca/ "https://127.0.0.1:$NGS/" "proxy_ssl_trusted_certificate = $TMP/otherca.pem"
  loc /system/ "https://127.0.0.1:$NGS/"
  loc /noverify/ "https://127.0.0.1:$NGS/" "proxy_ssl_trusted_certificate = $TMP/otherca.pem" "proxy_ssl_verify = off"
  loc /mismatch/ "https://127.0.0.1:$NGS/" "$CA" "proxy_ssl_name = wrong.test"
  loc /mtls/ "https://127.0.0.1:$NGM/" "$CA" "proxy_ssl_certificate = $TMP/h2park-client.pem" \
    "proxy_ssl_certificate_key = $TMP/h2park-client.key"
  loc /mtls-none/ "https://127.0.0.1:$NGM/" "$CA"
  loc /group/ "https://tlsgroup/" "$CA" "proxy_ssl_name = app.test"
  loc /faults/ "https://127.0.0.1:$FT/" "$CA"
} > "$TMP/tls.conf"
PORT=$P; start_config "$TMP/tls.conf" "$P" || exit 1
g() { curl -s -m 10 "http://127.0.0.1:$P$1"; }
st() { curl -s -m 10 -o "$TMP/body.out" -w '%{http_code}' "http://127.0.0.1:$P$1"; }

# ---- verified, and the name sent ----
[ "$(g /ip/who)" = "app sni=" ]; check verified_by_ip_no_sni_for_an_address $? "$(g /ip/who)"
[ "$(g /app/who)" = "app sni=app.test" ]; check verified_name_sent_as_sni $? "$(g /app/who)"
[ "$(g /other/who)" = "other sni=other.test" ]; check sni_chooses_the_upstreams_server_block $? "$(g /other/who)"
[ "$(g /group/who)" = "app sni=app.test" ]; check group_over_tls $? "$(g /group/who)"
[ "$(g /nosni/who)" = "app sni=" ]; check server_name_off_sends_no_sni $? "$(g /nosni/who)"
[ "$(st /nosni-other/who)" = 502 ]; check server_name_off_default_certificate_mismatch_502 $? "$(cat "$TMP/body.out")"
want=$(sha256sum < "$TMP/www/three.bin" | cut -d' ' -f1)
got=$(curl -s "http://127.0.0.1:$P/app/three.bin" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check file_3MiB_over_tls_upstream $? "sha256 $got"
got=$(curl -s --http2-prior-knowledge "http://127.0.0.1:$P/app/three.bin" | sha256sum | cut -d' ' -f1)
[ "$got" = "$want" ]; check file_3MiB_over_tls_upstream_h2c_client $? "sha256 $got"

# ---- refused: 502, the cause in the error log and the access log ----
[ "$(st /wrongca/who)" = 502 ]; check wrong_ca_502 $? "$(cat "$TMP/body.out")"
grep -q "upstream 127.0.0.1:$NGS: SSL certificate verify error: (20:unable to get local issuer certificate)" "$TMP/daemon.log"
check wrong_ca_cause_logged $? "$(grep -i ssl "$TMP/daemon.log" | tail -2)"
grep '"target":"/wrongca/who"' "$TMP/access.log" | grep -q '"upstream_error":"SSL certificate verify error: (20:unable to get local issuer certificate) for [^"]* while connecting to upstream"'
check wrong_ca_access_log $? "$(grep wrongca "$TMP/access.log" | tail -1)"
[ "$(st /system/who)" = 502 ]; check verified_by_default_against_system_cas_502 $? "$(cat "$TMP/body.out")"
[ "$(g /noverify/who)" = "app sni=127.0.0.1" ] || [ "$(g /noverify/who)" = "app sni=" ]
check verify_off_accepts_any_certificate $? "$(g /noverify/who)"
[ "$(st /mismatch/who)" = 502 ]; check name_mismatch_502 $? "$(cat "$TMP/body.out")"
grep -q "SSL certificate verify error: (62:hostname mismatch) for wrong.test" "$TMP/daemon.log"
check name_mismatch_cause_logged $? "$(grep -i ssl "$TMP/daemon.log" | tail -2)"

# ---- sessions resumed, each only under the settings that made it ----
# Every request a new connection (keepalive = 0); nginx's $ssl_session_reused says "r".
for v in 12 13; do
  r=$(for i in 1 2 3; do g /r$v/reused; done | tr '\n' ,)
  [ "$r" = ". TLSv1.$((v - 10)),r TLSv1.$((v - 10)),r TLSv1.$((v - 10))," ]; check "tls1$((v - 10))_session_resumed" $? "$r"
  # A session verified against one CA and name is never offered under another: resuming it
  # would skip the check that refuses these.
  a=$(st /r$v-otherca/reused); b=$(st /r$v-othername/reused)
  [ "$a" = 502 ] && [ "$b" = 502 ]; check "tls1$((v - 10))_session_not_resumed_under_other_ca_or_name" $? "other CA: $a, other name: $b"
  r=$(for i in 1 2; do g /r$v-off/reused; done | tr '\n' ,)
  [ "$r" = ". TLSv1.$((v - 10)),. TLSv1.$((v - 10))," ]; check "tls1$((v - 10))_session_reuse_off" $? "$r"
  r=$(g /r$v/reused)
  [ "$r" = "r TLSv1.$((v - 10))" ]; check "tls1$((v - 10))_session_kept_beside_other_settings" $? "$r"
done
m=$(curl -s "http://127.0.0.1:$P/metrics")
grep -q "h2park_upstream_tls_handshakes_total{upstream=\"resume13\",server=\"127.0.0.1:$NG13\",session=\"resumed\"} 3" <<< "$m" &&
  grep -q "h2park_upstream_tls_handshakes_total{upstream=\"resume13\",server=\"127.0.0.1:$NG13\",session=\"new\"} 3" <<< "$m"
check tls_handshakes_in_metrics $? "$(grep 'tls_handshakes_total{upstream="resume13"' <<< "$m")"

# ---- health checks over TLS ----
sleep 1
m=$(curl -s "http://127.0.0.1:$P/metrics")
pass=$(sed -n "s/^h2park_upstream_health_checks_total{upstream=\"checked\",server=\"127.0.0.1:$NGS\",result=\"pass\"} //p" <<< "$m")
[ "$(g /checked/who)" = "app sni=app.test" ] && [ "${pass:-0}" -ge 2 ]
check tls_health_check_passes $? "$(g /checked/who), $pass checks passed"
grep -q "upstream 127.0.0.1:$NGS: health check failed 1 time (SSL certificate verify error: (20:unable to get local issuer certificate) for app.test): left out" "$TMP/daemon.log" &&
  [ "$(st /checkedwrong/who)" = 502 ] && grep -q '"target":"/checkedwrong/who".*"upstream_error":"no live upstreams"' "$TMP/access.log"
check tls_health_check_verifies_as_requests_do $? "$(grep 'health check' "$TMP/daemon.log" | tail -1)"

# ---- a client certificate ----
[ "$(g /mtls/who)" = "client=CN=h2park-client" ]; check client_certificate_sent $? "$(g /mtls/who)"
[ "$(st /mtls-none/who)" = 400 ]; check no_client_certificate_nginx_400 $? "$(head -c 100 "$TMP/body.out")"

# ---- keep-alive over TLS: one connection for sequential requests, per setting ----
conns=$(for i in $(seq 1 10); do g /app/conn; g /other/conn; done | sort -u | wc -l)
[ "$conns" = 2 ]; check keepalive_reused_over_tls_one_connection_per_setting $? "$conns nginx connections for 20 requests"
m=$(curl -s "http://127.0.0.1:$P/metrics")
grep -q "h2park_upstream_connections{upstream=\"\",server=\"127.0.0.1:$NGS\",state=\"idle\"} [1-9]" <<< "$m"
check pooled_tls_connections_in_metrics $? "$(grep 'upstream_connections{' <<< "$m" | head -4)"

# ---- faults over TLS ----
curl -s -o /dev/null "http://127.0.0.1:$P/faults/reset"; rc=$?
[ $rc = 18 ] || [ $rc = 56 ]; check tls_upstream_reset_mid_body_cut_short $? "curl exit $rc"
curl -s -o /dev/null "http://127.0.0.1:$P/faults/cut"; rc=$?
[ $rc = 18 ] || [ $rc = 56 ]; check tls_upstream_close_notify_mid_body_cut_short $? "curl exit $rc"
grep -q 'GET /faults/cut: upstream 127.0.0.1:'"$FT"': upstream prematurely closed' "$TMP/daemon.log"
check tls_upstream_close_mid_body_logged $? "$(grep /faults/cut "$TMP/daemon.log" | tail -1)"
[ "$(st /faults/fold-split)" = 502 ]; check tls_fold_split_502 $? "$(head -c 100 "$TMP/body.out")"
body=$(g /faults/late); sleep 0.6
later=$(for i in 1 2 3; do g /faults/ok; done | tr -d '\n')
[ "$body" = ok ] && [ "$later" = okokok ]; check tls_late_bytes_on_pooled_connection_not_reused $? "'$body', then '$later'"

# ---- an idle pooled TLS connection: its socket and SSL object, no buffer ----
# The heap with the pool full, then once keepalive_timeout has closed every pooled
# connection: the difference is what the idle connections held (80 bytes each over TCP).
# Over TLS 1.3 OpenSSL kept its 21 KiB read buffer in each until they were freed at pooling.
for v in 12 13; do
  port=NG$v; [ $v = 12 ] && port=NGS
  pooled() { curl -s "http://127.0.0.1:$P/metrics" | sed -n "s/^h2park_upstream_connections{upstream=\"idlepool$v\",server=\"127.0.0.1:${!port}\",state=\"idle\"} //p"; }
  cpids=""; for i in $(seq 1 60); do curl -s -o /dev/null "http://127.0.0.1:$P/idle$v/three.bin" & cpids="$cpids $!"; done
  wait $cpids
  sleep 0.3
  heap=$(stat_of heap_alloc_bytes); n=$(pooled)
  for i in $(seq 1 50); do sleep 0.2; [ "$(pooled)" = 0 ] && break; done
  sleep 0.2; after=$(stat_of heap_alloc_bytes)
  each=$(( ${n:-0} > 0 ? (heap - after) / n : 0 ))
  echo "# $n idle pooled TLS 1.$((v - 10)) upstream connections: $each heap bytes each (heap $heap with them, $after without)"
  [ "${n:-0}" -ge 10 ] && [ "$each" -lt 24576 ] && [ "$(pooled)" = 0 ]
  check "idle_pooled_tls1$((v - 10))_connection_holds_no_buffer" $? "$n idle, heap $heap -> $after ($each each), pooled now $(pooled)"
done

# ---- a reload that changes the CA: pooled connections of the old settings are not taken ----
sed -i "/^location \/app\/ {/,/^}/ s|testca.pem|otherca.pem|" "$TMP/tls.conf"
reload_and_wait
[ "$(st /app/who)" = 502 ]; check reload_new_ca_not_served_by_old_pool $? "$(cat "$TMP/body.out")"
kill -0 "$DPID"; check daemon_alive $? ""
stop_daemon

# ---- configuration errors name file and line, exit 2 ----
printf 'listen = 127.0.0.1:%s\nlocation / {\n  proxy_pass = https://127.0.0.1:1\n  proxy_ssl_trusted_certificate = %s/nosuch.pem\n}\n' \
  "$(free_port)" "$TMP" > "$TMP/bad1.conf"
config_error config_trusted_certificate_missing "bad1.conf:4: proxy_ssl_trusted_certificate $TMP/nosuch.pem: cannot load" \
  -c "$TMP/bad1.conf" --check
printf 'listen = 127.0.0.1:%s\nlocation / {\n  proxy_pass = https://127.0.0.1:1\n  proxy_ssl_certificate = %s/app.pem\n}\n' \
  "$(free_port)" "$TMP" > "$TMP/bad2.conf"
config_error config_client_certificate_without_key "bad2.conf:4: proxy_ssl_certificate without proxy_ssl_certificate_key" \
  -c "$TMP/bad2.conf" --check
printf 'listen = 127.0.0.1:%s\nlocation / {\n  proxy_pass = https://127.0.0.1:1\n  proxy_ssl_certificate = %s/app.pem\n  proxy_ssl_certificate_key = %s/other.key\n}\n' \
  "$(free_port)" "$TMP" "$TMP" > "$TMP/bad3.conf"
config_error config_client_key_mismatch "bad3.conf:5: proxy_ssl_certificate_key $TMP/other.key: cannot load, or does not match" \
  -c "$TMP/bad3.conf" --check
printf 'listen = 127.0.0.1:%s\nupstream b {\n  server = 127.0.0.1:1\n}\nlocation /a/ {\n  proxy_pass = https://b\n}\nlocation /b/ {\n  proxy_pass = http://b\n}\n' \
  "$(free_port)" > "$TMP/bad4.conf"
config_error config_one_scheme_per_upstream "bad4.conf:9: upstream b is passed to over http:// here but over https:// at" \
  -c "$TMP/bad4.conf" --check
printf 'listen = 127.0.0.1:%s\nlocation /a/ {\n  proxy_pass = https://127.0.0.1:1\n}\nlocation /b/ {\n  proxy_pass = http://127.0.0.1:1/\n}\n' \
  "$(free_port)" > "$TMP/bad5.conf"
config_error config_one_scheme_per_address "bad5.conf:6: upstream 127.0.0.1:1 is passed to over http:// here but over https:// at" \
  -c "$TMP/bad5.conf" --check
