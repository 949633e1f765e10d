/* nghttp2's memory for one session, kept track of so a waiting session gives pages back
 * (h2mem.h has the design and its invariants). */
#include <stdint.h>
#include <string.h>

#include "h2mem.h"
#include "scalloc.h"

#define FRAMEBUF_MIN (16u << 10)
#define OS_PAGE 4096u

static size_t rounded(size_t n) { return n >= FRAMEBUF_MIN ? (n + OS_PAGE - 1) & ~(size_t)(OS_PAGE - 1) : n; }

static void note_framebuf(struct h2mem *m, void *old, void *p, size_t n)
{
    if (n >= FRAMEBUF_MIN && (!m->framebuf || m->framebuf == old)) {
        m->framebuf = p;
        m->framebuf_size = n;
    }
}

static void *mem_malloc(size_t n, void *ud)
{
    n = rounded(n);
    void *p = sc_malloc(n);
    if (p)
        note_framebuf(ud, NULL, p, n);
    return p;
}

static void mem_free(void *p, void *ud)
{
    struct h2mem *m = ud;
    if (p && p == m->framebuf)
        m->framebuf = NULL;
    if (p && p == m->zeroish)
        m->zeroish = NULL;
    sc_free(p);
}

static void *mem_calloc(size_t k, size_t n, void *ud)
{
    struct h2mem *m = ud;
    void *p = sc_calloc(k, n);
    if (p && k * n >= OS_PAGE && !m->zeroish) {
        m->zeroish = p;
        m->zeroish_size = k * n;
    }
    return p;
}

static void *mem_realloc(void *p, size_t n, void *ud)
{
    n = rounded(n);
    void *q = sc_realloc(p, n);
    if (q)
        note_framebuf(ud, p, q, n);
    return q;
}

nghttp2_mem h2mem_allocator(struct h2mem *m)
{
    return (nghttp2_mem){ m, mem_malloc, mem_free, mem_calloc, mem_realloc };
}

/* Pages of p that are all zero go back: they read back the same. */
static void release_zero_pages(void *p, size_t len)
{
    static const char zero[OS_PAGE];
    uintptr_t lo = ((uintptr_t)p + OS_PAGE - 1) & ~(uintptr_t)(OS_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(OS_PAGE - 1);
    for (uintptr_t a = lo; a < hi; a += OS_PAGE)
        if (!memcmp((void *)a, zero, OS_PAGE))
            sc_release_pages((void *)a, OS_PAGE);
}

void h2mem_trim(const struct h2mem *m)
{
    if (m->framebuf)
        sc_release_pages(m->framebuf, m->framebuf_size);
    if (m->zeroish)
        release_zero_pages(m->zeroish, m->zeroish_size);
}
