/* Routes the libraries' allocations to the size-class heap: OpenSSL
 * (CRYPTO_set_mem_functions, which must run before any other OpenSSL call) and libev
 * (ev_set_allocator); nghttp2 gets its own per session (proto/h2.c).  The daemon's
 * memory is then one heap, measured by one set of stats.
 *
 * The daemon also exports malloc and the rest of the family from the heap
 * (alloc/export.c), which catches every other caller (libc itself), and would catch
 * these too; the hooks stay because nghttp2's gives each connection its session's frame
 * buffer (released while parked), because they reach sc_malloc's size-specialized and
 * 24-byte classes directly, and because sanitizer builds do not export malloc (the
 * sanitizers' own allocating interceptors would meet a foreign free), so there they are
 * what puts the libraries' objects under ASan's poisoning in the heap. */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>

#include <ev.h>

#include "mem.h"
#include "scalloc.h"

static void *ssl_malloc(size_t n, const char *file, int line)
{
    (void)file, (void)line;
    return sc_malloc(n);
}
static void *ssl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file, (void)line;
    return sc_realloc(p, n);
}
static void ssl_free(void *p, const char *file, int line)
{
    (void)file, (void)line;
    sc_free(p);
}

static void *ev_alloc(void *p, long n)
{
    if (n == 0) {
        sc_free(p);
        return NULL;
    }
    void *q = sc_realloc(p, (size_t)n);
    if (!q) {
        fprintf(stderr, "h2park: out of memory in libev\n");
        abort();
    }
    return q;
}

void mem_install_hooks(void)
{
    if (!CRYPTO_set_mem_functions(ssl_malloc, ssl_realloc, ssl_free)) {
        fprintf(stderr, "h2park: OpenSSL was used before its allocator could be set\n");
        exit(1);
    }
    ev_set_allocator(ev_alloc);
}
