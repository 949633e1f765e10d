#!/bin/bash
# The README's examples, run: the files of config/examples/ that it shows (docs_check.py
# holds the README's blocks to them) with only the ports, paths and certificate changed
# for a test - your site on 443 with your certificate (here a free port and a test
# certificate), h2park behind nginx, behind haproxy with its HTTP/2 health check (and
# without the check's host, the 503 the README warns of), the systemd units with the
# socket drop-in as systemd would run them (under systemd-socket-activate), the curl lines
# against `make run`'s daemon, and the three ways to turn parking off.
. "$(dirname "$0")/lib.sh"
make_site
ABS_H2PARK=$(cd "$(dirname "$H2PARK")" && pwd)/$(basename "$H2PARK")
EX=config/examples
# Daemons that drop to another user (user = www-data, nginx's workers) read the test's files.
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www" "$TMP/cert.pem"

wait_for() { # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}
is_200() { [ "$(curl -sk -m 3 -o /dev/null -w '%{http_code}' "$@")" = 200 ]; }
# the_page ARGS... URL: the test site's index.html came back, over HTTP/2.
the_page() { [ "$(curl -sk -m 10 --http2 -o "$TMP/page.got" -w '%{http_version}' "$@")" = 2 ] && cmp -s "$TMP/page.got" "$TMP/www/index.html"; }

# ---- your site on 443 with your certificate ----
P=$(free_port); Q=$(free_port)
sed -e "s|^listen = \*:443 tls$|listen = *:$P tls|" -e "s|^listen = \*:80$|listen = *:$Q|" -e "s|/srv/www|$TMP/www|" \
    -e "s|/etc/h2park/fullchain.pem|$TMP/cert.pem|" -e "s|/etc/h2park/privkey.pem|$TMP/key.pem|" \
    "$EX/site.conf" > "$TMP/site.conf"
[ "$(grep -cE "$P|$Q|$TMP" "$TMP/site.conf")" = 5 ]
check example_site_conf_adapted $? "$(grep -v '^#' "$TMP/site.conf")"
if [ "$(id -u)" = 0 ] && id www-data >/dev/null 2>&1; then as=www-data; else sed -i '/^user = /d' "$TMP/site.conf"; as=$(id -un); fi
out=$("$H2PARK" -c "$TMP/site.conf" --check 2>"$TMP/check.err")
[ "$(echo "$out" | tail -1)" = "configuration ok" ] && echo "$out" | grep -qF "cert $TMP/cert.pem"
check example_site_check_ok $? "$out: $(cat "$TMP/check.err")"
if start_config "$TMP/site.conf" "$Q"; then
  the_page "https://127.0.0.1:$P/"; h2=$?
  v6=$(curl -sk -m 5 -o /dev/null -w '%{http_code}' "https://[::1]:$P/")
  h1=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$Q/")
  user=$(ps -o user= -p "$DPID")
  [ $h2 = 0 ] && [ "$v6" = 200 ] && [ "$h1" = 200 ] && [ "$user" = "$as" ]
  check example_site_serves_h2_tls_v4_v6_and_http $? "h2: $h2, IPv6: $v6, http: $h1, user: $user"
  stop_daemon
else
  fail example_site_serves_h2_tls_v4_v6_and_http "did not start: $(cat "$TMP/daemon.log")"
fi

# ---- behind nginx ----
if command -v nginx >/dev/null; then
  P=$(free_port); NP=$(free_port)
  mkdir -p "$TMP/nginx"; chmod a+rwx "$TMP/nginx"
  sed -e "s|127.0.0.1:8080|127.0.0.1:$P|" -e "s|/srv/www|$TMP/www|" "$EX/behind-nginx.conf" > "$TMP/behind-nginx.conf"
  sed -e "s|listen 443 ssl http2;|listen 127.0.0.1:$NP ssl http2;|" -e "s|127.0.0.1:8080|127.0.0.1:$P|" \
      -e "s|/etc/ssl/example.com/fullchain.pem|$TMP/cert.pem|" -e "s|/etc/ssl/example.com/privkey.pem|$TMP/key.pem|" \
      "$EX/nginx-h2park.conf" > "$TMP/nginx/site.conf"
  # What /etc/nginx/nginx.conf gives a site, for a test: its own pid, logs and temp files.
  cat > "$TMP/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log;
events { worker_connections 256; }
http {
  access_log $TMP/nginx/access.log;
  client_body_temp_path $TMP/nginx; proxy_temp_path $TMP/nginx; fastcgi_temp_path $TMP/nginx;
  uwsgi_temp_path $TMP/nginx; scgi_temp_path $TMP/nginx;
  include $TMP/nginx/site.conf;
}
EOF
  if start_config "$TMP/behind-nginx.conf" "$P"; then
    nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" >"$TMP/nginx/out" 2>&1 & NGPID=$!; PIDS="$PIDS $NGPID"
    wait_for 10 is_200 "https://127.0.0.1:$NP/"
    before=$(curl -s "http://127.0.0.1:$P/metrics" | sed -n 's/^h2park_connections_accepted_total //p')
    n=0; for i in $(seq 1 20); do
      the_page "https://127.0.0.1:$NP/" && n=$((n + 1))
    done
    after=$(curl -s "http://127.0.0.1:$P/metrics" | sed -n 's/^h2park_connections_accepted_total //p')
    [ $n = 20 ]; check example_nginx_front_serves_h2 $? "$n of 20: $(tail -2 "$TMP/nginx/error.log")"
    # Kept alive: twenty requests over one or two upstream connections (and the two metrics reads).
    [ $((after - before)) -le 3 ]; check example_nginx_upstream_kept_alive $? "$before -> $after connections"
    kill -TERM "$NGPID"; wait "$NGPID" 2>/dev/null
    stop_daemon
  else
    fail example_nginx_front_serves_h2 "h2park did not start: $(cat "$TMP/daemon.log")"
  fi
else
  echo "ok example_nginx_front_serves_h2 # SKIP nginx not installed"
fi

# ---- behind haproxy ----
if command -v haproxy >/dev/null; then
  P=$(free_port); HP=$(free_port)
  cat "$TMP/cert.pem" "$TMP/key.pem" > "$TMP/site.pem"
  sed -e "s|127.0.0.1:8080|127.0.0.1:$P|" -e "s|/srv/www|$TMP/www|" "$EX/behind-haproxy.conf" > "$TMP/behind-haproxy.conf"
  echo "access_log = $TMP/access.log" >> "$TMP/behind-haproxy.conf"
  sed -e "s|bind :443 |bind 127.0.0.1:$HP |" -e "s|/etc/haproxy/site.pem|$TMP/site.pem|" -e "s|127.0.0.1:8080|127.0.0.1:$P|" \
      "$EX/haproxy.cfg" > "$TMP/haproxy.cfg"
  # The same without the check's host: the health check the README warns of.
  HP2=$(free_port)
  sed -e 's| hdr host localhost||' -e "s|127.0.0.1:$HP |127.0.0.1:$HP2 |" "$TMP/haproxy.cfg" > "$TMP/haproxy-nohost.cfg"
  "$H2PARK" -c "$TMP/behind-haproxy.conf" >"$TMP/daemon.log" 2>&1 & DPID=$!; PIDS="$PIDS $DPID"
  if wait_for 10 grep -q "listening on 127.0.0.1:$P (HTTP/1.1 and h2c, after a PROXY protocol header)" "$TMP/daemon.log"; then
    haproxy -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 & HPID=$!; PIDS="$PIDS $HPID"
    wait_for 15 is_200 --interface 127.0.0.2 "https://127.0.0.1:$HP/"
    the_page --interface 127.0.0.2 "https://127.0.0.1:$HP/index.html" && ! grep -q 'is DOWN' "$TMP/haproxy.log"
    check example_haproxy_front_serves_h2_check_up $? "got: $(head -c 100 "$TMP/page.got"); $(grep -i 'DOWN\|UP' "$TMP/haproxy.log" | head -2)"
    # h2 to h2park (h2c), the client's address from the PROXY header, the check's host.
    grep -q '^127\.0\.0\.2 .*"GET /index.html HTTP/2.0" 200 .* h2c ' "$TMP/access.log" &&
      grep -q '"GET /-/healthz HTTP/2.0" 200 .*"localhost" h2c' "$TMP/access.log"
    check example_haproxy_h2_proxy_protocol_logged $? "$(tail -3 "$TMP/access.log")"
    haproxy -f "$TMP/haproxy-nohost.cfg" >"$TMP/haproxy-nohost.log" 2>&1 & H2PID=$!; PIDS="$PIDS $H2PID"
    wait_for 15 grep -q 'is DOWN' "$TMP/haproxy-nohost.log"
    code=$(curl -sk -m 5 -o /dev/null -w '%{http_code}' "https://127.0.0.1:$HP2/")
    [ "$code" = 503 ]; check example_haproxy_check_without_host_is_down $? "code $code: $(head -2 "$TMP/haproxy-nohost.log")"
    kill -TERM "$HPID" "$H2PID"; wait "$HPID" "$H2PID" 2>/dev/null
    stop_daemon
  else
    fail example_haproxy_front_serves_h2_check_up "h2park did not start: $(cat "$TMP/daemon.log")"
  fi
else
  echo "ok example_haproxy_front_serves_h2_check_up # SKIP haproxy not installed"
fi

# ---- systemd: make install, the configuration edited, the socket drop-in, the units ----
if command -v systemd-socket-activate >/dev/null && command -v systemd-analyze >/dev/null; then
  env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory install-daemon BUILD="$BUILD" SAN="${SAN:-0}" \
    PREFIX="$TMP/prefix" >"$TMP/install.log" 2>&1
  check example_systemd_install $? "$(tail -5 "$TMP/install.log")"
  U=$TMP/prefix/lib/systemd/system
  mkdir -p "$U/h2park.socket.d"; cp "$EX/h2park.socket-site.conf" "$U/h2park.socket.d/override.conf"
  out=$(SYSTEMD_UNIT_PATH="$U:" MANPATH="$TMP/prefix/share/man" systemd-analyze verify "$U/h2park.service" "$U/h2park.socket" 2>&1)
  [ -z "$out" ]; check example_systemd_units_and_dropin_verify $? "$out"
  # The sockets systemd would hold: the unit's ListenStream lines, emptied and replaced by the drop-in's.
  streams=$(cat "$U/h2park.socket" "$U/h2park.socket.d/override.conf" |
            awk -F= '$1 == "ListenStream" { if ($2 == "") n = 0; else s[++n] = $2 } END { for (i = 1; i <= n; i++) print s[i] }' | tr '\n' ' ')
  [ "$streams" = "443 80 " ]; check example_systemd_dropin_sockets $? "ListenStream: $streams"
  # The configuration as the README says to edit it: site.conf's, without user.
  P=$(free_port); Q=$(free_port)
  grep -v '^user = ' "$TMP/site.conf" | sed -e "s|^\(listen = \*:\)[0-9]* tls$|\1$P tls|" -e "s|^\(listen = \*:\)[0-9]*$|\1$Q|" \
    > "$TMP/prefix/etc/h2park/h2park.conf"
  exec_start=$(sed -n 's/^ExecStart=//p' "$U/h2park.service")
  systemd-socket-activate -l "$P" -l "$Q" -- $exec_start >"$TMP/daemon.log" 2>&1 &
  DPID=$!; PIDS="$PIDS $DPID"
  # The first connection starts the daemon (a slow start under ASan on a loaded machine
  # outlasted one curl's 10 s).
  wait_for 60 is_200 "http://[::1]:$Q/"
  the_page "https://127.0.0.1:$P/"; h2=$?
  h1=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "http://[::1]:$Q/")
  [ $h2 = 0 ] && [ "$h1" = 200 ] &&
    [ "$(grep -c 'a socket from systemd' "$TMP/daemon.log")" = 2 ]
  check example_systemd_serves_on_its_sockets $? "h2: $h2, http: $h1: $(cat "$TMP/daemon.log")"
  stop_daemon
else
  echo "ok example_systemd_serves_on_its_sockets # SKIP no systemd-socket-activate (apt-get install systemd)"
fi

# ---- make run, and the README's curl lines against it ----
# build/h2park with no options, as make run starts it, on its fixed ports: in a network
# namespace of its own, where they are free.
if unshare -n true 2>/dev/null; then
  sed -n '/^```sh$/,/^```$/p' README.md | grep '^curl ' > "$TMP/readme-curls"
  unshare -n bash -c "ip link set lo up; cd '$TMP' && { '$ABS_H2PARK' >'$TMP/run.log' 2>&1 & p=\$!; }
    for i in \$(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:8080/-/healthz && break; sleep 0.1; done
    n=0; while read -r line; do eval \"\$line\" > '$TMP/curl.out' 2>&1 && [ -s '$TMP/curl.out' ] && n=\$((n + 1)) || cat '$TMP/curl.out'; done < '$TMP/readme-curls'
    echo \$n > '$TMP/curls-ok'
    curl -s http://127.0.0.1:8080/-/dashboard | grep -c '<svg\\|<html' > '$TMP/dashboard'
    kill -TERM \$p; wait \$p"
  lines=$(wc -l < "$TMP/readme-curls")
  [ "$lines" -ge 2 ] && [ "$(cat "$TMP/curls-ok")" = "$lines" ] && [ "$(cat "$TMP/dashboard")" -ge 1 ]
  check example_make_run_curl_lines $? "$(cat "$TMP/curls-ok") of $lines curl lines; dashboard $(cat "$TMP/dashboard"): $(tail -3 "$TMP/run.log")"
else
  echo "ok example_make_run_curl_lines # SKIP no network namespaces here"
fi

# ---- turning parking off, the three ways ----
parking_of() { curl -s --http2-prior-knowledge "http://127.0.0.1:$PORT/-/stats" | sed -n 's/.*"parking": \([a-z]*\).*/\1/p'; }
start_daemon --parking off; a=$(parking_of); stop_daemon
H2PARK_DEBUG=http2serveparking=0 start_daemon; b=$(parking_of); stop_daemon
P=$(free_port)
printf 'listen = 127.0.0.1:%s\nroot = %s\n' "$P" "$TMP/www" > "$TMP/my.conf"
start_config "$TMP/my.conf" "$P"; PORT=$P
before=$(parking_of)
echo 'parking = off' >> "$TMP/my.conf"
reload_and_wait; c=$(parking_of)
stop_daemon
[ "$a $b $before $c" = "false false true false" ]
check example_parking_off_three_ways $? "--parking off: $a, H2PARK_DEBUG: $b, file then SIGHUP: $before -> $c"
