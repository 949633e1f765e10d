#!/bin/bash
# The configuration file as hostile input, and a configuration as one tree: every error
# of a file is reported at once (file:line each) before exit 2, at start and by --check,
# the ones found only by opening things (roots, certificates) too; a key given twice
# names both lines; a certificate that does not match its key names both config lines;
# garbage, NUL bytes, endless lines and unclosed sections are errors, not crashes; two
# thousand sites parse and route; --print-default-config is a working start; and a
# reload swaps the whole tree at once - a request in flight finishes on the tree it began
# under, a TLS connection from before a reload keeps working on the new one; and what is
# no regular file (a FIFO) named as a certificate, key, CA file, log or config file is an
# error at once, at --check and on a reload, never a wait.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
ABS_H2PARK=$(cd "$(dirname "$H2PARK")" && pwd)/$(basename "$H2PARK")
make_site
C=$TMP/h2park.conf
errors_of() { # errors_of ARGS...: the daemon's output in OUT, its exit status in RC
  timeout 20 "$H2PARK" "$@" >"$TMP/err.out" 2>&1; RC=$?
  OUT=$(cat "$TMP/err.out")
}

cat > "$C" <<EOF
workers = many
root = $TMP/www
listen = 127.0.0.1:1
bogus = 1
root = $TMP/www
site a.test {
    location /x {
        max_body_size = lots
    }
EOF
errors_of -c "$C" --check; out=$OUT
want="h2park: $C:1: workers: 'many' is not a worker count (1..1024 or auto)
h2park: $C:4: unknown key 'bogus'
h2park: $C:5: 'root' given twice at the top level (first at $C:2)
h2park: $C:8: max_body_size: 'lots' is not a size (bytes, or with k, m, g; 0: no limit)
h2park: $C:6: site opened here is not closed with '}'"
[ $RC = 2 ] && [ "$out" = "$want" ]; check every_error_reported_at_once $? "exit $RC: $out"
errors_of -c "$C"; out=$OUT; [ $RC = 2 ] && [ "$(echo "$out" | wc -l)" = 5 ]; check every_error_at_start_too $? "exit $RC: $out"

# What only opening finds, for every site at once.
printf 'listen = 127.0.0.1:1\nsite a.test {\n    root = %s/none-a\n}\nsite b.test {\n    root = %s/none-b\n}\n' "$TMP" "$TMP" > "$C"
errors_of -c "$C" --check; out=$OUT
[ $RC = 2 ] && echo "$out" | grep -qF "root $TMP/none-a ($C:3): No such file or directory" &&
  echo "$out" | grep -qF "root $TMP/none-b ($C:6): No such file or directory"
check check_reports_every_missing_root $? "exit $RC: $out"

# Certificates: a key that is not the certificate's names both lines; a second
# certificate of one key type for the same sites names both.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/other.key" -out "$TMP/other.pem" \
  -days 2 -subj /CN=other >/dev/null 2>&1
P=$(free_port)
printf 'listen = 127.0.0.1:%s tls\nroot = %s/www\ncert = %s/cert.pem\nkey = %s/other.key\n' "$P" "$TMP" "$TMP" "$TMP" > "$C"
errors_of -c "$C" --check; out=$OUT
[ $RC = 2 ] && echo "$out" | grep -qF "$C:4: key $TMP/other.key does not match the certificate $TMP/cert.pem ($C:3)"
check cert_key_mismatch_names_both_lines $? "exit $RC: $out"
printf 'listen = 127.0.0.1:%s tls\nroot = %s/www\ncert = %s/cert.pem\nkey = %s/key.pem\ncert = %s/other.pem\nkey = %s/other.key\n' \
  "$P" "$TMP" "$TMP" "$TMP" "$TMP" "$TMP" > "$C"
errors_of -c "$C" --check; out=$OUT
[ $RC = 2 ] && echo "$out" | grep -qF "$C:5: a second ECDSA certificate for the same sites (the first is at $C:3)"
check second_certificate_of_one_type_names_both $? "exit $RC: $out"
printf 'listen = 127.0.0.1:%s tls\nroot = %s/www\ncert = %s/nothere.pem\nkey = %s/key.pem\n' "$P" "$TMP" "$TMP" "$TMP" > "$C"
errors_of -c "$C" --check; out=$OUT; [ $RC = 2 ] && echo "$out" | grep -qF "$C:3: cannot load certificate $TMP/nothere.pem"
check unreadable_certificate_names_its_line $? "exit $RC: $out"

# Garbage: every one an error with its line, none a crash.
{ printf 'root = %s/www\n' "$TMP"; printf 'listen = 127.0.0.1:1\n'; printf 'key\0= value\n'; head -c 3000 /dev/zero | tr '\0' x; echo
  for i in $(seq 1 50); do echo "site s$i.test {"; done
  printf '}\n}}\n= value\n==\nsite {\nlocation {\n'; head -c 2000 /dev/urandom | tr -d '\n' | head -c 1500; echo; } > "$C"
errors_of -c "$C" --check; out=$OUT
[ $RC = 2 ] && echo "$out" | grep -q "$C:3: a NUL byte" && echo "$out" | grep -q "$C:4: line too long" &&
  ! echo "$out" | grep -qv "^h2park: $C:[0-9]*: "
check garbage_is_errors_with_lines $? "exit $RC: $(echo "$out" | head -5)"

# Two thousand sites: parsed, checked, and each found by its name.
{ printf 'listen = 127.0.0.1:%s\n' "$P"
  for i in $(seq 1 2000); do printf 'site s%d.test *.s%d.test {\n    root = %s/www\n    header = X-Site: %d\n}\n' "$i" "$i" "$TMP" "$i"; done
} > "$C"
t0=$(date +%s.%N)
start_config "$C" "$P" || fail many_sites_start "see above"
echo "# two thousand sites: answering after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
got=$(curl -s -o /dev/null -D - -H 'Host: x.s1999.test' "http://127.0.0.1:$P/" | tr -d '\r' | sed -n 's/^x-site: //Ip')
[ "$got" = 1999 ]; check two_thousand_sites $? "x-site '$got'"
stop_daemon

# The embedded default as printed is a working start.
"$H2PARK" --print-default-config > "$C"
out=$(cd "$TMP" && "$ABS_H2PARK" -c "$C" --check --listen "127.0.0.1:$P" 2>&1); [ "$out" = "configuration ok" ] ||
  echo "$out" | grep -q 'configuration ok'
check printed_default_config_checks $? "$out"

# A reload swaps the whole tree: a request in flight finishes on its own (its location's
# header from before), the next gets the new one; a TLS connection made before it is
# served after it.
T=$(free_port)
while [ "$T" = "$P" ]; do T=$(free_port); done
gen() { # gen N: the configuration of generation N
  printf 'listen = 127.0.0.1:%s\nlisten = 127.0.0.1:%s tls\ncert = %s/cert.pem\nkey = %s/key.pem\nroot = %s/www\n' "$P" "$T" "$TMP" "$TMP" "$TMP"
  printf 'site localhost {\n    header = always X-Gen: %s\n    location /slow/ {\n        handler = delay\n    }\n}\n' "$1"
  printf 'site other.test {\n    return = 200 "other %s"\n}\n' "$1"
}
gen 1 > "$C"
start_config "$C" "$P" || fail reload_daemon_starts "see above"
curl -s -D "$TMP/slow.h" -o /dev/null -H 'Host: localhost' "http://127.0.0.1:$P/slow/?ms=1500" &
SLOW=$!
H2_PAUSE=2 timeout 20 $PY "$(dirname "$0")/h2coalesce.py" "$T" localhost "$TMP/cert.pem" localhost localhost > "$TMP/h2.out" 2>&1 &
H2=$!
# A connection accepted before the reload whose ClientHello comes after the old tree is
# gone: the server-name callback must not read the freed tree (ASan: use after free).
rm -f "$TMP/go"
$PY - "$T" "$TMP/go" > "$TMP/late.out" 2>&1 <<'PYEOF' &
import os, socket, ssl, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for _ in range(200):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.05)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
t = ctx.wrap_socket(s, server_hostname="other.test")
t.sendall(b"GET / HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
got = b""
while True:
    b = t.recv(4096)
    if not b:
        break
    got += b
print(got.decode(errors="replace").split("\r\n\r\n", 1)[-1])
PYEOF
LATE=$!
sleep 0.5
gen 2 > "$C"
reload_and_wait
wait "$SLOW"
new=$(curl -s -D - -o /dev/null -H 'Host: localhost' "http://127.0.0.1:$P/slow/?ms=1" | tr -d '\r' | sed -n 's/^x-gen: //Ip')
[ "$(tr -d '\r' < "$TMP/slow.h" | sed -n 's/^x-gen: //Ip')" = 1 ] && [ "$new" = 2 ] &&
  [ "$(curl -s -H 'Host: other.test' "http://127.0.0.1:$P/")" = "other 2" ]
check reload_in_flight_finishes_on_its_tree $? "in flight: $(tr -d '\r' < "$TMP/slow.h" | grep -i x-gen), after: $new"
wait "$H2"
[ "$(grep -c '^localhost 200' "$TMP/h2.out")" = 2 ] && grep -qx 'connections 1' "$TMP/h2.out"
check reload_keeps_tls_connection $? "$(tr '\n' ';' < "$TMP/h2.out")"
sleep 1.5                          # every worker has taken the new tree and let the old go
touch "$TMP/go"; wait "$LATE"
[ "$(cat "$TMP/late.out")" = "other 2" ] && kill -0 "$DPID"
check reload_before_client_hello $? "$(cat "$TMP/late.out")"
# A bad reload changes nothing, anywhere.
printf 'site x {\n' >> "$C"
reload_and_wait
[ "$(curl -s -H 'Host: other.test' "http://127.0.0.1:$P/")" = "other 2" ] &&
  grep -q "reload failed, the running configuration stays: $C:.*: site opened here is not closed" "$TMP/daemon.log"
check reload_bad_tree_keeps_all $? "$(tail -2 "$TMP/daemon.log")"
stop_daemon

# Files that are not regular files - a FIFO, a directory, a character device - named as a
# certificate, a key, a CA file, a client certificate upstream, the access log or the
# configuration itself: an error naming the line, at once; never a wait on them (a FIFO
# held --check, and the daemon's main thread after a SIGHUP, for good).
mkfifo "$TMP/fifo"
P=$(free_port); T=$(free_port)
not_a_file() { # not_a_file NAME WANT LINE...: --check of these lines exits 2 at once, saying WANT
  local name=$1 want=$2 t0=$SECONDS; shift 2
  printf '%s\n' "listen = 127.0.0.1:$T tls" "root = $TMP/www" "$@" > "$C"
  errors_of -c "$C" --check
  [ $RC = 2 ] && echo "$OUT" | grep -qF -- "$want" && [ $((SECONDS - t0)) -lt 5 ]
  check "$name" $? "exit $RC after $((SECONDS - t0)) s: $OUT"
}
not_a_file fifo_as_cert "$C:3: cannot load certificate $TMP/fifo: a FIFO, not a regular file" "cert = $TMP/fifo" "key = $TMP/key.pem"
not_a_file fifo_as_key "$C:4: cannot load key $TMP/fifo: a FIFO, not a regular file" "cert = $TMP/cert.pem" "key = $TMP/fifo"
not_a_file fifo_as_ca "$C:5: proxy_ssl_trusted_certificate $TMP/fifo: cannot load: a FIFO, not a regular file" \
  "location /x/ {" "proxy_pass = https://127.0.0.1:1" "proxy_ssl_trusted_certificate = $TMP/fifo" "}"
not_a_file fifo_as_upstream_client_cert "$C:5: proxy_ssl_certificate $TMP/fifo: cannot load: a FIFO" \
  "location /x/ {" "proxy_pass = https://127.0.0.1:1" "proxy_ssl_certificate = $TMP/fifo" "proxy_ssl_certificate_key = $TMP/key.pem" "}"
not_a_file fifo_as_access_log "$C:3: access_log $TMP/fifo: a FIFO that no process reads (h2park does not wait for one)" \
  "access_log = $TMP/fifo"
not_a_file directory_as_cert "$C:3: cannot load certificate $TMP/www: a directory, not a regular file" "cert = $TMP/www" "key = $TMP/key.pem"
not_a_file device_as_key "$C:4: cannot load key /dev/null: a character device, not a regular file" "cert = $TMP/cert.pem" "key = /dev/null"
not_a_file directory_as_access_log "$C:3: access_log $TMP/www: Is a directory" "access_log = $TMP/www"
t0=$SECONDS; errors_of -c "$TMP/fifo" --check
[ $RC = 2 ] && [ "$OUT" = "h2park: $TMP/fifo: cannot read: a FIFO, not a regular file" ] && [ $((SECONDS - t0)) -lt 5 ]
check fifo_as_config_file $? "exit $RC after $((SECONDS - t0)) s: $OUT"
# A FIFO some process reads is a log like any other (/dev/stdout in a container).
printf '%s\n' "listen = 127.0.0.1:$T tls" "root = $TMP/www" "access_log = $TMP/fifo" > "$C"
timeout 10 cat "$TMP/fifo" > /dev/null & READER=$!; PIDS="$PIDS $READER"
sleep 0.2
errors_of -c "$C" --check; wait "$READER"
[ $RC = 0 ] && echo "$OUT" | grep -q 'configuration ok'; check fifo_with_a_reader_as_access_log $? "exit $RC: $OUT"

# A SIGHUP naming a FIFO keeps the running configuration and says why; the next good one
# applies, and SIGTERM stops the daemon.
good() { printf '%s\n' "listen = 127.0.0.1:$P" "listen = 127.0.0.1:$T tls" "root = $TMP/www" "cert = $TMP/cert.pem" \
           "key = $TMP/key.pem" "header = always X-Gen: $1"; }
good 1 > "$C"
start_config "$C" "$P" || fail fifo_reload_daemon_starts "see above"
{ good 2; echo "access_log = $TMP/fifo"; } > "$C"; reload_and_wait; r1=$?
good 3 | sed "s|^cert = .*|cert = $TMP/fifo|" > "$C"; reload_and_wait; r2=$?
gen=$(curl -s -o /dev/null -D - "http://127.0.0.1:$P/" | tr -d '\r' | sed -n 's/^x-gen: //Ip')
[ $r1 = 0 ] && [ $r2 = 0 ] && [ "$gen" = 1 ] &&
  grep -qF "reload failed, the running configuration stays: $C:7: access_log $TMP/fifo: a FIFO that no process reads" "$TMP/daemon.log" &&
  grep -qF "reload failed, the running configuration stays: $C:4: cannot load certificate $TMP/fifo: a FIFO" "$TMP/daemon.log"
check fifo_reload_keeps_running_config $? "reloads $r1 $r2, X-Gen $gen: $(grep 'reload failed' "$TMP/daemon.log")"
good 4 > "$C"; reload_and_wait
gen=$(curl -sk -o /dev/null -D - "https://127.0.0.1:$T/" | tr -d '\r' | sed -n 's/^x-gen: //Ip')
[ "$gen" = 4 ]; check fifo_reload_then_good_reload_applies $? "X-Gen $gen: $(tail -3 "$TMP/daemon.log")"
kill -TERM "$DPID"
for i in $(seq 1 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$DPID" 2>/dev/null; check fifo_reload_then_sigterm_stops $? "still running 10 s after SIGTERM"
