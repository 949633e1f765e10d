#!/bin/bash
# Paths in a configuration file are the file's: a relative root, alias, cert, key, CA
# file or access log is taken from the directory of the file that names it, whatever
# directory h2park starts in, at start, by --check (which prints each path as it will
# be opened) and on a reload; the embedded default's ./www and the command line's paths
# are the working directory's.  A file's site without a root serves no files: what no
# location, proxy or built-in route answers is 404, never a file of ./www.
. "$(dirname "$0")/lib.sh"
make_site
ABS_H2PARK=$(cd "$(dirname "$H2PARK")" && pwd)/$(basename "$H2PARK")
mkdir -p "$TMP/conf/www" "$TMP/conf/www2" "$TMP/conf/tls" "$TMP/conf/assets" "$TMP/elsewhere/www"
printf 'conf www\n' > "$TMP/conf/www/index.html"
printf 'conf www2\n' > "$TMP/conf/www2/index.html"
printf 'conf asset\n' > "$TMP/conf/assets/a.css"
printf 'elsewhere www\n' > "$TMP/elsewhere/www/index.html"
printf 'only in the working directory\n' > "$TMP/elsewhere/www/only-here.txt"
cp "$TMP/cert.pem" "$TMP/key.pem" "$TMP/conf/tls/"
P=$(free_port); T=$(free_port)
C=$TMP/conf/h2park.conf
conf() { # conf ROOT: the test's file, every path in it relative
  printf '%s\n' "listen = 127.0.0.1:$P" "listen = 127.0.0.1:$T tls" "root = $1" "cert = tls/cert.pem" "key = ./tls/key.pem" \
    "access_log = access.log" "workers = 1" "location /assets/ {" "    alias = assets/" "}" "location /up/ {" \
    "    proxy_pass = https://127.0.0.1:1" "    proxy_ssl_trusted_certificate = tls/cert.pem" "}"
}
# start_in DIR ARGS...: the daemon started in DIR (sets DPID), up once $P answers.
start_in() {
  local dir=$1 i; shift
  (cd "$dir" && exec "$ABS_H2PARK" "$@") > "$TMP/daemon.log" 2>&1 &
  DPID=$!; PIDS="$PIDS $DPID"
  for i in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$P/-/healthz" && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
  done
  echo "could not start the daemon:" >&2; cat "$TMP/daemon.log" >&2; return 1
}
host_get() { curl -s -m 5 -H "Host: $2" "http://127.0.0.1:$P$1"; }
host_code() { curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Host: $2" "http://127.0.0.1:$P$1"; }

conf www > "$C"
# --check names every path as it will be opened, "configuration ok" last.
out=$(cd "$TMP/elsewhere" && "$ABS_H2PARK" -c ../conf/h2park.conf --check 2>/dev/null); rc=$?
R=../conf/h2park.conf               # (lines are named by the file as given)
[ $rc = 0 ] && [ "$(echo "$out" | tail -1)" = "configuration ok" ] &&
  echo "$out" | grep -qF "site * (the top level): root $TMP/conf/www ($R:3); cert $TMP/conf/tls/cert.pem ($R:4), key $TMP/conf/tls/key.pem ($R:5)" &&
  echo "$out" | grep -qF "  location /assets/ ($R:8): alias $TMP/conf/assets ($R:9)" &&
  echo "$out" | grep -qF "proxy_ssl_trusted_certificate $TMP/conf/tls/cert.pem ($R:13)" &&
  echo "$out" | grep -qxF "access_log $TMP/conf/access.log ($R:6)"
check check_prints_resolved_paths $? "exit $rc: $out"

# Started elsewhere, by a relative -c: the file's directory is where its paths are.
start_in "$TMP/elsewhere" -c ../conf/h2park.conf || fail relative_paths_start "see above"
tls=$(curl -s -m 5 --cacert "$TMP/cert.pem" --resolve "localhost:$T:127.0.0.1" "https://localhost:$T/")
[ "$(get "$P" /)" = "conf www" ] && [ "$(get "$P" /assets/a.css)" = "conf asset" ] && [ "$tls" = "conf www" ] &&
  [ "$(get "$P" /only-here.txt)" != "only in the working directory" ] && grep -q 'GET /assets/a.css' "$TMP/conf/access.log"
check relative_paths_from_config_directory $? "/: $(get "$P" /), tls: $tls, log: $(ls "$TMP/conf" "$TMP/elsewhere")"
conf www2 > "$C"
reload_and_wait
[ "$(get "$P" /)" = "conf www2" ]; check reload_resolves_relative_paths_the_same $? "$(get "$P" /): $(tail -3 "$TMP/daemon.log")"
stop_daemon

# A site without root (nor one at the top level) serves no files: ./www of the working
# directory is not its root.
printf '%s\n' "listen = 127.0.0.1:$P" "site files.test {" "    root = www" "}" "site bare.test {" "    location = /hello {" \
  "        return = 200 hi" "    }" "}" > "$TMP/conf/noroot.conf"
start_in "$TMP/elsewhere" -c "$TMP/conf/noroot.conf" || fail site_without_root_start "see above"
codes="$(host_code /only-here.txt bare.test) $(host_code / bare.test) $(host_code /index.html bare.test)"
[ "$codes" = "404 404 404" ] && [ "$(host_get /hello bare.test)" = hi ] && [ "$(host_code /-/healthz bare.test)" = 200 ] &&
  [ "$(host_get / files.test)" = "conf www" ] && [ "$(host_code /only-here.txt files.test)" = 404 ]
check site_without_root_serves_no_files $? "bare.test: $codes, /hello $(host_get /hello bare.test); files.test: $(host_get / files.test)"
stop_daemon
printf '%s\n' "listen = 127.0.0.1:$P" > "$TMP/conf/bare.conf"
start_in "$TMP/elsewhere" -c "$TMP/conf/bare.conf" || fail file_without_root_start "see above"
codes="$(code "$P" /only-here.txt) $(code "$P" /) $(code "$P" /-/healthz)"
[ "$codes" = "404 404 200" ]; check file_without_root_serves_no_files $? "$codes"
stop_daemon

# The embedded default (no -c) serves ./www of the directory it starts in; the command
# line's relative paths are that directory's too.
start_in "$TMP/elsewhere" --listen "127.0.0.1:$P" || fail embedded_default_start "see above"
[ "$(get "$P" /only-here.txt)" = "only in the working directory" ]
check embedded_default_serves_working_directory_www $? "$(get "$P" /only-here.txt)"
stop_daemon
start_in "$TMP/elsewhere" -c "$TMP/conf/bare.conf" --root www || fail command_line_root_start "see above"
[ "$(get "$P" /only-here.txt)" = "only in the working directory" ]
check command_line_root_from_working_directory $? "$(get "$P" /only-here.txt)"
stop_daemon
