/* sc_read_stats (Go's ReadMemStats): a consistent-enough snapshot without stopping
 * anyone.  The fast paths count only on the span: a malloc bumps its nalloc, a free its
 * nfreed.  So the object counts are summed over all spans (and those already gone),
 * plus the frees other threads pushed that the owners have not collected yet.  All
 * reads are relaxed: a figure may lag a malloc or free happening at that instant, and
 * nothing else. */
#include <string.h>

#include "internal.h"

/* One reader at a time: the sums are kept here rather than on a small stack (a
 * coroutine's). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void sc_read_stats(struct sc_stats *out)
{
    static uint64_t nalloc[SC_NSPANCLASS], nfreed[SC_NSPANCLASS], nremote[SC_NSPANCLASS];
    struct sc_large_counts cached;
    sc_heap_init();
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&lock);
    /* Remote frees before the spans: one collected in between then counts once in
     * nfreed and not yet as pending, rather than twice. */
    sc_cache_sum(nremote, &cached);
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++)
        nremote[sc] -= atomic_load_explicit(&sc_remote_collected[sc], memory_order_relaxed);
#if SC_ASAN
    /* Freed by the program, held back by the quarantine: freed here too. */
    struct sc_large_counts held_large;
    sc_quarantine_counts(nalloc, &held_large);
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++)
        nremote[sc] += nalloc[sc];
    cached.frees += held_large.frees;
    cached.free_bytes += held_large.free_bytes;
#endif
    sc_heap_sum_counts(nalloc, nfreed);
    for (unsigned cls = 1; cls < SC_NCLASS; cls++) {
        unsigned sc = SC_SPANCLASS(cls, 0);
        uint64_t m = nalloc[sc], f = nfreed[sc] + nremote[sc];
        if (f > m)
            f = m;
        out->by_class[cls].size = sc_class_size[cls];
        out->by_class[cls].mallocs = m;
        out->by_class[cls].frees = f;
        out->mallocs += m;
        out->frees += f;
        out->heap_alloc += (m - f) * sc_class_size[cls];
    }
    pthread_mutex_unlock(&lock);
    pthread_mutex_lock(&sc_heap.lock);
    /* Large objects: the page heap's counts, and those the threads' caches served. */
    out->by_class[0].mallocs = sc_heap.large_mallocs + cached.mallocs;
    out->by_class[0].frees = sc_heap.large_frees + cached.frees;
    out->mallocs += out->by_class[0].mallocs;
    out->frees += out->by_class[0].frees;
    out->large_alloc = sc_heap.large_alloc_bytes + cached.alloc_bytes - cached.free_bytes;
    out->heap_alloc += out->large_alloc;
    out->heap_inuse = (uint64_t)sc_heap.inuse_pages << SC_PAGE_SHIFT;
    out->stack_inuse = (uint64_t)sc_heap.stack_pages << SC_PAGE_SHIFT;
    out->heap_idle = (uint64_t)sc_heap.idle_pages << SC_PAGE_SHIFT;
    out->heap_released = (uint64_t)sc_heap.released_pages << SC_PAGE_SHIFT;
    out->heap_sys = (uint64_t)sc_heap.grown_pages << SC_PAGE_SHIFT;
    out->release_calls = sc_heap.release_calls;
    pthread_mutex_unlock(&sc_heap.lock);
}

/* fork.c */
void sc_stats_lock(void) { pthread_mutex_lock(&lock); }
void sc_stats_unlock(void) { pthread_mutex_unlock(&lock); }
