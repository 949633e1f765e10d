#!/bin/sh
# ensure-deps.sh build|test|bench|fuzz [STAMP]: checks that the Debian packages a make target
# needs are installed; as root with apt-get, installs the missing ones, otherwise stops and
# names the exact packages to install.  Keeps one list per purpose so `make` does not pull
# in the test clients and `make test` does not pull in the benchmark peers.
#
# With STAMP (the Makefile's included build/deps/PURPOSE.mk), STAMP is written when it is
# missing or when packages were installed, and left alone otherwise: make rereads its
# makefiles when an included one changes, so the rules that name files from those packages
# (llhttp's sources, the headers) are read again once the packages are there.
set -eu
want=${1:?usage: ensure-deps.sh build|test|bench|fuzz [STAMP]}
stamp=${2:-}
# libc6-dev by name: it depends on libcrypt-dev, so a machine without libcrypt-dev has no C
# library headers either, and installing libcrypt-dev alone does not bring them back.
build="pkg-config libc6-dev libnghttp2-dev libev-dev libssl-dev libcrypt-dev node-llhttp zlib1g-dev libbrotli-dev libzstd-dev"
# systemd: systemd-socket-activate and systemd-analyze; man-db and groff-base: the manual;
# prometheus: promtool checks /metrics; valgrind: the instruction budget (e2e_instructions);
# python3-h2: an HTTP/2 client that reuses one connection for several names; python3-aiohttp,
# python3-websockets, python3-grpcio, golang-go with golang-github-gorilla-websocket-dev,
# gunicorn, h2o: upstreams and clients of the reverse proxy's tests; apache2-utils (htpasswd)
# and whois (mkpasswd): the users' files of auth_basic's tests; the rest: programs run
# under the drop-in malloc.
test="$build nghttp2-client curl openssl procps iproute2 python3 python3-hpack python3-h2 python3-brotli python3-zstandard python3-aiohttp python3-websockets python3-grpcio nginx-light haproxy chromium prometheus valgrind
      golang-go golang-github-gorilla-websocket-dev gunicorn h2o apache2-utils whois
      systemd man-db groff-base nghttp2-server redis-server redis-tools sqlite3 git perl libjemalloc2 g++ xz-utils nodejs"
fuzz="$build clang libclang-rt-14-dev"
# Benchmarks: the peers (nghttpx from nghttp2-proxy for loadtest/proxy), and nginx's
# echo_sleep for loadtest/idle-memory --inflight.
bench="$test nghttp2-server nghttp2-proxy h2o gnuplot-nox valgrind libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev libboost-context-dev golang-go golang-golang-x-net-dev
       libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 libnginx-mod-http-echo"
case $want in
  build) pkgs=$build ;;
  test) pkgs=$test ;;
  bench) pkgs=$bench ;;
  fuzz) pkgs=$fuzz ;;
  *) echo "ensure-deps.sh: unknown purpose '$want'" >&2; exit 2 ;;
esac

write_stamp() {
  [ -n "$stamp" ] || return 0
  mkdir -p "$(dirname "$stamp")"
  printf '# %s: the packages of scripts/ensure-deps.sh %s were installed here\n' "$(date -u +%FT%TZ)" "$want" > "$stamp"
}

# One dpkg-query for the lot: a package it does not know is reported on stderr, not listed.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' $pkgs 2>/dev/null | sed -n 's/^\([^ ]*\) .* installed$/\1/p' || true)
missing=""
for p in $pkgs; do
  case " $(echo $installed) " in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
if [ -z "$missing" ]; then
  [ -z "$stamp" ] || [ -f "$stamp" ] || write_stamp
  exit 0
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-deps: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends $missing >&2; then
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends $missing >&2
  fi
  write_stamp
  exit 0
fi
echo "ensure-deps: missing packages for '$want':$missing" >&2
echo "install them with: sudo apt-get install$missing" >&2
exit 1
