/* Spans of small objects (Go's mspan): carving a fresh span into a free list, and the
 * list operations the slow paths need.
 *
 * Lists are threaded through the first word of each free object, encoded with the heap
 * key and terminated by span->end (see internal.h).  A fresh span is threaded in address
 * order in one pass: the pages are about to be used anyway, and a span smaller than a
 * page-run is never touched beyond its objects' first words. */
#include "internal.h"

void sc_span_init_small(sc_span *s, unsigned spanclass)
{
    unsigned cls = SC_SPANCLASS_CLASS(spanclass);
    uint32_t size = sc_class_size[cls];
    s->spanclass = (uint8_t)spanclass;
    s->elemsize = size;
    s->nelems = (s->npages << SC_PAGE_SHIFT) / size;
    s->limit = s->nelems * size;
    s->end = s->base + s->limit;
    s->divmul = sc_class_divmul[cls];
    uint32_t excess = (uint32_t)((uint64_t)size * s->divmul - ((uint64_t)1 << 32));
    s->mul_limit = excess ? s->nelems * excess : 1;
    s->used = 0;
    s->local_free = (void *)s->end;
    atomic_store_explicit(&s->thread_free, 0, memory_order_relaxed);

    char *obj = (char *)s->base;
    for (uint32_t i = 0; i + 1 < s->nelems; i++, obj += size)
        *(uintptr_t *)obj = sc_link_encode(obj + size);
    *(uintptr_t *)obj = sc_link_encode((void *)s->end);
    s->free = (void *)s->base;
    if (sc_heap.valgrind)
        sc_vg_noaccess((void *)s->base, s->npages << SC_PAGE_SHIFT);
}

static uintptr_t link_read(void *p)
{
    if (SC_UNLIKELY(sc_heap.valgrind))
        sc_vg_defined(p, sizeof(uintptr_t));
    return *(uintptr_t *)p;
}

size_t sc_list_length(const sc_span *s, void *head)
{
    size_t n = 0;
    for (void *p = head; (uintptr_t)p != s->end; p = sc_link_decode(s, link_read(p)))
        n++;
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
    *(uintptr_t *)tail = sc_link_encode(b);
    return a;
}

/* Owner only: moves other threads' frees onto the local list. */
void sc_span_collect_remote(sc_span *s)
{
    if (!atomic_load_explicit(&s->thread_free, memory_order_relaxed))
        return;
    void *list = (void *)atomic_exchange_explicit(&s->thread_free, 0, memory_order_acquire);
    if (!list)
        return;
    s->used -= (uint32_t)sc_list_length(s, list);
    s->local_free = sc_list_concat(s, list, s->local_free);
}
