# Shared helpers for the end-to-end tests (bash).  Each test prints "ok NAME" or
# "FAIL NAME: why"; tests/run.sh counts them.  Daemons started here are stopped on exit,
# by PID, whatever happens.
BUILD=${BUILD:-build}
H2PARK=${H2PARK:-$BUILD/h2park}
TMP=$(mktemp -d /tmp/h2park-test.XXXXXX)
PIDS=""
# A process started in the background through a function or a subshell is a child of the
# PID recorded: the whole tree goes, found by parentage (never by name: other people's
# daemons run on this machine too), and only in this test's session: a PID that ended
# long ago may have been reused by someone else's process.
descendants() { local c; for c in $(pgrep -P "$1"); do descendants "$c"; echo "$c"; done; }
cleanup() {
  local p tree="" sid
  sid=$(ps -o sid= -p $$ | tr -d ' ')
  for p in $PIDS; do tree="$tree $(descendants "$p") $p"; done
  for p in $tree; do
    [ "$(ps -o sid= -p "$p" 2>/dev/null | tr -d ' ')" = "$sid" ] && kill -9 "$p" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

# In sanitizer builds every handler that waits is parked at once, its stack poisoned
# until it runs again, so that every end-to-end test finds whatever touches a parked
# stack (a test that sets H2PARK_DEBUG for one command sets it alone).
if [ "${SAN:-0}" = 1 ]; then
  export H2PARK_DEBUG="${H2PARK_DEBUG:+$H2PARK_DEBUG,}parkhandlersatonce=1"
fi

ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }
check() { # check NAME CONDITION-EXIT-STATUS WHY
  if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1" "$3"; fi
}

# A small site and a TLS certificate, made once per test file.
make_site() {
  mkdir -p "$TMP/www/sub" "$TMP/outside"
  printf '<h1>h2park test</h1>\n' > "$TMP/www/index.html"
  printf 'body { color: red }\n' > "$TMP/www/sub/style.css"
  printf 'secret\n' > "$TMP/outside/secret.txt"
  ln -s "$TMP/outside/secret.txt" "$TMP/www/link.txt"
  openssl req -x509 -newkey "${CERT_ALG:-ec}" ${CERT_OPTS:--pkeyopt ec_paramgen_curve:P-256} -nodes \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 2 -subj /CN=localhost >/dev/null 2>&1
}

# make_ca NAME: a certificate authority of the test's own ($TMP/NAME.pem, NAME.key);
# make_leaf NAME SUBJECT-ALT-NAMES USAGE: a certificate signed by make_ca testca.
make_ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/$1.key" -out "$TMP/$1.pem" \
              -days 2 -subj "/CN=$1" >/dev/null 2>&1; }
make_leaf() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/$1.key" -out "$TMP/$1.csr" \
    -subj "/CN=$1" >/dev/null 2>&1
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=%s\n' "$2" "$3" > "$TMP/$1.ext"
  openssl x509 -req -in "$TMP/$1.csr" -CA "$TMP/testca.pem" -CAkey "$TMP/testca.key" -CAcreateserial -days 2 \
    -extfile "$TMP/$1.ext" -out "$TMP/$1.pem" >/dev/null 2>&1
}

# check_file_to_every_client NAME PATH FILE: FILE, fetched at PATH from the daemon's $P
# (HTTP/1.1 and h2c) and $T (h2 over TLS), comes whole, read at once and by a client that
# waits a second before reading (checks NAME_PROTO and NAME_slow_client_PROTO).
check_file_to_every_client() {
  local want got proto opt url
  want=$(sha256sum < "$3" | cut -d' ' -f1)
  for proto in h1 h2c tls; do
    case $proto in h1) opt="--http1.1"; url="http://127.0.0.1:$P" ;; h2c) opt="--http2-prior-knowledge"; url="http://127.0.0.1:$P" ;;
                   tls) opt="--http2 -k"; url="https://127.0.0.1:$T" ;; esac
    got=$(curl -s $opt "$url$2" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$want" ]; check "$1_$proto" $? "sha256 $got"
    got=$(curl -s $opt "$url$2" | (sleep 1; sha256sum) | cut -d' ' -f1)
    [ "$got" = "$want" ]; check "$1_slow_client_$proto" $? "sha256 $got"
  done
}

# check_idle_pool NAME UNPOOLED_PATH POOLED_PATH GROUP SERVER MAX_HEAP_BYTES: 200 HTTP/1.1
# clients at once through POOLED_PATH (a slow answer, so that 200 upstream connections
# open) leave at least 190 idle in GROUP's pool for SERVER, each adding less than
# MAX_HEAP_BYTES to the daemon's heap.  A first round through UNPOOLED_PATH makes what the
# clients and handlers take (and the heap keeps for reuse), so that the second adds the
# pooled connections alone.  RSS is printed, not judged: the heap returning the first
# round's pages to the OS meanwhile moves it by more than 200 connections do.
check_idle_pool() {
  local j heap0 heap1 rss0 rss1 ok2 idle per rper
  h2load -n 200 -c 200 --h1 "http://127.0.0.1:$P$2" > "$TMP/h2load.out" 2>&1
  sleep 2.5
  j=$(stats_json); heap0=$(stat_from "$j" heap_alloc_bytes); rss0=$(stat_from "$j" rss_bytes)
  h2load -n 200 -c 200 --h1 "http://127.0.0.1:$P$3" > "$TMP/h2load.out" 2>&1
  ok2=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$TMP/h2load.out")
  sleep 2.5                    # a worker tick: freed stacks and buffers go back
  idle=$(curl -s "http://127.0.0.1:$P/metrics" |
           sed -n "s/^h2park_upstream_connections{upstream=\"$4\",server=\"$5\",state=\"idle\"} //p")
  j=$(stats_json); heap1=$(stat_from "$j" heap_alloc_bytes); rss1=$(stat_from "$j" rss_bytes)
  per=$(( (heap1 - heap0) / ${idle:-1} )); rper=$(( (rss1 - rss0) / ${idle:-1} ))
  [ "$ok2" = 200 ] && [ "${idle:-0}" -ge 190 ] && [ "$per" -lt "$6" ]
  check "$1" $? "$ok2 answered, $idle idle upstream connections: $per heap bytes, $rper resident bytes each"
  echo "# $1: $per heap bytes, $rper bytes of RSS per idle upstream connection (heap_alloc $heap0 -> $heap1, rss $rss0 -> $rss1, $idle pooled)"
}

# start_daemon [extra args...]: starts h2park on free ports; sets PORT, TPORT, DPID.
# With NOFILE set, the daemon runs with that many file descriptors.
start_daemon() {
  for attempt in 1 2 3 4 5 6 7 8; do
    PORT=$(( 20000 + (RANDOM * 7 + $$ + attempt * 131) % 20000 ))
    TPORT=$(( PORT + 1 ))
    ${NOFILE:+prlimit --nofile=$NOFILE:$NOFILE} "$H2PARK" --listen "127.0.0.1:$PORT" --tls-listen "127.0.0.1:$TPORT" --cert "$TMP/cert.pem" \
      --key "$TMP/key.pem" --root "$TMP/www" --workers "${WORKERS:-1}" "$@" >"$TMP/daemon.log" 2>&1 &
    DPID=$!
    PIDS="$PIDS $DPID"
    for i in $(seq 1 200); do
      if curl -s -o /dev/null --http2-prior-knowledge "http://127.0.0.1:$PORT/-/healthz" 2>/dev/null; then
        return 0
      fi
      kill -0 "$DPID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$DPID" 2>/dev/null
    wait "$DPID" 2>/dev/null
  done
  echo "could not start the daemon:" >&2
  cat "$TMP/daemon.log" >&2
  return 1
}

stop_daemon() {
  kill -TERM "$DPID" 2>/dev/null
  wait "$DPID" 2>/dev/null
  DSTATUS=$?
  # With H2PARK_DEBUG=corostackpaint=1 the daemon logs its deepest stack use at exit.
  if [ -n "${STACK_REPORT:-}" ]; then grep -h 'deepest coroutine stack' "$TMP/daemon.log" >> "$STACK_REPORT" || true; fi
}

# stat_of FIELD: one figure from /-/stats (over h2c).
stats_json() { curl -s --http2-prior-knowledge "http://127.0.0.1:$PORT/-/stats"; }
stat_of() { stats_json | sed -n "s/.*\"$1\": \([0-9a-z]*\).*/\1/p"; }
stat_from() { printf '%s' "$1" | sed -n "s/.*\"$2\": \([0-9a-z]*\).*/\1/p"; }

# wait_stat FIELD VALUE [seconds]: polls until FIELD == VALUE.
wait_stat() {
  local deadline=$(( SECONDS + ${3:-20} ))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(stat_of "$1")" = "$2" ] && return 0
    sleep 0.2
  done
  return 1
}

# h2load_idle N URL-BASE SECONDS: N connections, one request each at once and one more
# after SECONDS, in the background; sets LOADPID, output in $TMP/h2load.out.
h2load_idle() {
  local n=$1 base=$2 later=$3
  printf '0.0\t%s/-/healthz\n%s.0\t%s/-/healthz\n' "$base" "$((later * 1000))" "$base" > "$TMP/timing.txt"
  timeout $((later + 60)) h2load -c "$n" -t 1 --timing-script-file="$TMP/timing.txt" "$base" >"$TMP/h2load.out" 2>&1 &
  LOADPID=$!
  PIDS="$PIDS $LOADPID"
}

# config_error NAME WANT args...: h2park with args exits 2 and its output says WANT.
config_error() {
  local name=$1 want=$2; shift 2
  timeout 10 "$H2PARK" "$@" >"$TMP/err.out" 2>&1; local rc=$?
  [ $rc = 2 ] && grep -qF -- "$want" "$TMP/err.out"
  check "$name" $? "exit $rc: $(head -3 "$TMP/err.out")"
}

# free_port: a port nothing listens on now, below the kernel's ephemeral range (so no
# client socket of another test holds it), for configurations that name their own.  A
# port once given is never given again in the same test: a test takes several ports
# before its servers bind them, and two of its servers on one port (one of them failing
# to bind, the test then speaking to the other) failed a CI run.
free_port() {
  local p attempt
  for attempt in $(seq 1 100); do
    p=$(( 20000 + (RANDOM * 7 + $$ + attempt * 131) % 12000 ))
    grep -qx "$p" "$TMP/ports.given" 2>/dev/null && continue
    if ! ss -Htan "( sport = :$p )" | grep -q .; then echo "$p" >> "$TMP/ports.given"; echo "$p"; return 0; fi
  done
  return 1
}

# hold_port PORT: another program listens on 127.0.0.1:PORT (without SO_REUSEPORT) until
# the test ends or HOLDPID is killed; returns once it does.
hold_port() {
  python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$1)); s.listen(); time.sleep(60)" &
  HOLDPID=$!
  PIDS="$PIDS $HOLDPID"
  for i in $(seq 1 100); do
    ss -Hltn "( sport = :$1 )" | grep -q . && return 0
    sleep 0.05
  done
  return 1
}

# start_config CONF PORT [args...]: h2park -c CONF, up once PORT answers /-/healthz;
# sets DPID, logs to $TMP/daemon.log.
start_config() {
  local conf=$1 port=$2 i; shift 2
  "$H2PARK" -c "$conf" "$@" >"$TMP/daemon.log" 2>&1 &
  DPID=$!
  PIDS="$PIDS $DPID"
  for i in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$port/-/healthz" && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
  done
  echo "could not start the daemon:" >&2
  cat "$TMP/daemon.log" >&2
  return 1
}

# proxy_conf_head NAME: sets P and T to free ports and prints the top of a proxying test's
# configuration (a cleartext and a TLS listener, the test's site, one worker, a JSON access
# log in $TMP/NAME.access); the test adds its upstreams and locations.
proxy_conf_head() {
  P=$(free_port); T=$(free_port)
  printf '%s\n' "listen = 127.0.0.1:$P" "listen = 127.0.0.1:$T tls" "cert = $TMP/cert.pem" "key = $TMP/key.pem" \
    "root = $TMP/www" "workers = 1" "access_log = $TMP/$1.access" "access_log_format = json"
}

# reload_and_wait: SIGHUP, then wait until the daemon logs that every worker took the
# new configuration or that the reload failed (the Nth such line, N counted before).
reload_and_wait() {
  local before i
  before=$(grep -cE 'reload: every worker|reload failed' "$TMP/daemon.log")
  kill -HUP "$DPID"
  for i in $(seq 1 200); do
    [ "$(grep -cE 'reload: every worker|reload failed' "$TMP/daemon.log")" -gt "$before" ] && return 0
    sleep 0.1
  done
  return 1
}

# start_haproxy_http HPORT LINE...: haproxy in mode http on 127.0.0.1:HPORT, its backend
# made of the given lines (server, checks); sets HPPID, logs to $TMP/haproxy.log.
start_haproxy_http() {
  local hport=$1; shift
  { printf 'global\n  log stderr format short local0 info\ndefaults\n  mode http\n  timeout connect 2s\n'
    printf '  timeout client 5s\n  timeout server 5s\nfrontend fe\n  bind 127.0.0.1:%s\n  default_backend be\n' "$hport"
    printf 'backend be\n'; printf '  %s\n' "$@"; } > "$TMP/haproxy.cfg"
  haproxy -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 & HPPID=$!; PIDS="$PIDS $HPPID"
}

# start_nginx < HTTP-BLOCK: nginx in the foreground, as a child of this test (sets NGPID),
# with its pid, error log and temporary files in $TMP/nginx, no access log, and the lines
# read from stdin (upstreams, servers) inside its http block.
start_nginx() {
  mkdir -p "$TMP/nginx"
  chmod a+x "$TMP"; chmod a+rwx "$TMP/nginx"     # nginx's workers run as another user
  { printf 'worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log;\n' "$TMP/nginx" "$TMP/nginx"
    printf 'events { worker_connections 256; }\nhttp {\n  access_log off;\n'
    printf '  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;\n' "$TMP/nginx" "$TMP/nginx" "$TMP/nginx"
    printf '  uwsgi_temp_path %s; scgi_temp_path %s;\n' "$TMP/nginx" "$TMP/nginx"
    cat
    printf '}\n'; } > "$TMP/nginx/nginx.conf"
  nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" & NGPID=$!; PIDS="$PIDS $NGPID"
}

# get PORT PATH: the body of an HTTP/1.1 GET (empty if it failed).
get() { curl -s -m 5 "http://127.0.0.1:$1$2"; }
code() { curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1$2"; }
