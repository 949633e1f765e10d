#!/bin/bash
# h2park as an operator meets it: started with no flags from any directory (in a network
# namespace of its own, so its fixed default ports are free) it serves - TLS with a
# self-signed certificate it made, / from the built-in page - and says where root came
# from; --print-default-config prints exactly the file; --check binds every address
# and loads the certificate; "*:PORT" is IPv4 and IPv6; user = NAME drops root; make
# install-daemon installs what systemd-analyze verify accepts, a manual that renders
# cleanly and names every setting, and a config that serves from where it installed.
. "$(dirname "$0")/lib.sh"
make_site
ABS_H2PARK=$(cd "$(dirname "$H2PARK")" && pwd)/$(basename "$H2PARK")
REPO=$(pwd)

"$H2PARK" --print-default-config | cmp -s - config/default.conf
check print_default_config_exact $? "$("$H2PARK" --print-default-config | tail -c 20 | od -c | tail -2)"

# No flags, from a directory with no www in it, on the embedded default's own ports.
in_netns() { # in_netns SCRIPT: bash in a new network namespace with loopback up
  unshare -n bash -c "ip link set lo up || exit 1
$1"
}
if in_netns true 2>/dev/null; then
  mkdir -p "$TMP/elsewhere"
  in_netns "cd '$TMP/elsewhere' && { '$ABS_H2PARK' >'$TMP/noflag.log' 2>&1 & p=\$!; }
    for i in \$(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:8080/-/healthz && break; sleep 0.1; done
    curl -s http://127.0.0.1:8080/ > '$TMP/page.out'
    curl -s -k --http2 https://127.0.0.1:8443/-/healthz > '$TMP/tls.out'
    echo | openssl s_client -connect 127.0.0.1:8443 -servername localhost 2>/dev/null |
      openssl x509 -noout -subject -ext subjectAltName > '$TMP/cert.out' 2>&1
    kill -TERM \$p; wait \$p"
  grep -q 'h2park is running' "$TMP/page.out" && [ "$(cat "$TMP/tls.out")" = ok ]
  check no_flags_any_directory_serves $? "page: $(head -c 80 "$TMP/page.out"); tls: $(cat "$TMP/tls.out"); $(cat "$TMP/noflag.log")"
  grep -q 'h2park self-signed' "$TMP/cert.out" && grep -q 'DNS:localhost, IP Address:127.0.0.1' "$TMP/cert.out" &&
    grep -q 'warn  no cert and key: TLS uses a self-signed certificate made at start (ECDSA P-256' "$TMP/noflag.log"
  check no_flags_self_signed_certificate_warned $? "$(cat "$TMP/cert.out"; grep cert "$TMP/noflag.log")"
  grep -q "root ./www (built-in default) resolved against $TMP/elsewhere: No such file or directory; / serves the built-in page" \
    "$TMP/noflag.log"
  check no_flags_default_root_reported $? "$(grep root "$TMP/noflag.log")"
  in_netns "cd '$REPO' && { '$ABS_H2PARK' >'$TMP/repo.log' 2>&1 & p=\$!; }
    for i in \$(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:8080/-/healthz && break; sleep 0.1; done
    kill -TERM \$p; wait \$p"
  grep -q "root ./www (built-in default) resolved to $REPO/www" "$TMP/repo.log"
  check default_root_resolved_and_origin $? "$(grep root "$TMP/repo.log")"
else
  echo "ok no_flags_any_directory_serves # SKIP no network namespaces here"
fi

printf 'root = ./nowhere\n' > "$TMP/root.conf"
# (a file's relative root is taken from its directory, wherever h2park starts)
(cd "$TMP/www" && H2PARK=$ABS_H2PARK config_error missing_root_from_file "root $TMP/nowhere ($TMP/root.conf:1): No such file" \
  -c "$TMP/root.conf" --check)
config_error missing_root_from_flag "root /nowhere/www (command line): No such file" --root /nowhere/www --check
config_error cert_without_key "command line: 1 cert and 0 key at the top level: each certificate needs its key" --tls-listen 127.0.0.1:1 --cert "$TMP/cert.pem" --root "$TMP/www"
printf 'user = nosuchuser-h2park\n' > "$TMP/user.conf"
config_error unknown_user_names_line "$TMP/user.conf:1: user 'nosuchuser-h2park': no such user" -c "$TMP/user.conf"
printf 'listen = 127.0.0.1:1\nlisten = 127.0.0.1:1 tls\n' > "$TMP/twice.conf"
config_error listen_twice "listen 127.0.0.1:1: given twice" -c "$TMP/twice.conf" --root "$TMP/www" --check
config_error listen_option_twice "'tls' given twice" --listen '127.0.0.1:1 tls tls' --root "$TMP/www"

# --check binds (and lets go of) every address, and loads the certificate.
P=$(free_port)
out=$("$H2PARK" --check --listen "127.0.0.1:$P" --tls-listen "127.0.0.1:$((P + 1))" --cert "$TMP/cert.pem" \
  --key "$TMP/key.pem" --root "$TMP/www" 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | tail -1)" = "configuration ok" ] && ! ss -Hltn "( sport = :$P )" | grep -q .
check check_ok_and_releases $? "exit $rc: $out"
hold_port "$P"
config_error check_finds_busy_port "listen 127.0.0.1:$P: Address already in use (another process listens there)" \
  --check --listen "127.0.0.1:$P" --root "$TMP/www"
kill "$HOLDPID"
config_error check_finds_foreign_address "listen 192.0.2.1:$P: Cannot assign requested address" \
  --check --listen "192.0.2.1:$P" --root "$TMP/www"
config_error check_loads_certificate "cannot load certificate $TMP/nocert.pem" \
  --check --tls-listen "127.0.0.1:$P" --cert "$TMP/nocert.pem" --key "$TMP/key.pem" --root "$TMP/www"
config_error check_opens_access_log "access_log $TMP/nowhere/access.log: No such file or directory" \
  --check --listen "127.0.0.1:$P" --root "$TMP/www" --access-log "$TMP/nowhere/access.log"
start_daemon
out=$("$H2PARK" --check --listen "127.0.0.1:$PORT" --root "$TMP/www" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'in use by a process that shares it .* as a running h2park does'
check check_beside_running_h2park $? "exit $rc: $out"
stop_daemon

# "*:PORT": one IPv6 socket per worker that takes IPv4 too; "[::]:PORT" stays IPv6 only.
P=$(free_port)
: > "$TMP/empty.conf"              # (a configuration is a regular file: /dev/null is refused)
start_config "$TMP/empty.conf" "$P" --listen "*:$P" --root "$TMP/www" --workers 2
v4=$(code "$P" /-/healthz)
v6=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://[::1]:$P/-/healthz")
sockets=$(ss -Hltn "( sport = :$P )" | awk '{print $4}' | sort | uniq -c | tr -s ' ')
[ "$v4" = 200 ] && [ "$v6" = 200 ] && [ "$sockets" = " 2 *:$P" ]
check listen_star_dual_stack $? "IPv4 $v4, IPv6 $v6, sockets: $sockets"
stop_daemon
start_config "$TMP/empty.conf" "$P" --listen "[::]:$P" --listen "127.0.0.1:$P" --root "$TMP/www" --workers 1 2>/dev/null
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://[::1]:$P/-/healthz")" = 200 ]
check listen_v6_only_beside_v4 $? "$(cat "$TMP/daemon.log")"
stop_daemon

# user = NAME: root binds, reads the key, then becomes NAME.
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  chmod 755 "$TMP"
  chmod -R a+rX "$TMP/www"
  P=$(free_port)
  printf 'listen = 127.0.0.1:%s\nlisten = 127.0.0.1:%s tls\ncert = %s\nkey = %s\nroot = %s\nuser = nobody\n' \
    "$P" "$((P + 1))" "$TMP/cert.pem" "$TMP/key.pem" "$TMP/www" > "$TMP/user.conf"
  chmod 600 "$TMP/key.pem"
  start_config "$TMP/user.conf" "$P"
  uid=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$DPID/status")
  gid=$(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$DPID/status")
  nob=$(id -u nobody)
  tls=$(curl -s -k "https://127.0.0.1:$((P + 1))/index.html")
  [ "$uid" = "$nob $nob $nob $nob" ] && [ "$tls" = '<h1>h2park test</h1>' ] && grep -q 'running as user nobody' "$TMP/daemon.log"
  check user_drops_root_after_key $? "uid $uid gid $gid; tls: $tls; $(cat "$TMP/daemon.log")"
  # Reloads read as the user: the key only root may read cannot be read again, and the
  # running configuration carries on.
  reload_and_wait
  grep -q "reload failed.*cannot load key $TMP/key.pem: .*Permission denied" "$TMP/daemon.log" &&
    [ "$(code "$P" /index.html)" = 200 ]
  check user_reload_reads_as_user $? "$(tail -2 "$TMP/daemon.log")"
  stop_daemon
else
  echo "ok user_drops_root_after_key # SKIP not root, or no user nobody"
fi

# make install-daemon, into a prefix of our own (and staged under DESTDIR).
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory install-daemon BUILD="$BUILD" SAN="${SAN:-0}" \
  PREFIX="$TMP/prefix" >"$TMP/install.log" 2>&1
check install_daemon $? "$(tail -5 "$TMP/install.log")"
U="$TMP/prefix/lib/systemd/system"
for f in sbin/h2park etc/h2park/h2park.conf share/man/man8/h2park.8 share/h2park/www/index.html \
  lib/systemd/system/h2park.service lib/systemd/system/h2park.socket; do
  [ -f "$TMP/prefix/$f" ] || echo "missing $f" >> "$TMP/missing"
done
[ ! -f "$TMP/missing" ] && grep -qx "root = $TMP/prefix/share/h2park/www" "$TMP/prefix/etc/h2park/h2park.conf" &&
  grep -qx "ExecStart=$TMP/prefix/sbin/h2park -c $TMP/prefix/etc/h2park/h2park.conf" "$U/h2park.service"
check install_daemon_files $? "$(cat "$TMP/missing" 2>/dev/null; grep -E '^root|ExecStart' "$TMP/prefix/etc/h2park/h2park.conf" "$U/h2park.service")"
out=$(MANPATH="$TMP/prefix/share/man" systemd-analyze verify "$U/h2park.service" "$U/h2park.socket" 2>&1); rc=$?
[ $rc = 0 ] && [ -z "$out" ]; check units_verify $? "exit $rc: $out"
for d in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes LimitNOFILE=1048576 Type=notify CapabilityBoundingSet=; do
  grep -qx "$d" "$U/h2park.service" || echo "$d" >> "$TMP/nohard"
done
[ ! -f "$TMP/nohard" ]; check unit_hardened $? "missing: $(cat "$TMP/nohard" 2>/dev/null)"
out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$TMP/prefix/share/man/man8/h2park.8" 2>&1)
[ -z "$out" ]; check man_page_renders_cleanly $? "$out"
LC_ALL=C.UTF-8 groff -man -Tutf8 -P-cbou "$TMP/prefix/share/man/man8/h2park.8" > "$TMP/man.txt" 2>&1
for key in $(sed -n 's/^#* *\([a-z_]*\) = .*/\1/p' config/default.conf | sort -u) proxy_protocol LISTEN_FDS NOTIFY_SOCKET SIGHUP; do
  grep -q "$key" "$TMP/man.txt" || echo "$key" >> "$TMP/unmentioned"
done
[ ! -f "$TMP/unmentioned" ] && grep -q 'H2PARK(8)' "$TMP/man.txt"
check man_page_names_every_setting $? "not in the manual: $(cat "$TMP/unmentioned" 2>/dev/null | tr '\n' ' ')"
# The installed configuration, as installed, serves the installed page.
if in_netns true 2>/dev/null; then
  in_netns "'$TMP/prefix/sbin/h2park' -c '$TMP/prefix/etc/h2park/h2park.conf' >'$TMP/installed.log' 2>&1 & p=\$!
    for i in \$(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:8080/-/healthz && break; sleep 0.1; done
    curl -s http://127.0.0.1:8080/index.html > '$TMP/installed.out'; kill -TERM \$p; wait \$p"
  cmp -s "$TMP/installed.out" www/index.html; check installed_config_serves $? "$(cat "$TMP/installed.log")"
fi
# An edited configuration survives another install; a staged install keeps the prefix.
echo '# edited' >> "$TMP/prefix/etc/h2park/h2park.conf"
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory install-daemon BUILD="$BUILD" SAN="${SAN:-0}" \
  PREFIX="$TMP/prefix" >"$TMP/install.log" 2>&1
tail -1 "$TMP/prefix/etc/h2park/h2park.conf" | grep -qx '# edited'; check install_keeps_edited_config $? "overwritten"
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s --no-print-directory install-daemon BUILD="$BUILD" SAN="${SAN:-0}" \
  PREFIX=/usr/local DESTDIR="$TMP/stage" >"$TMP/stage.log" 2>&1
grep -qx 'ExecStart=/usr/local/sbin/h2park -c /usr/local/etc/h2park/h2park.conf' "$TMP/stage/usr/local/lib/systemd/system/h2park.service" &&
  [ -x "$TMP/stage/usr/local/sbin/h2park" ]
check staged_install_keeps_prefix $? "$(cat "$TMP/stage.log"; find "$TMP/stage" -type f | head)"
