#!/bin/bash
# The whole daemon on the heap: h2park exports the C library's malloc family from scalloc
# (alloc/export.c), so that glibc's allocator is never called.  Over a run with two
# workers that serves h2c and TLS (curl and h2load), /-/stats, and a SIGHUP that reloads
# the certificate, then exits on SIGTERM:
# - ld.so reports every symbol binding (LD_DEBUG=bindings): each allocation function any
#   object (libc, ld.so, OpenSSL, nghttp2, libev) binds goes to h2park, none to libc;
# - glibc's heap never holds a byte (libc_heap_bytes in /-/stats, from mallinfo2), with
#   glibc's mmap of large blocks turned off so that no allocation could come and go
#   without trace.
# Sanitizer builds do not export malloc (see the Makefile), so there is nothing to check.
. "$(dirname "$0")/lib.sh"
if [ "${SAN:-0}" != 0 ] || [ "${TSAN:-0}" != 0 ]; then
  echo "# e2e_libc_malloc: not in sanitizer builds"
  exit 0
fi
make_site
funcs="malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc malloc_usable_size"
missing=""
for f in $funcs; do nm -D --defined-only "$H2PARK" | grep -qw "$f" || missing="$missing $f"; done
[ -z "$missing" ]; check exports_malloc_family $? "not exported by $H2PARK:$missing"

real=$(cd "$(dirname "$H2PARK")" && pwd)/$(basename "$H2PARK")
cat > "$TMP/h2park-traced" <<EOF
#!/bin/sh
LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/ld" GLIBC_TUNABLES=glibc.malloc.mmap_max=0 exec "$real" "\$@"
EOF
chmod +x "$TMP/h2park-traced"
H2PARK=$TMP/h2park-traced WORKERS=2 start_daemon
H=http://127.0.0.1:$PORT
S=https://127.0.0.1:$TPORT
get() { curl -s -k --http2 --http2-prior-knowledge -o /dev/null "$1"; }
for i in 1 2 3; do
  for u in "$H/" "$H/sub/style.css" "$H/-/stats" "$H/nothing" "$S/" "$S/-/stats"; do get "$u"; done
done
h2load -n 400 -c 8 -m 4 "$H/" >/dev/null 2>&1
h2load -n 200 -c 4 "$S/sub/style.css" >/dev/null 2>&1
kill -HUP "$DPID"
sleep 0.3
get "$S/"; get "$S/-/stats"
h2load -n 200 -c 4 "$S/" >/dev/null 2>&1
libc_heap=$(stat_of libc_heap_bytes)
[ "$libc_heap" = 0 ]; check glibc_heap_never_used $? "libc_heap_bytes $libc_heap"
stop_daemon

pattern="normal symbol \`(__libc_)?($(echo $funcs | tr ' ' '|'))'"
to_libc=$(cat "$TMP"/ld.* | grep -E "$pattern" | grep -c ' to [^ ]*libc\.so')
to_h2park=$(cat "$TMP"/ld.* | grep -E "$pattern" | grep -c " to $real ")
echo "# bindings of the malloc family: $to_h2park to h2park, $to_libc to libc"
[ "$to_libc" = 0 ] && [ "$to_h2park" -gt 0 ]
check no_binding_to_glibc_malloc $? "$to_libc to libc: $(cat "$TMP"/ld.* | grep -E "$pattern" | grep ' to [^ ]*libc\.so' | head -3)"
[ "$DSTATUS" = 0 ]; check exits_cleanly $? "exit status $DSTATUS"
