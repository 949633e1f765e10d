#!/bin/bash
# The two-site migration of docs/from-nginx.md, run: nginx with
# config/examples/from-nginx/nginx.conf and h2park with config/examples/from-nginx/h2park.conf,
# side by side on their own ports, the same trees and certificates, the same requests from
# curl; every answer compared - status, Location, the headers either adds (Cache-Control,
# Strict-Transport-Security, X-Content-Type-Options, Access-Control-Allow-Origin) and the
# body - and the certificate each offers for each name.  Where the two differ by design,
# the comparison says so: h2park's https_redirect is 308 where nginx's return is 301, and
# names the TLS port when it is not 443 (here it never is).
. "$(dirname "$0")/lib.sh"
command -v nginx >/dev/null || { echo "ok from_nginx # SKIP nginx not installed"; exit 0; }
EX=$(dirname "$0")/../config/examples/from-nginx
D=$TMP/mig
mkdir -p "$D"/docs/{assets,.git} "$D"/app/{plans,api,admin} "$D/ssl" "$TMP/nginx"
chmod 755 "$TMP"                 # nginx's workers run as another user
printf '<h1>docs</h1>\n' > "$D/docs/index.html"
printf 'body{}\n' > "$D/docs/assets/style.css"
printf '<h1>not found in the docs</h1>\n' > "$D/docs/404.html"
printf '[core]\n' > "$D/docs/.git/config"
printf '<h1>app shell</h1>\n' > "$D/app/index.html"
printf '<h1>plans</h1>\n' > "$D/app/plans/index.html"
printf '{"ok":true}\n' > "$D/app/api/status.json"
printf 'admin\n' > "$D/app/admin/index.html"
printf 'SECRET=1\n' > "$D/app/.env"
chmod -R a+rX "$D"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$D/ssl/ca.key" -out "$D/ssl/ca.pem" -days 2 \
  -subj /CN=migration-ca -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1
for name in docs.example.com app.example.com; do
  san="DNS:$name"; [ $name = app.example.com ] && san="$san,DNS:www.app.example.com"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$D/ssl/$name.key" -out "$D/ssl/$name.csr" \
    -subj "/CN=$name" >/dev/null 2>&1
  printf 'subjectAltName=%s\n' "$san" > "$D/ssl/$name.ext"
  openssl x509 -req -in "$D/ssl/$name.csr" -CA "$D/ssl/ca.pem" -CAkey "$D/ssl/ca.key" -CAcreateserial -out "$D/ssl/$name.pem" \
    -days 2 -extfile "$D/ssl/$name.ext" >/dev/null 2>&1
done
chmod a+r "$D"/ssl/*
ports=""
while [ "$(echo $ports | wc -w)" -lt 4 ]; do
  p=$(free_port); case " $ports " in *" $p "*) ;; *) ports="$ports $p" ;; esac
done
set -- $ports; NP=$1 NT=$2 HP=$3 HT=$4
sed -e "s|listen 80;|listen 127.0.0.1:$NP;|" -e "s|listen 443 ssl http2;|listen 127.0.0.1:$NT ssl http2;|" \
    -e "s|/srv/|$D/|g" -e "s|/etc/ssl/|$D/ssl/|g" \
    -e "s|^http {|daemon off;\\npid $TMP/nginx/nginx.pid;\\nerror_log $TMP/nginx/error.log;\\nhttp {\\n    access_log off;\\n    client_body_temp_path $TMP/nginx; proxy_temp_path $TMP/nginx; fastcgi_temp_path $TMP/nginx;\\n    uwsgi_temp_path $TMP/nginx; scgi_temp_path $TMP/nginx;|" \
    "$EX/nginx.conf" > "$TMP/nginx/nginx.conf"
sed -e "s|listen = \*:80$|listen = 127.0.0.1:$HP|" -e "s|listen = \*:443 tls|listen = 127.0.0.1:$HT tls|" \
    -e "s|/srv/|$D/|g" -e "s|/etc/ssl/|$D/ssl/|g" "$EX/h2park.conf" > "$TMP/h2park.conf"
nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" >/dev/null 2>&1 & NG=$!; PIDS="$PIDS $NG"
start_config "$TMP/h2park.conf" "$HP" || { fail from_nginx_h2park_starts "see above"; exit 1; }
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$NP/" && break; sleep 0.1; done

# answer SERVER SCHEME HOST PATH [curl args]: "status|location|headers|body-sha", ports taken
# out of the Location.
answer() {
  local server=$1 scheme=$2 host=$3 path=$4; shift 4
  local port; port=$([ "$server" = nginx ] && { [ "$scheme" = http ] && echo $NP || echo $NT; } || { [ "$scheme" = http ] && echo $HP || echo $HT; })
  local out; out=$(curl -s -m 5 -D "$TMP/h" -o "$TMP/b" --cacert "$D/ssl/ca.pem" --resolve "$host:$port:127.0.0.1" "$@" \
    -w '%{http_code}' "$scheme://$host:$port$path")
  local loc; loc=$(tr -d '\r' < "$TMP/h" | sed -n 's/^location: //Ip' | sed -e "s|:$NT/|/|" -e "s|:$HT/|/|")
  local hs; hs=$(tr -d '\r' < "$TMP/h" | grep -iE '^(cache-control|strict-transport-security|x-content-type-options|access-control-allow-origin):' |
    tr 'A-Z' 'a-z' | sort | tr '\n' ';')
  # The bodies of answers the server makes up itself (redirects, errors without an
  # error_page) are each server's own words: compared only for files.
  local body=-; case $out in 2*) body=$(sha256sum < "$TMP/b" | cut -c1-12) ;; esac
  [ "$BODY" = 1 ] && body=$(sha256sum < "$TMP/b" | cut -c1-12)
  echo "$out|$loc|$hs|$body"
}
compare() { # compare NAME SCHEME HOST PATH [curl args]
  local name=$1; shift
  local n h; n=$(answer nginx "$@"); h=$(answer h2park "$@")
  [ "$1" = http ] && n=${n/#301|/308|}     # https_redirect is 308, nginx's return 301
  [ "$n" = "$h" ]; check "from_nginx_$name" $? "nginx: $n; h2park: $h"
}
compare http_docs_to_https http docs.example.com '/a/b?x=1'
compare http_app_to_https http app.example.com /plans/
compare http_www_to_https http www.app.example.com /
compare docs_index https docs.example.com /
compare docs_asset_cache_control https docs.example.com /assets/style.css
BODY=1 compare docs_custom_404 https docs.example.com /nope.html
compare docs_dotfile_403 https docs.example.com /.git/config
compare app_index_headers https app.example.com /
compare app_directory_index https app.example.com /plans/
compare app_redirect_exact https app.example.com /pricing.html
compare app_redirect_prefix_with_uri https app.example.com '/blog/post-1?ref=feed'
compare app_api_cors https app.example.com /api/status.json
compare app_api_missing_404 https app.example.com /api/missing
compare app_spa_fallback https app.example.com /deep/link/7
compare app_admin_403 https app.example.com /admin/
compare app_dotfile_403 https app.example.com /.env
compare www_to_bare https www.app.example.com '/x?y=1'
head -c 2000000 /dev/zero > "$TMP/big"
# (over HTTP/1.1: curl 7.88 takes the RST_STREAM(NO_ERROR) that HTTP/2 sends after an early
# answer, RFC 9113 8.1, for a failed transfer)
compare app_body_limit_413 https app.example.com /upload --http1.1 --data-binary @"$TMP/big"
# The certificate each offers for each name.
cns() { # cns PORT: the subject CN for each name
  for n in docs.example.com app.example.com www.app.example.com; do
    echo | timeout 5 openssl s_client -connect "127.0.0.1:$1" -servername "$n" 2>/dev/null | openssl x509 -noout -subject 2>/dev/null
  done | tr '\n' ';'
}
a=$(cns $NT); b=$(cns $HT)
[ "$a" = "$b" ] && echo "$b" | grep -q 'CN = docs.example.com;.*CN = app.example.com;.*CN = app.example.com'
check from_nginx_certificates_by_sni $? "nginx: $a; h2park: $b"
kill "$NG" 2>/dev/null; wait "$NG" 2>/dev/null
stop_daemon
