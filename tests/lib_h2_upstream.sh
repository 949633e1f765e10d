# Shared by the HTTP/2 upstream tests (e2e_proxy_h2c.sh over h2c://, e2e_proxy_h2_tls.sh
# over h2://): the same peers behind either scheme get the same checks, named with the
# caller's prefix.  Needs lib.sh, $PY, $HERE and the daemon's $P.

# h2_upstreams_conf SCHEME G N F: the daemon's listeners ($P, and $T over TLS), and
# upstream groups and locations for the gRPC server on G (/t.T/), nghttpd's files on N
# (/n/), and the fault server on F (/f/, and /f0/ unpooled).
h2_upstreams_conf() {
  cat <<EOF2
listen = 127.0.0.1:$P
listen = 127.0.0.1:$T tls
cert = $TMP/cert.pem
key = $TMP/key.pem
root = $TMP/www
workers = 1
access_log = $TMP/access.log
access_log_format = json
proxy_read_timeout = 20s
upstream files {
    server = 127.0.0.1:$3
    keepalive = 300
}
upstream faults {
    server = 127.0.0.1:$4
    keepalive = 300
}
upstream faults_unpooled {
    server = 127.0.0.1:$4
    keepalive = 0
}
location /t.T/ {
    proxy_pass = $1://127.0.0.1:$2
}
location /n/ {
    proxy_pass = $1://files/
}
location /f/ {
    proxy_pass = $1://faults/
}
location /f0/ {
    proxy_pass = $1://faults_unpooled/
}
EOF2
}

grpc_call() { timeout 40 $PY "$HERE/upstream_grpc.py" call "127.0.0.1:$P" "$@" 2>&1; }

# check_grpc_through PREFIX G: gRPC calls from python3-grpcio's client to the daemon, passed
# to the gRPC server on G: unary both ways with trailing metadata, a trailers-only error,
# client streaming past the flow-control window, bidirectional streaming answered as it goes.
check_grpc_through() {
  local r s
  r=$(grpc_call unary 5)
  [ "$r" = "unary echo:xxxxx 10 OK unary-done" ]; check "$1grpc_unary_with_trailing_metadata" $? "$r"
  r=$(grpc_call unary 300000)
  [ "$r" = "unary echo:xxxxxxxxxxxxxxx 300005 OK unary-done" ]
  check "$1grpc_unary_300KB_both_ways" $? "$r; $(grep /t.T/Echo "$TMP/access.log" | tail -1); $(grep -v info "$TMP/daemon.log" | tail -3)"
  r=$(grpc_call fail)
  [ "$r" = "fail NOT_FOUND no such thing" ]; check "$1grpc_trailers_only_error" $? "$r"
  r=$(grpc_call count 100)
  [ "$r" = "count 6553600" ]; check "$1grpc_client_streaming_6MiB_flow_controlled" $? "$r"
  r=$(grpc_call bidi 60)
  [ "$r" = "bidi 60 match OK 60 spread=${r##*spread=}" ]; check "$1grpc_bidi_60_messages" $? "$r"
  # Answers come back while the client still sends (each message only once the last one's
  # answer came): the stream is passed on both ways as it goes, not gathered.
  r=$(grpc_call pingpong 6)
  [ "${r% spread=*}" = "bidi 6 match OK 6" ]; check "$1grpc_bidi_streamed_as_it_goes" $? "$r"
  grep -q '"target":"/t.T/Echo","protocol":"h2c","status":200.*"upstream_addr":"127.0.0.1:'$2'","upstream_status":200' "$TMP/access.log"
  check "$1grpc_access_log_upstream" $? "$(grep /t.T/Echo "$TMP/access.log" | tail -1)"
}

# check_h2load_and_reuse PREFIX CONNS_COMMAND...: 3,000 requests from h2load (h2c and
# HTTP/1.1) for nghttpd's /n/index.html, and 1,000 HTTP/1.1 ones to the fault server's /ok
# on at most 6 upstream connections (CONNS_COMMAND prints how many it was made so far).
check_h2load_and_reuse() {
  local prefix=$1 mode ok2 before after; shift
  for mode in "--h1" ""; do
    h2load -n 3000 -c 10 -m 4 $mode "http://127.0.0.1:$P/n/index.html" > "$TMP/h2load.out" 2>&1
    ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/h2load.out")
    [ "$ok2" = 3000 ]; check "${prefix}nghttpd_h2load_3000${mode:+_h1}" $? "$(grep -E '^(requests|status)' "$TMP/h2load.out" | tr '\n' ' ')"
  done
  before=$("$@")
  h2load -n 1000 -c 4 --h1 "http://127.0.0.1:$P/f/ok" > "$TMP/h2load.out" 2>&1
  after=$("$@")
  ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/h2load.out")
  # (after counts the /conns connection itself)
  [ "$ok2" = 1000 ] && [ $((after - before)) -le 6 ]
  check "${prefix}upstream_connections_reused" $? "$ok2 2xx, $((after - before - 1)) upstream connections for 1000 requests"
}
