#!/bin/bash
# Sites and locations with real clients: sites by Host (curl --resolve, --connect-to) and
# by SNI with their own certificates (openssl s_client -servername; an ECDSA and an RSA
# certificate for one name), the default site of a listener, 421 on a connection reused
# for a name its certificate does not cover (python3-h2, curl over HTTP/1.1), headless
# Chromium on two sites over TLS; locations: exact and prefix, alias, index, return with
# variables, added headers (on 304, not on 404 unless "always"), allow/deny over IPv4,
# IPv6 and a dual-stack socket's mapped addresses (403), body limits (413, HTTP/1.1 and
# HTTP/2, with and without a length), error pages, dotfiles, directory listing, a
# single-page app's fallback, built-in routes placed and restricted, https_redirect, a
# WebSocket handshake nothing takes (400) - and the hostile spellings of hosts and paths
# that try to get around them.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3       # Debian's (python3-h2), not whatever python3 comes first on PATH
make_site
D=$TMP/sites
mkdir -p "$D"/{a/assets,a/.well-known,a/.git,b,c,default,shared/sub,spa,hidden/x}
printf 'site a\n' > "$D/a/index.html"
printf 'body{}\n' > "$D/a/assets/x.css"
printf 'custom 404 of a\n' > "$D/a/404.html"
printf 'office\n' > "$D/a/office.txt"; mkdir -p "$D/a/office"; printf 'office\n' > "$D/a/office/plan.txt"
printf 'SECRET=1\n' > "$D/a/.env"; printf '[core]\n' > "$D/a/.git/config"
printf 'Contact: mailto:a@a.test\n' > "$D/a/.well-known/security.txt"
printf 'site b\n' > "$D/b/index.html"; printf 'b text\n' > "$D/b/b.txt"
printf 'site c\n' > "$D/c/index.html"; printf 'c text\n' > "$D/c/c.txt"
printf 'default site\n' > "$D/default/index.html"
printf 'one\n' > "$D/shared/one.txt"; printf 'x\n' > "$D/shared/<i>&\"q\".txt"; printf 'h\n' > "$D/shared/.hidden"
printf 'spa shell\n' > "$D/spa/index.html"; printf 'js\n' > "$D/spa/app.js"
printf 'dot\n' > "$D/hidden/x/.dot"
touch -d '-1 hour' "$D"/a/assets/x.css

# A CA and certificates from it: a.test (ECDSA, and RSA; both also cover c.test),
# b.test with *.b.test, c.test of its own.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$D/ca.key" -out "$D/ca.pem" -days 2 \
  -subj /CN=h2park-test-ca -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign >/dev/null 2>&1
leaf() { # leaf NAME SAN KEYARGS...
  local name=$1 san=$2; shift 2
  openssl req -newkey "$@" -nodes -keyout "$D/$name.key" -out "$D/$name.csr" -subj "/CN=${name%-*}" >/dev/null 2>&1
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" > "$D/$name.ext"
  openssl x509 -req -in "$D/$name.csr" -CA "$D/ca.pem" -CAkey "$D/ca.key" -CAcreateserial -out "$D/$name.pem" -days 2 \
    -extfile "$D/$name.ext" >/dev/null 2>&1
}
leaf a.test-ec "DNS:a.test,DNS:c.test" ec -pkeyopt ec_paramgen_curve:P-256
leaf a.test-rsa "DNS:a.test,DNS:c.test" rsa:2048
leaf b.test "DNS:b.test,DNS:*.b.test" ec -pkeyopt ec_paramgen_curve:P-256
leaf c.test "DNS:c.test" ec -pkeyopt ec_paramgen_curve:P-256

ports=""
while [ "$(echo $ports | wc -w)" -lt 4 ]; do
  p=$(free_port); case " $ports " in *" $p "*) ;; *) ports="$ports $p" ;; esac
done
set -- $ports; P=$1 T=$2 P6=$3 PD=$4
cat > "$D/h2park.conf" <<EOF
listen = 127.0.0.1:$P
listen = 127.0.0.1:$T tls
listen = [::1]:$P6
listen = *:$PD
access_log = $TMP/access.log
workers = 2

site a.test {
    root = $D/a
    cert = $D/a.test-ec.pem
    key = $D/a.test-ec.key
    cert = $D/a.test-rsa.pem
    key = $D/a.test-rsa.key
    header = Strict-Transport-Security: max-age=63072000
    error_page = 404 /404.html
    location /assets/ {
        header = Cache-Control: public, max-age=86400
    }
    location = /old {
        return = 301 https://\$host/new?from=\$uri&\$args
    }
    location = /hello {
        return = 200 "hello \$remote_addr via \$scheme on \$server_port\\n"
    }
    location = /gone {
        return = 410
    }
    location /office {
        allow = 127.0.0.2
        allow = ::1
        deny = all
    }
    location /upload/ {
        max_body_size = 100
        handler = echo
    }
    location /files/ {
        alias = $D/shared/
        directory_listing = on
    }
    location /static {
        alias = $D/shared/
    }
    location = /one {
        alias = $D/shared/one.txt
    }
    location /app/ {
        alias = $D/spa/
        fallback = /index.html
    }
    location /hidden/ {
        alias = $D/hidden/
        dotfiles = allow
    }
    location = /status {
        handler = stats
        allow = 127.0.0.1
        deny = all
    }
    location /-/ {
        allow = 127.0.0.1
        allow = ::1
        deny = all
    }
}

site b.test *.b.test {
    root = $D/b
    cert = $D/b.test.pem
    key = $D/b.test.key
    header = always Access-Control-Allow-Origin: *
}

site c.test {
    root = $D/c
    cert = $D/c.test.pem
    key = $D/c.test.key
    header = Access-Control-Allow-Origin: https://a.test:$T
}

site redirect.test {
    https_redirect = on
    root = $D/a
}

site * {
    root = $D/default
}
EOF
start_config "$D/h2park.conf" "$P" || { fail sites_daemon_starts "see above"; exit 1; }
ra=(--resolve "a.test:$P:127.0.0.1" --resolve "a.test:$T:127.0.0.1" --resolve "b.test:$T:127.0.0.1")
body() { curl -s -m 5 "$@"; }
code() { curl -s -m 5 -o /dev/null -w '%{http_code}' "$@"; }
hdr() { tr -d '\r' | sed -n "s/^$1: //Ip" | head -1; }

# ---- sites by Host, over cleartext ----
[ "$(body "${ra[@]}" "http://a.test:$P/")" = "site a" ] && [ "$(body -H 'Host: b.test' "http://127.0.0.1:$P/")" = "site b" ]
check sites_by_host $? "a: $(body "${ra[@]}" "http://a.test:$P/")"
[ "$(body --connect-to "x.b.test:80:127.0.0.1:$P" http://x.b.test/)" = "site b" ] &&
  [ "$(body -H 'Host: deep.x.b.test' "http://127.0.0.1:$P/")" = "site b" ]
check sites_wildcard_by_connect_to $? "$(body --connect-to "x.b.test:80:127.0.0.1:$P" http://x.b.test/)"
[ "$(body -H 'Host: nobody.test' "http://127.0.0.1:$P/")" = "default site" ] && [ "$(body --http1.0 -H 'Host:' "http://127.0.0.1:$P/")" = "default site" ]
check sites_default_for_other_hosts $? "$(body -H 'Host: nobody.test' "http://127.0.0.1:$P/")"
[ "$(body -H 'Host: A.Test.:8080' "http://127.0.0.1:$P/")" = "site a" ] && [ "$(body --http2-prior-knowledge -H 'Host: B.TEST' "http://127.0.0.1:$P/")" = "site b" ]
check sites_host_case_dot_and_port $? "$(body -H 'Host: A.Test.:8080' "http://127.0.0.1:$P/")"
bad=""
for h in 'a.test/../b' 'a test' 'a.test:80:80' 'a..test' '[::1' 'a.test@b.test' '.a.test' 'a.test:x'; do
  c=$(code -H "Host: $h" "http://127.0.0.1:$P/"); [ "$c" = 400 ] || bad="$bad '$h'=$c"
done
[ -z "$bad" ]; check sites_hostile_host_400 $? "$bad"
c=$(code --http2-prior-knowledge -H 'Host: a..test' "http://127.0.0.1:$P/"); [ "$c" = 400 ]; check sites_hostile_authority_h2_400 $? "$c"

# ---- sites by SNI, each with its certificate ----
subject() { echo | timeout 5 openssl s_client -connect "127.0.0.1:$T" "$@" 2>/dev/null | openssl x509 -noout -subject -text 2>/dev/null; }
out=$(subject -servername a.test); echo "$out" | grep -q 'CN = a.test' && echo "$out" | grep -q id-ecPublicKey
check sni_a_ecdsa_certificate $? "$(echo "$out" | grep -E 'Subject:|Public Key Algorithm')"
out=$(subject -servername a.test -sigalgs RSA-PSS+SHA256:RSA+SHA256); echo "$out" | grep -q 'CN = a.test' && echo "$out" | grep -q rsaEncryption
check sni_a_rsa_certificate_for_rsa_client $? "$(echo "$out" | grep -E 'Subject:|Public Key Algorithm')"
out=$(subject -servername a.test -tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256); echo "$out" | grep -q rsaEncryption
check sni_a_rsa_certificate_for_tls12_rsa_suite $? "$(echo "$out" | grep -E 'Public Key Algorithm')"
subject -servername b.test | grep -q 'CN = b.test' && subject -servername deep.x.b.test | grep -q 'CN = b.test' &&
  subject -servername c.test | grep -q 'CN = c.test'
check sni_b_wildcard_and_c_certificates $? "$(subject -servername deep.x.b.test | grep Subject:)"
subject -servername nosuch.test | grep -q 'h2park self-signed' && subject -noservername | grep -q 'h2park self-signed'
check sni_unknown_or_none_gets_default_site $? "$(subject -noservername | grep Subject:)"
# SNI as hostile input: case and a trailing dot are the same name; anything that is no
# host name, or too long to be one, gets the default site's certificate.
long=$(printf 'a%.0s' $(seq 1 250)).test
subject -servername A.TEST. | grep -q 'CN = a.test' && subject -servername 'x/../a.test' | grep -q 'h2park self-signed' &&
  subject -servername "$long" | grep -q 'h2park self-signed' && subject -servername 'a.test:443' | grep -q 'h2park self-signed'
check sni_hostile_names $? "$(subject -servername A.TEST. | grep Subject:)"
kill -0 "$DPID"; check sni_daemon_alive $? "gone"
[ "$(body --cacert "$D/ca.pem" "${ra[@]}" "https://a.test:$T/")" = "site a" ] &&
  [ "$(body --cacert "$D/ca.pem" --http1.1 --connect-to "b.test:443:127.0.0.1:$T" https://b.test/)" = "site b" ]
check sni_curl_verifies_each_site $? "$(curl -sS --cacert "$D/ca.pem" "${ra[@]}" "https://a.test:$T/" 2>&1 | head -2)"

# ---- 421: a connection reused for a name its certificate does not cover ----
out=$(timeout 10 $PY "$(dirname "$0")/h2coalesce.py" "$T" a.test "$D/ca.pem" a.test b.test c.test nobody.test a.test 2>&1)
echo "$out" | grep -qx 'a.test 200 site a' && echo "$out" | grep -qx 'b.test 421 misdirected request: this connection does not serve that host' &&
  echo "$out" | grep -qx 'c.test 200 site c' && echo "$out" | grep -qx 'nobody.test 421 misdirected request: this connection does not serve that host' &&
  [ "$(echo "$out" | grep -c '^a.test 200')" = 2 ] && echo "$out" | grep -qx 'connections 1'
check coalescing_one_connection_421_where_certificate_does_not_cover $? "$(echo "$out" | tr '\n' ';')"
c=$(code --cacert "$D/ca.pem" --http1.1 "${ra[@]}" -H 'Host: b.test' "https://a.test:$T/"); [ "$c" = 421 ]
check misdirected_http1_over_tls_421 $? "$c"
c=$(code --cacert "$D/ca.pem" --http2 "${ra[@]}" -H 'Host: b.test' "https://a.test:$T/"); [ "$c" = 421 ]
check misdirected_h2_authority_421 $? "$c"
[ "$(body -k -H 'Host: b.test' "https://127.0.0.1:$T/")" = "site b" ]; check no_sni_host_decides $? "$(body -k -H 'Host: b.test' "https://127.0.0.1:$T/")"

# ---- locations ----
out=$(curl -s -D - -o /dev/null "${ra[@]}" "http://a.test:$P/assets/x.css")
[ "$(echo "$out" | hdr cache-control)" = "public, max-age=86400" ] && [ "$(echo "$out" | hdr strict-transport-security)" = max-age=63072000 ]
check location_headers_added_and_inherited $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
etag=$(echo "$out" | hdr etag)
out=$(curl -s -D - -o /dev/null "${ra[@]}" -H "If-None-Match: $etag" "http://a.test:$P/assets/x.css")
echo "$out" | head -1 | grep -q 304 && [ "$(echo "$out" | hdr cache-control)" = "public, max-age=86400" ]
check location_headers_on_304 $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
out=$(curl -s -D - "${ra[@]}" "http://a.test:$P/nope")
echo "$out" | head -1 | grep -q 404 && echo "$out" | grep -q 'custom 404 of a' && [ -z "$(echo "$out" | hdr strict-transport-security)" ]
check location_error_page_and_no_headers_on_404 $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
out=$(curl -s -D - -o /dev/null -H 'Host: b.test' "http://127.0.0.1:$P/nope"); [ "$(echo "$out" | hdr access-control-allow-origin)" = '*' ]
check location_always_header_on_404 $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
out=$(curl -s -D - -o /dev/null "${ra[@]}" "http://a.test:$P/old?x=1")
echo "$out" | head -1 | grep -q 301 && [ "$(echo "$out" | hdr location)" = "https://a.test/new?from=/old&x=1" ]
check return_redirect_with_variables $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
[ "$(body --http2-prior-knowledge "${ra[@]}" "http://a.test:$P/hello")" = "hello 127.0.0.1 via http on $P" ] &&
  [ "$(code "${ra[@]}" "http://a.test:$P/gone")" = 410 ]
check return_body_and_status $? "$(body --http2-prior-knowledge "${ra[@]}" "http://a.test:$P/hello")"
# A redirect a client's target could aim at another host stays on this one.
out=$(curl -s -D - -o /dev/null -H 'Host: redirect.test' "http://127.0.0.1:$P//evil.example/x?q=1")
[ "$(echo "$out" | hdr location)" = "https://redirect.test:$T/evil.example/x?q=1" ] && echo "$out" | head -1 | grep -q 308
check https_redirect_one_line $? "$(echo "$out" | tr -d '\r' | tr '\n' '|')"
# A backslash after the slashes: the Location must still begin with this host and a slash,
# never "host:port%5C@evil.example" (a user name and another host to a browser).
bad=""
for t in '/\@evil.example/' '//\@evil.example/' '/\\@evil.example/' '/\/\@evil.example/' '/@evil.example/'; do
  loc=$(curl -s -D - -o /dev/null --path-as-is -H 'Host: redirect.test' "http://127.0.0.1:$P$t" | hdr location)
  case $loc in "https://redirect.test:$T/"*) ;; *) bad="$bad [$t: $loc]" ;; esac
done
[ -z "$bad" ]; check https_redirect_backslash_stays_on_site $? "$bad"
[ "$(body -k -H 'Host: redirect.test' "https://127.0.0.1:$T/")" = "site a" ]; check https_redirect_tls_serves $? "-"

# allow/deny: 127.0.0.1 is denied the office, 127.0.0.2 and ::1 are allowed; every
# spelling of the path is the same location.
codes=""
for p in /office /office/plan.txt /office.txt //office/plan.txt /office//plan.txt /%6Fffice/plan.txt /office/%2e/plan.txt /office/./plan.txt; do
  codes="$codes $(code --path-as-is "${ra[@]}" "http://a.test:$P$p")"
done
[ "$codes" = " 403 403 403 403 403 403 404 404" ]; check access_denied_every_spelling $? "$codes"
c1=$(code --interface 127.0.0.2 "${ra[@]}" "http://a.test:$P/office/plan.txt")
c2=$(code -g -H 'Host: a.test' "http://[::1]:$P6/office/plan.txt")
[ "$c1" = 200 ] && [ "$c2" = 200 ]; check access_allowed_v4_and_v6 $? "127.0.0.2: $c1, ::1: $c2"
# A dual-stack socket's IPv4 clients arrive as ::ffff:a.b.c.d: the IPv4 rules still decide.
c1=$(code --interface 127.0.0.2 -H 'Host: a.test' "http://127.0.0.1:$PD/office/plan.txt")
c2=$(code -H 'Host: a.test' "http://127.0.0.1:$PD/office/plan.txt")
[ "$c1" = 200 ] && [ "$c2" = 403 ]; check access_v4_rules_on_dual_stack_socket $? "127.0.0.2: $c1, 127.0.0.1: $c2"
[ "$(code --http2-prior-knowledge "${ra[@]}" "http://a.test:$P/office/plan.txt")" = 403 ]; check access_denied_h2 $? "-"

# The built-in routes: /status placed and restricted; /-/ open to loopback 127.0.0.1 and
# ::1 only, others get 404 there as if the routes were not.
[ "$(code "${ra[@]}" "http://a.test:$P/status")" = 200 ] && [ "$(code --interface 127.0.0.2 "${ra[@]}" "http://a.test:$P/status")" = 403 ]
check builtin_route_placed_and_restricted $? "$(code --interface 127.0.0.2 "${ra[@]}" "http://a.test:$P/status")"
# A built-in route a client may not reach answers as if it were not there: here that is
# what /-/ answers it (403); in a site that restricts nothing it is served.
[ "$(code "${ra[@]}" "http://a.test:$P/-/stats")" = 200 ] && [ "$(code --interface 127.0.0.2 "${ra[@]}" "http://a.test:$P/-/stats")" = 403 ] &&
  [ "$(code -H 'Host: b.test' --interface 127.0.0.2 "http://127.0.0.1:$P/-/stats")" = 200 ]
check builtin_routes_restricted_by_their_location $? "$(code --interface 127.0.0.2 "${ra[@]}" "http://a.test:$P/-/stats")"

# Body limits: 413 before the body (Content-Length) or as it passes the limit (chunked,
# HTTP/2 without a length); under it, served.
head -c 50 /dev/zero > "$TMP/small"; head -c 5000 /dev/zero > "$TMP/big"
codes="$(code "${ra[@]}" --data-binary @"$TMP/small" "http://a.test:$P/upload/")"
codes="$codes $(code "${ra[@]}" --data-binary @"$TMP/big" "http://a.test:$P/upload/")"
codes="$codes $(code "${ra[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/big" "http://a.test:$P/upload/")"
codes="$codes $(nghttp -v -d "$TMP/big" -H ':authority: a.test' "http://127.0.0.1:$P/upload/" 2>/dev/null | sed -n 's/.*:status: //p')"
codes="$codes $(cat "$TMP/big" | code --cacert "$D/ca.pem" --http1.1 "${ra[@]}" -T - -X POST "https://a.test:$T/upload/")"
# HTTP/2 (nghttp with a length; python3-h2 without one, the body in two DATA frames): curl
# 7.88 takes the RST_STREAM(NO_ERROR) that follows an early answer (RFC 9113 8.1) for an
# error, now and then.
codes="$codes $($PY - "$P" <<'PYEOF'
import socket, sys, h2.connection, h2.config, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":authority", "a.test"), (":path", "/upload/")])
c.send_data(1, b"x" * 80)
c.send_data(1, b"x" * 80, end_stream=True)
s.sendall(c.data_to_send())
status = "none"
while status == "none":
    data = s.recv(65536)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            status = dict(ev.headers)[b":status"].decode()
print(status)
PYEOF
)"
[ "$codes" = "200 413 413 413 413 413" ]; check body_limit_413 $? "$codes"
kill -0 "$DPID"; check body_limit_daemon_alive $? "gone"

# Dotfiles: denied by default, in every spelling; .well-known served; allowed where asked.
codes=""
for p in /.env /.git/config /%2eenv /.git%2fconfig /assets/../.env /x/.. /.well-known/security.txt /hidden/x/.dot; do
  codes="$codes $(code --path-as-is "${ra[@]}" "http://a.test:$P$p")"
done
[ "$codes" = " 403 403 403 403 404 404 200 200" ]; check dotfiles_denied_by_default $? "$codes"

# Directory listing, where asked: names escaped, dotfiles left out; elsewhere none.
out=$(body "${ra[@]}" "http://a.test:$P/files/")
echo "$out" | grep -q '>one.txt<' && echo "$out" | grep -qF '&lt;i&gt;&amp;&quot;q&quot;.txt' &&
  echo "$out" | grep -qF 'href="%3Ci%3E%26%22q%22.txt"' && ! echo "$out" | grep -q hidden && ! echo "$out" | grep -q '<i>'
check directory_listing_escaped $? "$(echo "$out" | head -c 600)"
[ "$(code "${ra[@]}" "http://a.test:$P/assets/")" = 404 ]; check directory_listing_off_elsewhere $? "-"
[ "$(body "${ra[@]}" "http://a.test:$P/files/one.txt")" = one ]; check alias_serves $? "-"
# An exact location may alias a file (the daemon would not start: the file was opened as a root).
[ "$(body "${ra[@]}" "http://a.test:$P/one")" = one ] && [ "$(code "${ra[@]}" "http://a.test:$P/one/")" = 404 ]
check alias_exact_to_a_file $? "$(code "${ra[@]}" "http://a.test:$P/one")"
# An alias is cut at a segment boundary: /static../ is not the directory above the alias.
codes="$(code "${ra[@]}" "http://a.test:$P/static/one.txt") $(code "${ra[@]}" "http://a.test:$P/static")"
codes="$codes $(code --path-as-is "${ra[@]}" "http://a.test:$P/static../a/index.html") $(code "${ra[@]}" "http://a.test:$P/staticx")"
loc=$(curl -s -D - -o /dev/null "${ra[@]}" "http://a.test:$P/static?q" | tr -d '\r' | sed -n 's/^location: //Ip')
[ "$codes" = "200 301 404 404" ] && [ "$loc" = "/static/?q" ]; check alias_traversal_refused $? "$codes, $loc"

# A single-page app: unknown paths get its index, files are files.
[ "$(body "${ra[@]}" "http://a.test:$P/app/users/42")" = "spa shell" ] && [ "$(body "${ra[@]}" "http://a.test:$P/app/app.js")" = js ] &&
  [ "$(code "${ra[@]}" "http://a.test:$P/app/users/42")" = 200 ]
check spa_fallback $? "$(body "${ra[@]}" "http://a.test:$P/app/users/42")"

# A WebSocket handshake to a static path is refused, not answered as a GET.
c=$(code "${ra[@]}" -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' \
  -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "http://a.test:$P/")
[ "$c" = 400 ]; check websocket_upgrade_to_static_400 $? "$c"

# The access log names the site's host for each line.
grep -q '"GET /assets/x.css HTTP/1.1" 200 .* "a.test:'"$P"'"' "$TMP/access.log"; check access_log_host $? "$(tail -2 "$TMP/access.log")"

# ---- headless Chromium, two sites over TLS ----
CHROMIUM=$(command -v chromium || true)
if [ -n "$CHROMIUM" ]; then
  spki() { openssl x509 -in "$1" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64; }
  printf '<html><body><p id="own">site a</p><p id="c">-</p><script>fetch("https://c.test:%s/c.txt").then(r => r.text()).then(t => { document.getElementById("c").textContent = t.trim() })</script></body></html>\n' "$T" > "$D/a/page.html"
  chrome() {
    timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$TMP/chromium-$2" \
      --host-resolver-rules="MAP *.test 127.0.0.1" \
      --ignore-certificate-errors-spki-list="$(spki "$D/a.test-ec.pem"),$(spki "$D/a.test-rsa.pem"),$(spki "$D/b.test.pem"),$(spki "$D/c.test.pem")" \
      --virtual-time-budget=5000 --dump-dom "$1" 2>/dev/null
  }
  dom_a=$(chrome "https://a.test:$T/page.html" a); dom_b=$(chrome "https://b.test:$T/b.txt" b)
  echo "$dom_a" | grep -q '<p id="own">site a</p>' && echo "$dom_b" | grep -q 'b text'
  check chromium_two_sites_over_tls $? "a: $(echo "$dom_a" | head -c 300); b: $(echo "$dom_b" | head -c 200)"
  # The page on a.test fetches from c.test, which a.test's certificate also covers:
  # Chromium may reuse the a.test connection for it (coalescing), and either way c.test's
  # site answers, with its CORS header.
  echo "$dom_a" | grep -q '<p id="c">c text</p>'; check chromium_cross_site_fetch_c $? "$(echo "$dom_a" | head -c 400)"
  grep -q '"GET /page.html HTTP/2.0" 200 .* "a.test:'"$T"'" h2' "$TMP/access.log" &&
    grep -q '"GET /b.txt HTTP/2.0" 200 .* "b.test:'"$T"'" h2' "$TMP/access.log"
  check chromium_over_h2_with_sni $? "$(grep -E 'page.html|b.txt' "$TMP/access.log" | tail -3)"
else
  echo "ok chromium_two_sites_over_tls # SKIP chromium is not installed (apt-get install chromium)"
fi
stop_daemon
