/* Routes every library's allocations to the size-class heap: nghttp2 per session (the
 * nghttp2_mem passed at session creation), OpenSSL (CRYPTO_set_mem_functions, which
 * must run before any other OpenSSL call) and libev (ev_set_allocator).  The daemon's
 * memory is then one heap, measured by one set of stats. */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>

#include "h2park.h"
#include "scalloc.h"

static void *h2_malloc(size_t n, void *ud) { (void)ud; return sc_malloc(n); }
static void h2_free(void *p, void *ud) { (void)ud; sc_free(p); }
static void *h2_calloc(size_t k, size_t n, void *ud) { (void)ud; return sc_calloc(k, n); }
static void *h2_realloc(void *p, size_t n, void *ud) { (void)ud; return sc_realloc(p, n); }

nghttp2_mem h2_mem = { NULL, h2_malloc, h2_free, h2_calloc, h2_realloc };

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
