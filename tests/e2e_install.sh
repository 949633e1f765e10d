#!/bin/bash
# make install: the library, one include directory whose sc_config.h records how it was
# built, and scalloc.pc.  A program outside the tree builds against the installed copy
# with pkg-config alone (no -D, no second include directory) and runs; a staged install
# (DESTDIR) puts the same files under the stage with the final prefix in scalloc.pc.
. "$(dirname "$0")/lib.sh"
CC=${CC:-cc}
make -s --no-print-directory install BUILD="$BUILD" SAN="$SAN" TSAN="$TSAN" PREFIX="$TMP/prefix" >"$TMP/install.log" 2>&1
check install_to_prefix $? "$(tail -3 "$TMP/install.log")"
export PKG_CONFIG_PATH=$TMP/prefix/lib/pkgconfig
flags="$(pkg-config --cflags scalloc) $(pkg-config --libs scalloc)"
$CC -std=gnu11 -O2 -o "$TMP/scalloc_user" tests/scalloc_user.c $flags >"$TMP/cc.log" 2>&1
check builds_with_pkg_config $? "$CC ... $flags: $(head -5 "$TMP/cc.log")"
out=$("$TMP/scalloc_user" 2>&1)
echo "$out" | grep -q '^ok scalloc_user'; check installed_library_runs $? "$out"
# Sanitizer builds have neither the static malloc archive nor the drop-in.
if [ "${SAN:-0}" = 0 ] && [ "${TSAN:-0}" = 0 ]; then
  # A static link that replaces malloc: libc's own callers (strdup) land on the heap.
  printf '%s\n' '#include <scalloc.h>' '#include <stdio.h>' '#include <stdlib.h>' '#include <string.h>' \
    'int main(void) { struct sc_stats a, b; sc_read_stats(&a); char *s = strdup("x"); void *p = malloc(50);' \
    '  sc_read_stats(&b); int ok = b.mallocs - a.mallocs == 2 && sc_usable_size(p) == 64;' \
    '  free(s); free(p); puts(ok ? "ok" : "FAIL"); return !ok; }' > "$TMP/replace.c"
  $CC -std=gnu11 -O2 -o "$TMP/replace" "$TMP/replace.c" $(pkg-config --cflags scalloc) -L"$TMP/prefix/lib" \
    -l:libscalloc_malloc.a $(pkg-config --libs scalloc) >"$TMP/cc2.log" 2>&1 && [ "$("$TMP/replace")" = ok ]
  check static_link_replaces_malloc $? "$(head -5 "$TMP/cc2.log")"
fi
if [ "${SAN:-0}" = 0 ] && [ "${TSAN:-0}" = 0 ]; then
  [ -x "$TMP/prefix/lib/libscalloc.so" ] && LD_PRELOAD=$TMP/prefix/lib/libscalloc.so /bin/true
  check installs_the_drop_in $? "$(ls -l "$TMP/prefix/lib")"
fi
[ "$(ls "$TMP/prefix/include/scalloc")" = "$(printf 'sc_config.h\nsc_specialized.h\nscalloc.h')" ]
check one_include_directory $? "$(ls "$TMP/prefix/include/scalloc")"

make -s --no-print-directory install BUILD="$BUILD" SAN="$SAN" TSAN="$TSAN" PREFIX=/usr/local DESTDIR="$TMP/stage" \
  >"$TMP/stage.log" 2>&1
[ -f "$TMP/stage/usr/local/lib/libscalloc.a" ] && [ -f "$TMP/stage/usr/local/include/scalloc/sc_config.h" ] &&
  grep -qx 'prefix=/usr/local' "$TMP/stage/usr/local/lib/pkgconfig/scalloc.pc"
check staged_install_keeps_prefix $? "$(cat "$TMP/stage.log"; find "$TMP/stage" -type f)"
