/* Spans of small objects (Go's mspan): setting up a fresh span, bump allocation of its
 * never-used objects, and the list operations the slow paths need.
 *
 * Lists are threaded through the first word of each free object, encoded with the heap
 * key and terminated by span->end (see internal.h).  A fresh span is not threaded: its
 * objects are handed out in address order by bumping, so a span touches a page only
 * when an object on it is first used - what keeps a mostly idle connection's untouched
 * buffers out of RSS - and calloc can skip clearing objects from clean pages. */
#include "internal.h"

/* 0.35 bytes per 24-byte object; the RSS target (24.5 bytes per live 24-byte object) has
 * little room for more. */
_Static_assert(sizeof(sc_span) <= 120, "sc_span grew: it costs RSS per object");

/* The page heap has set spanclass (under its lock, where sc_read_stats looks) and left
 * nalloc and nfreed zero. */
void sc_span_init_small(sc_span *s)
{
    unsigned cls = SC_SPANCLASS_CLASS(s->spanclass);
    uint32_t size = sc_class_size[cls];
    s->elemsize = size;
    uint32_t nelems = (s->npages << SC_PAGE_SHIFT) / size;
    s->limit = (uintptr_t)nelems * size;
    s->end = s->base + s->limit;
    s->divmul = sc_class_divmul[cls];
    s->base_mul = (uint32_t)s->base * s->divmul;
    s->excess = (uint32_t)((uint64_t)size * s->divmul - ((uint64_t)1 << 32));
    __atomic_store_n(&s->mul_limit, 0, __ATOMIC_RELAXED);
    s->bump = s->base;
    s->free = (void *)s->end;
    atomic_store_explicit(&s->thread_free, 0, memory_order_relaxed);
    sc_asan_poison((void *)s->base, s->npages << SC_PAGE_SHIFT);
    if (sc_heap.valgrind)
        sc_vg_noaccess((void *)s->base, s->npages << SC_PAGE_SHIFT);
}

/* Hands out the next never-used object, and threads the never-used objects that start
 * on the same OS page onto the (empty) free list: that page is being touched anyway, and
 * without the batch an alloc/free loop would come back here for every object.  Objects
 * starting on later pages stay untouched.  The caller has checked there is one. */
void *sc_span_bump(sc_span *s)
{
    void *p = (void *)s->bump;
    sc_asan_unpoison(p, s->elemsize);
    /* On a page that held data the word may be an old link into this very span, which a
     * free from another thread would take for a freed object (internal.h). */
    if (s->needzero) {
        if (SC_UNLIKELY(sc_heap.valgrind))
            sc_vg_defined(p, sizeof(uintptr_t));
        *(uintptr_t *)p = 0;
    }
    uintptr_t page_end = ((uintptr_t)p | 4095) + 1;
    uintptr_t next = s->bump + s->elemsize;
    uint32_t handed = 1;
    s->bump = next;
    sc_count(&s->nalloc);
    if (next < page_end && next < s->end) {
        uintptr_t last = next;
        while (last + s->elemsize < page_end && last + s->elemsize < s->end)
            last += s->elemsize;
        for (uintptr_t o = next; o <= last; o += s->elemsize) {
            if (SC_UNLIKELY(sc_heap.valgrind))
                sc_vg_defined((void *)o, sizeof(uintptr_t));
            sc_link_store((void *)o, sc_link_encode(o < last ? (void *)(o + s->elemsize) : (void *)s->end));
        }
        s->free = (void *)next;
        handed += (uint32_t)((last - next) / s->elemsize + 1);
        s->bump = last + s->elemsize;
    }
    /* Before p leaves this thread: a free of it from another thread reads the limit. */
    __atomic_store_n(&s->mul_limit, s->mul_limit + handed * s->excess, __ATOMIC_RELAXED);
    return p;
}

static uintptr_t link_read(void *p)
{
    if (SC_UNLIKELY(sc_heap.valgrind))
        sc_vg_defined(p, sizeof(uintptr_t));
    return sc_link_load(p);
}

/* A list longer than the span's objects loops: an object was pushed twice, by a double
 * free from another thread (which is not checked at the free: internal.h). */
size_t sc_list_length(const sc_span *s, void *head)
{
    size_t n = 0, most = s->limit / s->elemsize;
    for (void *p = head; (uintptr_t)p != s->end; p = sc_link_decode(s, link_read(p)))
        if (++n > most)
            sc_fatal("double free from another thread: a free list loops in the span of %p", (void *)s->base);
    return n;
}

bool sc_list_contains(const sc_span *s, void *head, const void *needle)
{
    for (void *p = head; (uintptr_t)p != s->end; p = sc_link_decode(s, link_read(p)))
        if (p == needle)
            return true;
    return false;
}

/* Appends list b to list a; returns the head. */
void *sc_list_concat(const sc_span *s, void *a, void *b)
{
    if ((uintptr_t)a == s->end)
        return b;
    if ((uintptr_t)b == s->end)
        return a;
    void *tail = a;
    for (;;) {
        void *next = sc_link_decode(s, link_read(tail));
        if ((uintptr_t)next == s->end)
            break;
        tail = next;
    }
    sc_link_store(tail, sc_link_encode(b));
    return a;
}

_Atomic uint64_t sc_remote_collected[SC_NSPANCLASS];

/* Counts n collected remote frees: the statistics no longer treat them as pending. */
void sc_remote_collected_add(unsigned spanclass, size_t n)
{
    atomic_fetch_add_explicit(&sc_remote_collected[spanclass], n, memory_order_relaxed);
}

/* Owner only: moves other threads' frees onto the span's list. */
void sc_span_collect_remote(sc_span *s)
{
    if (!atomic_load_explicit(&s->thread_free, memory_order_relaxed))
        return;
    void *list = (void *)atomic_exchange_explicit(&s->thread_free, 0, memory_order_acquire);
    if (!list)
        return;
    size_t n = sc_list_length(s, list);
    sc_count_n(&s->nfreed, n);
    sc_remote_collected_add(s->spanclass, n);
    s->free = sc_list_concat(s, list, s->free);
}
