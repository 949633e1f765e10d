#!/bin/bash
# The client's real address behind nginx: nginx-light in front sets X-Forwarded-For (and,
# for a second h2park, Forwarded); h2park believes it from real_ip_from only.  Clients
# come from their own loopback addresses (curl --interface 127.0.0.5), so what h2park
# logs, what allow/deny decide and what $remote_addr says can be told from nginx's own
# 127.0.0.1.  Attacks: a client's own X-Forwarded-For through nginx (nginx appends the
# real one: the rightmost untrusted address wins), the same header sent straight to
# h2park from an untrusted address (ignored), a long chain and garbage, over HTTP/1.1 and
# h2c.
. "$(dirname "$0")/lib.sh"
make_site
command -v nginx >/dev/null || { echo "ok realip_behind_nginx # SKIP nginx not installed"; exit 0; }
P=$(free_port); P2=$(free_port); N=$(free_port)
while [ "$P2" = "$P" ]; do P2=$(free_port); done
while [ "$N" = "$P" ] || [ "$N" = "$P2" ]; do N=$(free_port); done
site() { # site PORT HEADER
  printf 'listen = 127.0.0.1:%s\nroot = %s/www\naccess_log = %s/access-%s.log\nreal_ip_from = 127.0.0.1\nreal_ip_header = %s\n' \
    "$1" "$TMP" "$TMP" "$1" "$2"
  printf 'location = /ip {\n    return = 200 "$remote_addr"\n}\nlocation /office/ {\n    allow = 127.0.0.5\n    deny = all\n}\n'
}
mkdir -p "$TMP/www/office"; printf 'plan\n' > "$TMP/www/office/plan.txt"
site "$P" X-Forwarded-For > "$TMP/a.conf"
site "$P2" Forwarded > "$TMP/b.conf"
start_config "$TMP/a.conf" "$P" || exit 1
"$H2PARK" -c "$TMP/b.conf" > "$TMP/b.log" 2>&1 & B=$!; PIDS="$PIDS $B"
start_nginx <<EOF
  server {
    listen 127.0.0.1:$N;
    location / {
      proxy_pass http://127.0.0.1:$P;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
    location /fwd/ {
      proxy_pass http://127.0.0.1:$P2/;
      proxy_set_header Forwarded "for=\$remote_addr;proto=\$scheme";
    }
  }
EOF
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$N/-/healthz" && curl -s -o /dev/null "http://127.0.0.1:$P2/-/healthz" && break; sleep 0.1; done
via() { curl -s -m 5 --interface "$1" "${@:3}" "http://127.0.0.1:$N$2"; }
code_via() { curl -s -m 5 -o /dev/null -w '%{http_code}' --interface "$1" "${@:3}" "http://127.0.0.1:$N$2"; }

[ "$(via 127.0.0.5 /ip)" = 127.0.0.5 ]; check realip_x_forwarded_for_from_nginx $? "$(via 127.0.0.5 /ip)"
sleep 0.2
grep -q '^127\.0\.0\.5 - - .*"GET /ip HTTP/1.1" 200' "$TMP/access-$P.log"; check realip_in_access_log $? "$(tail -1 "$TMP/access-$P.log")"
[ "$(code_via 127.0.0.5 /office/plan.txt)" = 200 ] && [ "$(code_via 127.0.0.6 /office/plan.txt)" = 403 ]
check realip_decides_access $? "127.0.0.5: $(code_via 127.0.0.5 /office/plan.txt), 127.0.0.6: $(code_via 127.0.0.6 /office/plan.txt)"
# A client's own X-Forwarded-For: nginx appends the address it saw, which is what counts.
[ "$(via 127.0.0.6 /ip -H 'X-Forwarded-For: 127.0.0.5')" = 127.0.0.6 ] &&
  [ "$(code_via 127.0.0.6 /office/plan.txt -H 'X-Forwarded-For: 127.0.0.5')" = 403 ]
check realip_spoof_through_nginx_fails $? "$(via 127.0.0.6 /ip -H 'X-Forwarded-For: 127.0.0.5')"
# Straight to h2park from an address that is no trusted proxy: the header is not believed.
got=$(curl -s --interface 127.0.0.6 -H 'X-Forwarded-For: 127.0.0.5' "http://127.0.0.1:$P/ip")
code=$(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.6 -H 'X-Forwarded-For: 127.0.0.5' "http://127.0.0.1:$P/office/plan.txt")
[ "$got" = 127.0.0.6 ] && [ "$code" = 403 ]; check realip_untrusted_peer_ignored $? "$got $code"
# From the trusted address itself (127.0.0.1), over h2c too, the header is believed.
[ "$(curl -s --http2-prior-knowledge -H 'X-Forwarded-For: 203.0.113.9' "http://127.0.0.1:$P/ip")" = 203.0.113.9 ] &&
  [ "$(curl -s -H 'X-Forwarded-For: 2001:db8::9' "http://127.0.0.1:$P/ip")" = 2001:db8::9 ]
check realip_trusted_h2c_and_ipv6 $? "$(curl -s --http2-prior-knowledge -H 'X-Forwarded-For: 203.0.113.9' "http://127.0.0.1:$P/ip")"
# Garbage and length: the walk stops at what is not an address; a thousand hops cost
# nothing but the last ones.
long=$(for i in $(seq 1 1000); do printf '10.%d.%d.1, ' $((i / 250)) $((i % 250)); done)203.0.113.7
[ "$(curl -s -H "X-Forwarded-For: $long" "http://127.0.0.1:$P/ip")" = 203.0.113.7 ] &&
  [ "$(curl -s -H 'X-Forwarded-For: 203.0.113.1, <script>' "http://127.0.0.1:$P/ip")" = 127.0.0.1 ] &&
  [ "$(curl -s -H 'X-Forwarded-For: ,,, ' "http://127.0.0.1:$P/ip")" = 127.0.0.1 ] &&
  [ "$(curl -s -H 'X-Forwarded-For: 203.0.113.1:99999' "http://127.0.0.1:$P/ip")" = 127.0.0.1 ]
check realip_garbage_and_long_chains $? "$(curl -s -H 'X-Forwarded-For: 203.0.113.1, <script>' "http://127.0.0.1:$P/ip")"
# Forwarded (RFC 7239) from nginx, for the daemon that reads it.
[ "$(via 127.0.0.5 /fwd/ip)" = 127.0.0.5 ]; check realip_forwarded_from_nginx $? "$(via 127.0.0.5 /fwd/ip)"
[ "$(curl -s -H 'X-Forwarded-For: 203.0.113.9' "http://127.0.0.1:$P2/ip")" = 127.0.0.1 ]
check realip_only_the_configured_header $? "$(curl -s -H 'X-Forwarded-For: 203.0.113.9' "http://127.0.0.1:$P2/ip")"
kill "$NGPID" "$B" 2>/dev/null; wait "$NGPID" "$B" 2>/dev/null
stop_daemon
