/* Routes the libraries' allocations to the size-class heap: nghttp2 per session (the
 * nghttp2_mem passed at session creation), OpenSSL (CRYPTO_set_mem_functions, which
 * must run before any other OpenSSL call) and libev (ev_set_allocator).  The daemon's
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

#include "h2park.h"
#include "scalloc.h"

/* nghttp2 gets a per-connection nghttp2_mem whose user data is the connection, so the
 * connection can know its session's frame buffer: the one 16 KiB+ block the session
 * allocates, which holds nothing between frames and is released while parked
 * (conn_trim_idle). */
#define FRAMEBUF_MIN (16u << 10)

static void note_framebuf(struct conn *c, void *old, void *p, size_t n)
{
    if (c && n >= FRAMEBUF_MIN && (!c->framebuf || c->framebuf == old)) {
        c->framebuf = p;
        c->framebuf_size = n;
    }
}
static void *h2_malloc(size_t n, void *ud)
{
    void *p = sc_malloc(n);
    note_framebuf(ud, NULL, p, n);
    return p;
}
static void h2_free(void *p, void *ud)
{
    struct conn *c = ud;
    if (c && p && p == c->framebuf)
        c->framebuf = NULL;
    if (c && p && p == c->zeroish)
        c->zeroish = NULL;
    sc_free(p);
}
/* Other blocks of a page or more (the stream map's table) are only released where a
 * page of them is all zero, which reads back the same after release. */
static void *h2_calloc(size_t k, size_t n, void *ud)
{
    struct conn *c = ud;
    void *p = sc_calloc(k, n);
    if (c && p && k * n >= 4096 && !c->zeroish) {
        c->zeroish = p;
        c->zeroish_size = k * n;
    }
    return p;
}
static void *h2_realloc(void *p, size_t n, void *ud)
{
    void *q = sc_realloc(p, n);
    if (q)
        note_framebuf(ud, p, q, n);
    return q;
}

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
