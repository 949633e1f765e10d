#!/bin/bash
# Authentication: auth_basic against htpasswd files written by Apache's htpasswd -B,
# openssl passwd -5/-6 and mkpasswd (yescrypt), over HTTP/1.1, h2c and TLS; hostile
# htpasswd files and Authorization fields; a reload that changes a password; a flood of
# wrong bcrypt passwords while /-/healthz and an authenticated client keep being answered;
# auth_request in front of a Go net/http authentication app (tests/upstream_auth.go); and
# limit_req before either: a flood over the rate refused with 429 before any password is
# checked or the authentication app asked.
. "$(dirname "$0")/lib.sh"
make_site
HERE=$(cd "$(dirname "$0")" && pwd)
for need in htpasswd curl h2load; do
  command -v $need >/dev/null || { echo "ok auth # SKIP $need not installed"; exit 0; }
done
mkdir -p "$TMP/www/private/open" "$TMP/www/api"
echo "private page" > "$TMP/www/private/page.txt"
echo "open page" > "$TMP/www/private/open/page.txt"
echo "api page" > "$TMP/www/api/page.txt"

# ---- the users' files, made by the tools people use ----
htpasswd -cbB -C 5 "$TMP/users" alice 'alice pw' 2>/dev/null
echo "bob:$(openssl passwd -6 'bob-pw')" >> "$TMP/users"
echo "carol:$(openssl passwd -5 'carol-pw')" >> "$TMP/users"
have_yescrypt=0
if command -v mkpasswd >/dev/null; then
  echo "dave:$(mkpasswd -m yescrypt 'dave-pw')" >> "$TMP/users" && have_yescrypt=1
fi

basic_conf() { # basic_conf NAME: a configuration with a protected location, to stdout
  proxy_conf_head "$1"
  cat <<EOF
location /private/ {
    auth_basic = "Private area"
    auth_basic_user_file = $TMP/users
}
location /private/open/ {
    auth_basic = off
}
EOF
}
basic_conf basic > "$TMP/basic.conf"
start_config "$TMP/basic.conf" "$P" || exit 1

# code PROTO USER:PASS PATH: the status of a GET with those credentials ("" for none).
auth_code() {
  local proto=$1 cred=$2 path=$3 url
  case $proto in
    h1) url="http://127.0.0.1:$P$path"; set -- --http1.1 ;;
    h2c) url="http://127.0.0.1:$P$path"; set -- --http2-prior-knowledge ;;
    tls) url="https://127.0.0.1:$T$path"; set -- --http2 -k ;;
  esac
  curl -s -m 10 -o /dev/null -w '%{http_code}' "$@" ${cred:+-u "$cred"} "$url"
}

users="alice:alice pw bob:bob-pw carol:carol-pw"
[ $have_yescrypt = 1 ] && users="$users dave:dave-pw"
for proto in h1 h2c tls; do

  for u in alice bob carol dave; do
    [ $u = dave ] && [ $have_yescrypt = 0 ] && continue
    case $u in alice) pw='alice pw' ;; *) pw="$u-pw" ;; esac
    got=$(auth_code $proto "$u:$pw" /private/page.txt)
    [ "$got" = 200 ]; check "basic_${u}_right_password_$proto" $? "got $got"
    got=$(auth_code $proto "$u:$pw-wrong" /private/page.txt)
    [ "$got" = 401 ]; check "basic_${u}_wrong_password_$proto" $? "got $got"
  done
  got=$(auth_code $proto "" /private/page.txt)
  [ "$got" = 401 ]; check "basic_no_credentials_$proto" $? "got $got"
  got=$(auth_code $proto "mallory:alice pw" /private/page.txt)
  [ "$got" = 401 ]; check "basic_unknown_user_$proto" $? "got $got"
  got=$(auth_code $proto "" /private/open/page.txt)
  [ "$got" = 200 ]; check "basic_lifted_by_off_$proto" $? "got $got"
  got=$(auth_code $proto "" /index.html)
  [ "$got" = 200 ]; check "basic_not_elsewhere_$proto" $? "got $got"
done
[ $have_yescrypt = 1 ] || echo "ok basic_yescrypt # SKIP mkpasswd (whois) not installed"

hdrs=$(curl -s -D - -o "$TMP/401.body" "http://127.0.0.1:$P/private/page.txt")
echo "$hdrs" | grep -qi '^www-authenticate: Basic realm="Private area", charset="UTF-8"'
check basic_401_has_challenge $? "$(echo "$hdrs" | head -8)"
grep -q 'private page' "$TMP/401.body"; [ $? != 0 ]
check basic_401_no_content $? "$(cat "$TMP/401.body")"
hdrs=$(curl -s --http2-prior-knowledge -D - -o /dev/null "http://127.0.0.1:$P/private/page.txt")
echo "$hdrs" | grep -qi '^www-authenticate: Basic realm="Private area"'
check basic_401_has_challenge_h2c $? "$(echo "$hdrs" | head -8)"
got=$(curl -s -I -u 'alice:alice pw' -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/private/page.txt")
[ "$got" = 200 ]; check basic_head_request $? "got $got"

# ---- the Authorization field is the peer's: garbage is a 401, never a crash ----
b64() { printf '%b' "$1" | base64 -w0; }
garbage=(
  "bad_base64|Basic !!!!####"
  "base64_bad_padding|Basic YWxp=ZTp4"
  "base64_bad_length|Basic YWxpY2U6eA"
  "no_colon|Basic $(b64 'alicealice pw')"
  "empty_user|Basic $(b64 ':alice pw')"
  "nul_in_password|Basic $(b64 'alice:alice\0pw')"
  "non_utf8|Basic $(b64 '\xff\xfe\x80:\xc3\x28\xa0')"
  "non_utf8_raw|Basic \xff\xfe\xfd\xfc"
  "scheme_missing|$(b64 'alice:alice pw')"
  "scheme_alone|Basic"
  "scheme_alone_space|Basic   "
  "other_scheme|Bearer $(b64 'alice:alice pw')"
  "digest_scheme|Digest username=\"alice\", realm=\"Private area\""
  "scheme_glued|Basic$(b64 'alice:alice pw')"
  "huge|Basic $(head -c 6000 /dev/zero | tr '\0' 'A')"
  "huge_valid_prefix|Basic $(b64 'alice:alice pw')$(head -c 6000 /dev/zero | tr '\0' 'A')"
)
for proto in h1 h2c tls; do
  case $proto in
    h1) url="http://127.0.0.1:$P/private/page.txt"; opts=(--http1.1) ;;
    h2c) url="http://127.0.0.1:$P/private/page.txt"; opts=(--http2-prior-knowledge) ;;
    tls) url="https://127.0.0.1:$T/private/page.txt"; opts=(--http2 -k) ;;
  esac
  for g in "${garbage[@]}"; do
    name=${g%%|*}; value=$(printf '%b' "${g#*|}")
    got=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "${opts[@]}" -H "Authorization: $value" "$url")
    # (HTTP/2 forbids a value that ends in a space: the stream is reset before any handler.)
    [ "$got" = 401 ] || { [ $proto != h1 ] && [ "$got" = 000 ] && [ "$name" = scheme_alone_space ]; }
    check "basic_garbage_${name}_$proto" $? "got $got"
  done
  got=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "${opts[@]}" -H "Authorization: Basic $(b64 'alice:alice pw')" \
    -H "Authorization: Basic $(b64 'alice:alice pw')" "$url")
  [ "$got" = 401 ]; check "basic_garbage_two_fields_$proto" $? "got $got"
  got=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "${opts[@]}" -H "Authorization: bAsIc  $(b64 'alice:alice pw')" "$url")
  [ "$got" = 200 ]; check "basic_scheme_any_case_$proto" $? "got $got"
done
kill -0 "$DPID"; check basic_garbage_daemon_alive $? "the daemon died"

# ---- the access log and /metrics say what happened ----
sleep 0.3
grep '"status":401' "$TMP/basic.access" | grep -q '"refused_by":"auth_basic"'
check basic_access_log_refused_by $? "$(grep '"status":401' "$TMP/basic.access" | head -2)"
grep '"status":200' "$TMP/basic.access" | grep -q 'refused_by'; [ $? != 0 ]
check basic_access_log_passed_not_refused $? "$(grep '"status":200' "$TMP/basic.access" | grep refused_by | head -2)"
m=$(curl -s "http://127.0.0.1:$P/metrics")
ok_n=$(echo "$m" | sed -n 's/^h2park_auth_total{kind="basic",outcome="success"} //p')
bad_n=$(echo "$m" | sed -n 's/^h2park_auth_total{kind="basic",outcome="failure"} //p')
[ "${ok_n:-0}" -ge 9 ] && [ "${bad_n:-0}" -ge 50 ]
check basic_metrics_counted $? "success ${ok_n:-none}, failure ${bad_n:-none}"
# The dashboard's failed-authentication series, sampled once a second, has them too.
sleep 1.2
d=$(curl -s "http://127.0.0.1:$P/-/dashboard/data")
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["auth_failed_total"][-1] >= int(sys.argv[2]), d["auth_failed_total"][-3:]' "$d" "${bad_n:-50}"
check basic_failures_on_dashboard $? "$(grep -oE '"auth_failed_total":\[[^]]*' <<< "$d" | tail -c 60)"

# ---- the file is read again on reload ----
cp "$TMP/users" "$TMP/users.orig"
htpasswd -bB -C 5 "$TMP/users" alice 'new alice pw' 2>/dev/null
reload_and_wait
got_old=$(auth_code h1 "alice:alice pw" /private/page.txt); got_new=$(auth_code h1 "alice:new alice pw" /private/page.txt)
[ "$got_old" = 401 ] && [ "$got_new" = 200 ]
check basic_reload_reads_file_again $? "old password $got_old, new $got_new"
printf 'alice\n' >> "$TMP/users"
reload_and_wait
grep -q "users:.*expected user:hash" "$TMP/daemon.log"
check basic_reload_bad_file_said $? "$(tail -3 "$TMP/daemon.log")"
got=$(auth_code h1 "alice:new alice pw" /private/page.txt)
[ "$got" = 200 ]; check basic_reload_bad_file_keeps_running $? "got $got"
cp "$TMP/users.orig" "$TMP/users"
reload_and_wait
stop_daemon

# ---- hostile or mistaken users' files: file:line and exit 2 ----
bad_file() { # bad_file NAME WANT CONTENT...: a configuration naming a file with those lines fails
  local name=$1 want=$2; shift 2
  printf '%b\n' "$@" > "$TMP/bad.users"
  printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "auth_basic = x" \
    "auth_basic_user_file = $TMP/bad.users" > "$TMP/bad.conf"
  config_error "htpasswd_$name" "$want" -c "$TMP/bad.conf" --check
}
good="alice:$(openssl passwd -6 pw)"
bad_file empty_hash "bad.users:2: user 'bob': an empty hash" "$good" "bob:"
bad_file plain_text "bad.users:2: user 'bob': not a hash this server takes" "$good" "bob:hunter2"
bad_file sha "bad.users:1: user 'alice': a {SHA} hash" "$(htpasswd -nbs alice pw)"
bad_file apr1 "bad.users:1: user 'alice': an MD5 hash" "$(htpasswd -nbm alice pw)"
bad_file md5_crypt "bad.users:1: user 'alice': an MD5 hash" "alice:$(openssl passwd -1 pw)"
bad_file des_crypt "bad.users:1: user 'alice': not a hash this server takes" "$(htpasswd -nbd alice pw 2>/dev/null)"
bad_file missing_colon "bad.users:3: expected user:hash" "$good" "# a comment" "alice"
bad_file empty_user "bad.users:1: an empty user name" ":$(openssl passwd -6 pw)"
bad_file long_line "bad.users:2: a line longer than 1024 bytes" "$good" "bob:\$6\$$(head -c 5000 /dev/zero | tr '\0' 'a')"
bad_file cut_bcrypt "bad.users:1: user 'alice': a \$2y\$ hash is" "$(htpasswd -nbB -C 4 alice pw | head -c 40)"
bad_file bad_bcrypt_cost "bad.users:1: user 'alice': a malformed hash" \
  "$(htpasswd -nbB -C 4 alice pw | sed 's/\$04\$/$99$/')"
bad_file bad_byte "bad.users:1: user 'alice': a hash with a byte" "$(openssl passwd -6 pw | sed 's/^/alice:/;s/.$/!/')"
bad_file duplicate "bad.users:2: user 'alice' given twice (first at line 1)" "$good" "$good"
bad_file control_in_user "bad.users:1: a control byte in the user name" "al\x01ice:$(openssl passwd -6 pw)"
bad_file no_users "no users in it" "# nobody"
printf 'alice:%s\0\n' "$(openssl passwd -6 pw)" > "$TMP/nul.users"
printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "auth_basic = x" \
  "auth_basic_user_file = $TMP/nul.users" > "$TMP/bad.conf"
config_error htpasswd_nul_byte "a NUL byte" -c "$TMP/bad.conf" --check
mkfifo "$TMP/fifo.users"
printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "auth_basic = x" \
  "auth_basic_user_file = $TMP/fifo.users" > "$TMP/bad.conf"
config_error htpasswd_fifo "bad.conf:4: auth_basic_user_file $TMP/fifo.users: cannot read: a FIFO" -c "$TMP/bad.conf" --check
printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "auth_basic = x" \
  "auth_basic_user_file = $TMP/www" > "$TMP/bad.conf"
config_error htpasswd_directory "a directory" -c "$TMP/bad.conf" --check
printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "auth_basic = x" \
  "auth_basic_user_file = $TMP/none" > "$TMP/bad.conf"
config_error htpasswd_missing "bad.conf:4: auth_basic_user_file $TMP/none: cannot read: No such file" -c "$TMP/bad.conf" --check
printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "location /x/ {" "auth_basic = x" "}" > "$TMP/bad.conf"
config_error auth_basic_without_file "bad.conf:4: auth_basic without auth_basic_user_file" -c "$TMP/bad.conf" --check
printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" 'auth_basic = a"b' > "$TMP/bad.conf"
config_error auth_basic_realm_quote "bad.conf:3: auth_basic: the realm may not hold a quote" -c "$TMP/bad.conf" --check

# ---- auth_request in front of a Go net/http authentication server ----
GOAUTH=skip
if command -v go >/dev/null; then
  GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$TMP/gocache" go build -o "$TMP/upstream_auth" \
    "$HERE/upstream_auth.go" > "$TMP/gobuild.log" 2>&1
  check auth_go_app_builds $? "$(head -5 "$TMP/gobuild.log")"
  GA=$(free_port); GAS=$(free_port); DEAD=$(free_port); HANG=$(free_port)
  make_ca testca; make_leaf authsvc "DNS:auth.test,IP:127.0.0.1" serverAuth
  "$TMP/upstream_auth" "$GA" "$GAS" "$TMP/authsvc.pem" "$TMP/authsvc.key" & PIDS="$PIDS $!"
  # A server that takes connections and never answers.
  python3 -c "import socket,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1',$HANG)); s.listen(64); c=[]
while True: c.append(s.accept())" & PIDS="$PIDS $!"
  for i in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$GA/count" && break; sleep 0.1; done
  GOAUTH=ok
fi
if [ $GOAUTH = ok ]; then
  proxy_conf_head areq > "$TMP/areq.conf"
  cat >> "$TMP/areq.conf" <<EOF
upstream authsvc {
    server = 127.0.0.1:$GA
    keepalive = 4
}
location = /auth {
    proxy_pass = http://authsvc/auth
    proxy_read_timeout = 5s
}
location = /auth-tls {
    proxy_pass = https://127.0.0.1:$GAS/auth
    proxy_ssl_trusted_certificate = $TMP/testca.pem
    proxy_ssl_name = auth.test
}
location = /auth-tls-untrusted {
    proxy_pass = https://127.0.0.1:$GAS/auth
}
location /tlsauth/ {
    auth_request = /auth-tls
    auth_request_copy_headers = X-User
    proxy_pass = http://127.0.0.1:$GA/app/
}
location /tlsuntrusted/ {
    auth_request = /auth-tls-untrusted
}
location = /auth-hang {
    proxy_pass = http://127.0.0.1:$HANG/
    proxy_read_timeout = 1s
}
location = /auth-refused {
    proxy_pass = http://127.0.0.1:$DEAD/auth
}
location /app/ {
    auth_request = /auth
    auth_request_copy_headers = X-User X-Groups
    proxy_pass = http://127.0.0.1:$GA
}
location /api/ {
    auth_request = /auth
}
location /hang/ {
    auth_request = /auth-hang
}
location /refused/ {
    auth_request = /auth-refused
}
location /both/ {
    auth_basic = Both
    auth_basic_user_file = $TMP/users
    auth_request = /auth
}
EOF
  mkdir -p "$TMP/www/both" "$TMP/www/hang" "$TMP/www/refused"
  echo both > "$TMP/www/both/page.txt"; echo hang > "$TMP/www/hang/page.txt"; echo refused > "$TMP/www/refused/page.txt"
  mkdir -p "$TMP/www/tlsuntrusted"; echo tls > "$TMP/www/tlsuntrusted/page.txt"
  start_config "$TMP/areq.conf" "$P" || exit 1
  # areq PROTO PATH [curl args]: "STATUS BODY" of a GET, the body's lines joined by spaces
  areq() {
    local proto=$1 path=$2 url; shift 2
    case $proto in
      h1) url="http://127.0.0.1:$P$path"; set -- --http1.1 "$@" ;;
      h2c) url="http://127.0.0.1:$P$path"; set -- --http2-prior-knowledge "$@" ;;
      tls) url="https://127.0.0.1:$T$path"; set -- --http2 -k "$@" ;;
    esac
    : > "$TMP/areq.body"
    curl -s -m 15 -o "$TMP/areq.body" -w '%{http_code}' "$@" "$url"; printf ' '; tr '\n' ' ' < "$TMP/areq.body"
  }
  for proto in h1 h2c tls; do
    got=$(areq $proto /app/x -H 'X-Token: good')
    [ "$got" = '200 user="alice" groups="admins" token="good" ' ]; check "areq_good_token_user_copied_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: good' -H 'X-User: mallory' -H 'X-Groups: root')
    [ "$got" = '200 user="alice" groups="admins" token="good" ' ]; check "areq_client_x_user_replaced_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: good-nouser' -H 'X-User: mallory')
    [ "$got" = '200 user="" groups="" token="good-nouser" ' ]; check "areq_client_x_user_removed_$proto" $? "got $got"
    got=$(areq $proto /api/page.txt -H 'X-Token: good')
    [ "$got" = '200 api page ' ]; check "areq_static_behind_it_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: nope' -D "$TMP/areq.h")
    [ "${got%% *}" = 401 ] && grep -qi '^www-authenticate: Bearer realm="test"' "$TMP/areq.h" && ! grep -q 'user=' "$TMP/areq.body"
    check "areq_401_passed_with_challenge_$proto" $? "got $got $(cat "$TMP/areq.h")"
    got=$(areq $proto /app/x)
    [ "${got%% *}" = 401 ]; check "areq_no_token_401_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: forbidden')
    [ "${got%% *}" = 403 ]; check "areq_403_passed_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: teapot')
    [ "${got%% *}" = 500 ]; check "areq_other_status_500_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: redirect')
    [ "${got%% *}" = 500 ]; check "areq_redirect_500_$proto" $? "got $got"
    got=$(areq $proto /app/x -H 'X-Token: big')
    [ "$got" = '200 user="big" groups="" token="big" ' ]; check "areq_big_answer_body_$proto" $? "got $got"
    got=$(areq $proto /auth -H 'X-Token: good')
    [ "${got%% *}" = 404 ]; check "areq_auth_location_internal_$proto" $? "got $got"
    # The authentication server over TLS (its certificate checked against the test's CA).
    got=$(areq $proto /tlsauth/x -H 'X-Token: good')
    [ "$got" = '200 user="alice" groups="" token="good" ' ]; check "areq_https_server_good_$proto" $? "got $got"
    got=$(areq $proto /tlsauth/x -H 'X-Token: nope')
    [ "${got%% *}" = 401 ]; check "areq_https_server_401_$proto" $? "got $got"
    got=$(areq $proto /tlsuntrusted/page.txt -H 'X-Token: good')
    [ "${got%% *}" = 500 ]; check "areq_https_server_untrusted_500_$proto" $? "got $got"
  done
  # What the authentication server was sent: a GET of its URI without a body, the original
  # method and URI, the client's fields but the framing ones.
  curl -s -o /dev/null -X POST --data-binary 'secret body' -H 'X-Token: good' -H 'Cookie: a=1' "http://127.0.0.1:$P/app/post?q=1"
  last=$(curl -s "http://127.0.0.1:$GA/last")
  echo "$last" | grep -qx 'method: GET' && echo "$last" | grep -qx 'uri: /auth' && echo "$last" | grep -qx 'body: 0' &&
    echo "$last" | grep -qx 'x-original-method: POST' && echo "$last" | grep -qx 'x-original-uri: /app/post?q=1' &&
    echo "$last" | grep -qx 'x-forwarded-method: POST' && echo "$last" | grep -qx 'x-forwarded-uri: /app/post?q=1' &&
    echo "$last" | grep -qx 'x-token: good' && echo "$last" | grep -qx 'cookie: a=1' &&
    ! echo "$last" | grep -qi '^content-length: [1-9]'
  check areq_subrequest_fields $? "$last"
  curl -s -o /dev/null --http2-prior-knowledge -H 'X-Token: good' -H 'Cookie: a=1' -H 'Cookie: b=2' "http://127.0.0.1:$P/app/x"
  last=$(curl -s "http://127.0.0.1:$GA/last")
  echo "$last" | grep -qx 'cookie: a=1; b=2'; check areq_subrequest_h2_cookies_joined $? "$last"
  before=$(curl -s "http://127.0.0.1:$GA/count")
  for i in 1 2 3 4 5 6 7 8 9 10; do curl -s -o /dev/null -H 'X-Token: good' "http://127.0.0.1:$P/api/page.txt"; done
  after=$(curl -s "http://127.0.0.1:$GA/count")
  [ $(( ${after% *} - ${before% *} )) = 10 ] && [ $(( ${after#* } - ${before#* } )) -le 1 ]
  check areq_keepalive_pool_reused $? "requests and connections before: $before, after: $after"
  t0=$(date +%s.%N)
  got=$(areq h1 /hang/page.txt -H 'X-Token: good')
  t1=$(date +%s.%N)
  [ "${got%% *}" = 504 ]; check areq_hanging_server_504 $? "got $got"
  echo "# auth_request to a server that never answers: 504 after $(echo "$t1 - $t0" | bc) s (proxy_read_timeout 1s)"
  for proto in h2c tls; do
    got=$(areq $proto /hang/page.txt)
    [ "${got%% *}" = 504 ]; check "areq_hanging_server_504_$proto" $? "got $got"
  done
  for proto in h1 h2c tls; do
    got=$(areq $proto /refused/page.txt)
    [ "${got%% *}" = 500 ]; check "areq_refused_connection_500_$proto" $? "got $got"
  done
  grep -q "auth_request /auth-refused: upstream 127.0.0.1:$DEAD: .*connect" "$TMP/daemon.log"
  check areq_refused_logged $? "$(grep auth_request "$TMP/daemon.log" | tail -2)"
  # Both: auth_basic first (satisfy all), then auth_request.
  got=$(areq h1 /both/page.txt -H 'X-Token: good' -D "$TMP/areq.h")
  [ "${got%% *}" = 401 ] && grep -qi 'www-authenticate: Basic realm="Both"' "$TMP/areq.h"
  check areq_both_basic_first $? "got $got"
  got=$(areq h1 /both/page.txt -u 'bob:bob-pw' -H 'X-Token: nope')
  [ "${got%% *}" = 401 ]; check areq_both_request_second $? "got $got"
  got=$(areq h1 /both/page.txt -u 'bob:bob-pw' -H 'X-Token: good')
  [ "$got" = '200 both ' ]; check areq_both_pass $? "got $got"
  sleep 0.3
  grep '"status":401' "$TMP/areq.access" | grep -q '"refused_by":"auth_request"' &&
    grep '"status":500' "$TMP/areq.access" | grep -q '"refused_by":"auth_request"' &&
    grep '"status":401' "$TMP/areq.access" | grep -q '"refused_by":"auth_basic"'
  check areq_access_log_refused_by $? "$(grep refused_by "$TMP/areq.access" | head -3)"
  m=$(curl -s "http://127.0.0.1:$P/metrics")
  s_n=$(echo "$m" | sed -n 's/^h2park_auth_total{kind="request",outcome="success"} //p')
  f_n=$(echo "$m" | sed -n 's/^h2park_auth_total{kind="request",outcome="failure"} //p')
  e_n=$(echo "$m" | sed -n 's/^h2park_auth_total{kind="request",outcome="error"} //p')
  [ "${s_n:-0}" -ge 20 ] && [ "${f_n:-0}" -ge 9 ] && [ "${e_n:-0}" -ge 12 ]
  check areq_metrics_counted $? "success ${s_n:-none}, failure ${f_n:-none}, error ${e_n:-none}"
  kill -0 "$DPID"; check areq_daemon_alive $? "the daemon died"
  stop_daemon
  # Its configuration errors name the line.
  areq_conf() { printf '%s\n' "listen = 127.0.0.1:$(free_port)" "root = $TMP/www" "$@" > "$TMP/bad.conf"; }
  areq_conf "location /a/ {" "auth_request = /nothing" "}"
  config_error areq_names_no_proxy "bad.conf:4: auth_request = /nothing names a location without proxy_pass" -c "$TMP/bad.conf" --check
  areq_conf "location /a/ {" "auth_request = /a/x" "proxy_pass = http://127.0.0.1:$GA" "}"
  config_error areq_names_itself "bad.conf:4: auth_request = /a/x names the location it protects" -c "$TMP/bad.conf" --check
  areq_conf "location = /auth {" "proxy_pass = h2c://127.0.0.1:$GA" "}" "location /a/ {" "auth_request = /auth" "}"
  config_error areq_names_h2 "bad.conf:7: auth_request = /auth names a location that passes over HTTP/2" -c "$TMP/bad.conf" --check
  areq_conf "auth_request = auth"
  config_error areq_not_a_path "bad.conf:3: auth_request: 'auth' is not off or a path" -c "$TMP/bad.conf" --check
  areq_conf "auth_request = /a%20b"
  config_error areq_escape "bad.conf:3: auth_request: '/a%20b' is not off" -c "$TMP/bad.conf" --check
  areq_conf "auth_request_copy_headers = Host"
  config_error areq_copy_host "bad.conf:3: auth_request_copy_headers: host is read by the server itself" -c "$TMP/bad.conf" --check
  areq_conf "auth_request_copy_headers = X-User Bad:Name"
  config_error areq_copy_bad_name "bad.conf:3: auth_request_copy_headers: 'Bad:Name' is not a field name" -c "$TMP/bad.conf" --check
else
  echo "ok auth_request # SKIP go not installed"
fi

# ---- limit_req before authentication: a flood over the rate is refused unchecked ----
# nginx's order (preaccess before access): past its burst, a client's guesses are 429s
# and no password is checked, no authentication server asked - the limit is what makes
# guessing slow.  1r/m burst=2 nodelay: three requests pass to authentication, then 429.
proxy_conf_head limauth > "$TMP/limauth.conf"
cat >> "$TMP/limauth.conf" <<EOF
location /lb/ {
    limit_req = 1r/m burst=2 nodelay
    auth_basic = Limited
    auth_basic_user_file = $TMP/users
}
EOF
if [ $GOAUTH = ok ]; then
  cat >> "$TMP/limauth.conf" <<EOF
location = /auth {
    proxy_pass = http://127.0.0.1:$GA/auth
}
location /lr/ {
    limit_req = 1r/m burst=2 nodelay
    auth_request = /auth
}
EOF
fi
mkdir -p "$TMP/www/lb" "$TMP/www/lr"; echo lb > "$TMP/www/lb/page.txt"; echo lr > "$TMP/www/lr/page.txt"
start_config "$TMP/limauth.conf" "$P" || exit 1
auth_metric() { curl -s "http://127.0.0.1:$P/metrics" | sed -n "s/^h2park_auth_total{kind=\"$1\",outcome=\"$2\"} //p"; }
# flood SOURCE PATH ARGS...: 20 requests one after another from SOURCE, each with its own
# wrong credential (ARGS with %d for its number); their statuses by count, as "401:3 429:17"
flood() {
  local src=$1 path=$2 i; shift 2
  for i in $(seq 1 20); do
    curl -s -m 10 --interface "$src" -o /dev/null -w '%{http_code}\n' $(printf -- "$*" "$i") "http://127.0.0.1:$P$path"
  done | sort | uniq -c | awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1 }'
}
f0=$(auth_metric basic failure)
got=$(flood 127.0.0.21 /lb/page.txt "-u bob:wrong%d")
f1=$(auth_metric basic failure)
[ "$got" = "401:3 429:17" ] && [ $(( ${f1:-0} - ${f0:-0} )) = 3 ]
check limit_req_before_auth_basic $? "statuses $got; passwords checked $(( ${f1:-0} - ${f0:-0} )) (want 3)"
got=$(curl -s --interface 127.0.0.21 -o /dev/null -w '%{http_code}' -u bob:bob-pw "http://127.0.0.1:$P/lb/page.txt")
f2=$(auth_metric basic success)
[ "$got" = 429 ] && [ -z "$f2" -o "${f2:-0}" = 0 ]
check limit_req_before_auth_basic_right_password_too $? "got $got, passwords that passed ${f2:-0}"
got=$(curl -s --interface 127.0.0.22 -o /dev/null -w '%{http_code}' -u bob:bob-pw "http://127.0.0.1:$P/lb/page.txt")
[ "$got" = 200 ]; check limit_req_auth_basic_other_client_served $? "got $got"
sleep 0.3
n429=$(grep '"client":"127.0.0.21"' "$TMP/limauth.access" | grep '"status":429' | grep -c '"refused_by":"limit_req = 1r/m burst=2 nodelay (')
n401=$(grep '"client":"127.0.0.21"' "$TMP/limauth.access" | grep '"status":401' | grep -c '"refused_by":"auth_basic"')
[ "$n429" = 18 ] && [ "$n401" = 3 ]
check limit_req_before_auth_basic_access_log $? "429 by limit_req: $n429 (want 18), 401 by auth_basic: $n401 (want 3); $(grep '"client":"127.0.0.21"' "$TMP/limauth.access" | tail -1)"
if [ $GOAUTH = ok ]; then
  c0=$(curl -s "http://127.0.0.1:$GA/count"); r0=$(auth_metric request failure)
  got=$(flood 127.0.0.23 /lr/page.txt "-H X-Token:nope%d")
  c1=$(curl -s "http://127.0.0.1:$GA/count"); r1=$(auth_metric request failure)
  [ "$got" = "401:3 429:17" ] && [ $(( ${c1% *} - ${c0% *} )) = 3 ] && [ $(( ${r1:-0} - ${r0:-0} )) = 3 ]
  check limit_req_before_auth_request $? "statuses $got; the authentication server asked $(( ${c1% *} - ${c0% *} )) times, failures counted $(( ${r1:-0} - ${r0:-0} )) (want 3)"
  got=$(curl -s --interface 127.0.0.24 -o /dev/null -w '%{http_code}' -H 'X-Token: good' "http://127.0.0.1:$P/lr/page.txt")
  [ "$got" = 200 ]; check limit_req_auth_request_other_client_served $? "got $got"
  sleep 0.3
  n429=$(grep '"client":"127.0.0.23"' "$TMP/limauth.access" | grep '"status":429' | grep -c '"refused_by":"limit_req = 1r/m burst=2 nodelay (')
  n401=$(grep '"client":"127.0.0.23"' "$TMP/limauth.access" | grep '"status":401' | grep -c '"refused_by":"auth_request"')
  [ "$n429" = 17 ] && [ "$n401" = 3 ]
  check limit_req_before_auth_request_access_log $? "429 by limit_req: $n429 (want 17), 401 by auth_request: $n401 (want 3)"
else
  echo "ok limit_req_before_auth_request # SKIP go not installed"
fi
kill -0 "$DPID"; check limit_req_auth_daemon_alive $? "the daemon died"
stop_daemon

# ---- a flood of wrong bcrypt passwords: the rest keeps being answered ----
htpasswd -cbB -C 10 "$TMP/slow.users" alice 'alice pw' 2>/dev/null
proxy_conf_head flood > "$TMP/flood.conf"
sed -i 's/^workers = 1$/workers = 2/' "$TMP/flood.conf"
cat >> "$TMP/flood.conf" <<EOF
location /private/ {
    auth_basic = Flood
    auth_basic_user_file = $TMP/slow.users
}
EOF
start_config "$TMP/flood.conf" "$P" || exit 1
good_auth="Authorization: Basic $(b64 'alice:alice pw')"
bad_auth="Authorization: Basic $(b64 'alice:not the password')"
t0=$(date +%s.%N)
got=$(curl -s -o /dev/null -w '%{http_code}' -H "$good_auth" "http://127.0.0.1:$P/private/page.txt")
t1=$(date +%s.%N)
[ "$got" = 200 ]; check basic_bcrypt_cost10_passes $? "got $got"
got=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -H "$good_auth" "http://127.0.0.1:$P/private/page.txt")
echo "# bcrypt cost 10: first check $(echo "$t1 - $t0" | bc) s, the next one from the cache: ${got#* } s"
# 1,000 wrong passwords: 334 over h2c, 333 over HTTP/1.1, 333 over TLS, 60 clients each -
# more at once than the password checks' queue holds (128), so some are refused with 503.
h2load -n 334 -c 60 -H "$bad_auth" "http://127.0.0.1:$P/private/page.txt" > "$TMP/flood.h2c" 2>&1 & F1=$!
h2load --h1 -n 333 -c 60 -H "$bad_auth" "http://127.0.0.1:$P/private/page.txt" > "$TMP/flood.h1" 2>&1 & F2=$!
h2load -n 333 -c 60 -H "$bad_auth" "https://127.0.0.1:$T/private/page.txt" > "$TMP/flood.tls" 2>&1 & F3=$!
PIDS="$PIDS $F1 $F2 $F3"
: > "$TMP/healthz.times"; : > "$TMP/cached.codes"
while kill -0 $F1 2>/dev/null || kill -0 $F2 2>/dev/null || kill -0 $F3 2>/dev/null; do
  curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}\n' "http://127.0.0.1:$P/-/healthz" >> "$TMP/healthz.times"
  curl -s -m 10 -o /dev/null -w '%{http_code} %{time_total}\n' -H "$good_auth" "http://127.0.0.1:$P/private/page.txt" \
    >> "$TMP/cached.codes"
  sleep 0.05
done
wait $F1 $F2 $F3
n=$(wc -l < "$TMP/healthz.times"); bad=$(grep -vc '^200 ' "$TMP/healthz.times")
[ "$n" -ge 5 ] && [ "$bad" = 0 ]; check basic_flood_healthz_answers $? "$bad of $n /-/healthz not 200"
n2=$(wc -l < "$TMP/cached.codes"); bad2=$(grep -vc '^200 ' "$TMP/cached.codes")
[ "$n2" -ge 5 ] && [ "$bad2" = 0 ]; check basic_flood_authenticated_client_answers $? "$bad2 of $n2 not 200"
sort -n -k2 "$TMP/healthz.times" | awk '{ t[NR] = $2 } END { printf "# /-/healthz during the flood: %d requests, median %.1f ms, p90 %.1f ms, max %.1f ms\n", NR, t[int(NR/2)+1]*1000, t[int(NR*0.9)+1]*1000, t[NR]*1000 }'
sort -n -k2 "$TMP/cached.codes" | awk '{ t[NR] = $2 } END { printf "# an authenticated client (the cache) during the flood: median %.1f ms, max %.1f ms\n", t[int(NR/2)+1]*1000, t[NR]*1000 }'
total=0
for f in h2c h1 tls; do
  s4=$(sed -n 's/^status codes: [0-9]* 2xx, [0-9]* 3xx, \([0-9]*\) 4xx, \([0-9]*\) 5xx$/\1 \2/p' "$TMP/flood.$f")
  total=$(( total + ${s4% *} + ${s4#* } ))
  echo "# flood over $f: $(grep -E '^finished in' "$TMP/flood.$f"); 4xx 5xx: $s4"
done
[ "$total" = 1000 ]; check basic_flood_every_wrong_password_refused $? "$total of 1000 answered 401/503"
m=$(curl -s "http://127.0.0.1:$P/metrics")
echo "# $(echo "$m" | grep '^h2park_auth_total{kind="basic"' | tr '\n' ' ')"
stop_daemon
