#!/bin/bash
# HTTP/2 upstreams over TLS (proxy_pass = h2://...): the h2c path's exchange on a TLS
# connection whose ALPN chose h2, the certificate verified as for https://.  Peers: a gRPC
# server from python3-grpcio over TLS (unary with trailers, a trailers-only error,
# bidirectional streaming), nghttpd as an h2 file server, nginx with http2 on a TLS
# listener (and one without: its ALPN refuses h2), and the HTTP/2 fault server over
# Python's ssl (resets, trailers, the :scheme it was sent, a server that offers no ALPN).
# Clients: curl over HTTP/1.1, h2c and h2, h2load, grpc to h2park's listener.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_h2_upstream.sh"
make_site
PY=/usr/bin/python3
for need in nghttpd nginx curl h2load openssl; do
  command -v $need >/dev/null || { echo "ok proxy_h2_tls # SKIP $need not installed"; exit 0; }
done
$PY -c 'import grpc, h2' 2>/dev/null || { echo "ok proxy_h2_tls # SKIP python3-grpcio or python3-h2 not installed"; exit 0; }
HERE=$(cd "$(dirname "$0")" && pwd)
chmod a+x "$TMP"; chmod -R a+rX "$TMP/www"
head -c $((3 << 20)) /dev/urandom > "$TMP/www/three.bin"; chmod a+r "$TMP/www/three.bin"
make_ca testca; make_ca otherca
make_leaf app "DNS:app.test,IP:127.0.0.1" serverAuth
chmod a+r "$TMP"/*.key "$TMP"/*.pem

G=$(free_port); N=$(free_port); F=$(free_port); NOALPN=$(free_port); NG=$(free_port); NGH1=$(free_port)
$PY "$HERE/upstream_grpc.py" serve "$G" "$TMP/app.pem" "$TMP/app.key" & PIDS="$PIDS $!"
$PY "$HERE/upstream_h2_faults.py" "$F" 0 "$TMP/app.pem" "$TMP/app.key" & PIDS="$PIDS $!"
$PY "$HERE/upstream_h2_faults.py" "$NOALPN" 0 "$TMP/app.pem" "$TMP/app.key" none & PIDS="$PIDS $!"
nghttpd -d "$TMP/www" "$N" "$TMP/app.key" "$TMP/app.pem" >/dev/null 2>&1 & PIDS="$PIDS $!"
start_nginx <<EOF
  server { listen 127.0.0.1:$NG ssl http2; server_name app.test;
    ssl_certificate $TMP/app.pem; ssl_certificate_key $TMP/app.key;
    location = /proto { return 200 "\$server_protocol\n"; } }
  server { listen 127.0.0.1:$NGH1 ssl; server_name app.test;
    ssl_certificate $TMP/app.pem; ssl_certificate_key $TMP/app.key;
    location = /proto { return 200 "\$server_protocol\n"; } }
EOF
trap 'kill -TERM $NGPID 2>/dev/null; wait $NGPID 2>/dev/null; cleanup' EXIT
CURL_CA="--cacert $TMP/testca.pem"
for i in $(seq 1 100); do
  curl -s -o /dev/null $CURL_CA --http2 "https://127.0.0.1:$N/index.html" &&
    curl -s -o /dev/null $CURL_CA --http2 "https://127.0.0.1:$F/ok" &&
    curl -s -o /dev/null $CURL_CA "https://127.0.0.1:$NG/proto" &&
    $PY -c "import socket; socket.create_connection(('127.0.0.1', $G), 1)" 2>/dev/null && break
  sleep 0.1
done

P=$(free_port); T=$(free_port)
cat > "$TMP/h2tls.conf" <<EOF2
proxy_ssl_trusted_certificate = $TMP/testca.pem
proxy_ssl_name = app.test
$(h2_upstreams_conf h2 "$G" "$N" "$F")
location /ng/ {
    proxy_pass = h2://127.0.0.1:$NG/
}
location /ng-https/ {
    proxy_pass = https://127.0.0.1:$NG/
}
location /ngh1/ {
    proxy_pass = h2://127.0.0.1:$NGH1/
}
location /noalpn/ {
    proxy_pass = h2://127.0.0.1:$NOALPN/
}
location /wrongca/ {
    proxy_pass = h2://127.0.0.1:$F/
    proxy_ssl_trusted_certificate = $TMP/otherca.pem
}
EOF2
PORT=$P; start_config "$TMP/h2tls.conf" "$P" || { fail proxy_h2_tls_daemon_starts "$(grep -v info "$TMP/daemon.log" | head -2)"; exit 1; }

# ---- gRPC over TLS through h2park ----
check_grpc_through h2_ "$G"

# ---- nghttpd over TLS: files, every client protocol, pooled connections ----
check_file_to_every_client h2_nghttpd_file_3MiB /n/three.bin "$TMP/www/three.bin"
check_h2load_and_reuse h2_ curl -s $CURL_CA --http2 "https://127.0.0.1:$F/conns"

# ---- what the upstream is sent, and what it answers ----
b=$(curl -s --http1.1 "http://127.0.0.1:$P/f/scheme")
[ "$b" = https ]; check h2_scheme_is_https $? "upstream saw :scheme '$b'"
b=$(curl -s --http1.1 "http://127.0.0.1:$P/ng/proto"); b2=$(curl -s --http1.1 "http://127.0.0.1:$P/ng-https/proto")
[ "$b" = HTTP/2.0 ] && [ "$b2" = HTTP/1.1 ]
check nginx_same_server_by_h2_and_by_https $? "h2:// got '$b', https:// got '$b2'"
raw=$(curl -s --raw --http1.1 -H 'TE: trailers' "http://127.0.0.1:$P/f/trailers" | od -An -c | tr -d ' \n')
[ "$raw" = '2\r\nt\n\r\n0\r\nx-t:1\r\ngrpc-status:0\r\n\r\n' ]; check h2_trailers_to_h1_client $? "$raw"
c=$(code "$P" /f/rst-head)
[ "$c" = 502 ] && grep -q 'rst-head' "$TMP/daemon.log"; check h2_rst_stream_before_head_502 $? "$c"

# ---- refusals: no h2 by ALPN, a certificate of another CA ----
c=$(code "$P" /ngh1/proto)
[ "$c" = 502 ] && grep -q "upstream 127.0.0.1:$NGH1: SSL handshake failed:.*no application protocol" "$TMP/daemon.log"
check h2_refused_by_server_without_http2_502 $? "$c; $(grep "$NGH1" "$TMP/daemon.log" | tail -1)"
c=$(code "$P" /noalpn/ok)
[ "$c" = 502 ] && grep -q "upstream 127.0.0.1:$NOALPN: the server did not choose HTTP/2 (h2) by ALPN (it chose none)" "$TMP/daemon.log"
check h2_server_without_alpn_502_cause_logged $? "$c; $(grep "$NOALPN" "$TMP/daemon.log" | tail -1)"
c=$(code "$P" /wrongca/ok)
[ "$c" = 502 ] && grep -q "upstream 127.0.0.1:$F: SSL certificate verify error" "$TMP/daemon.log"
check h2_certificate_of_another_ca_502 $? "$c; $(grep 'verify' "$TMP/daemon.log" | tail -1)"
b=$(curl -s --http1.1 "http://127.0.0.1:$P/f/ok")
[ "$b" = ok ]; check h2_pool_serves_after_refusals $? "'$b'"

# ---- idle pooled h2 upstream connections park: socket, SSL, struct and session ----
# Over h2c's figure: the SSL object, its buffers released.
check_idle_pool idle_h2_tls_upstream_pooled_parked /f0/slow /f/slow faults "127.0.0.1:$F" 60000
stop_daemon
