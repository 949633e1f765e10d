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
 * what puts the libraries' objects under ASan's poisoning in the heap.
 *
 * OpenSSL's record buffers (a little over 16 KiB each, allocated whenever a connection
 * starts reading or writing, since idle ones are released) are placed so that a record's
 * payload starts half a page in (MEM_TLS_PAYLOAD_PAGE_OFFSET): OpenSSL copies the
 * plaintext there from our output buffer, and where that is page-aligned - any large
 * body - a payload at page offset 8, where an 18 KiB heap object puts it, is the CPU's
 * slow copy (copy.h).  conn.c knows the offset and steps around the rare source that
 * meets it.  Such a pointer sits 8 bytes or more into a bigger heap object, whose own
 * start is stored just before it; it is told from every other pointer by its offset in
 * the page, ≡ 24 mod 32, where no object of a class of 1 KiB or more can start (their
 * sizes are multiples of 32). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>

#include <ev.h>

#include "mem.h"
#include "scalloc.h"

/* The record buffer's start that puts its payload at MEM_TLS_PAYLOAD_PAGE_OFFSET:
 * OpenSSL's record header is 5 bytes and the payload 8-byte aligned, 8 bytes in. */
#define RECORD_START_PAGE_OFFSET (MEM_TLS_PAYLOAD_PAGE_OFFSET - 8)
_Static_assert(RECORD_START_PAGE_OFFSET % 32 == 24, "placed buffers must be told apart by their offset");

static bool record_buffer_size(size_t n) { return n > 16384 && n <= 16384 + 2048; }

/* The heap object a placed buffer lies in, or NULL for an ordinary pointer.  OpenSSL
 * frees some hundred objects per request: the page-offset test comes first and alone. */
static __attribute__((noinline)) void *placed_base_slow(void *p)
{
    if (sc_usable_size(p) < 1024)
        return NULL;
    void *base;
    memcpy(&base, (char *)p - sizeof base, sizeof base);
    return base;
}
static inline void *placed_base(void *p)
{
    return __builtin_expect(((uintptr_t)p & 4095) == RECORD_START_PAGE_OFFSET, 0) ? placed_base_slow(p) : NULL;
}

static void *ssl_malloc(size_t n, const char *file, int line)
{
    (void)file, (void)line;
    if (!record_buffer_size(n))
        return sc_malloc(n);
    char *base = sc_malloc(n + 4096 + sizeof base);
    if (!base)
        return NULL;
    uintptr_t p = (uintptr_t)base + sizeof base;
    p += (RECORD_START_PAGE_OFFSET - p) & 4095;
    memcpy((char *)p - sizeof base, &base, sizeof base);
    return (void *)p;
}
static void ssl_free(void *p, const char *file, int line)
{
    (void)file, (void)line;
    void *base = placed_base(p);
    sc_free(base ? base : p);
}
static void *ssl_realloc(void *p, size_t n, const char *file, int line)
{
    void *base = placed_base(p);
    if (!base && !record_buffer_size(n))
        return sc_realloc(p, n);
    if (!p)
        return ssl_malloc(n, file, line);
    size_t have = base ? sc_usable_size(base) - (size_t)((char *)p - (char *)base) : sc_usable_size(p);
    void *q = ssl_malloc(n, file, line);
    if (q) {
        memcpy(q, p, have < n ? have : n);
        ssl_free(p, file, line);
    }
    return q;
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
