/* Giving memory back to the OS on request: sc_scavenge (Go's debug.FreeOSMemory) and
 * sc_release_pages.
 *
 * A scavenge has two steps, in this order: the caches give back what they hold - the
 * calling thread's at once, every other thread's at its next refill (a thread's cache is
 * touched by that thread only) - and then the page heap releases the resident pages of
 * its free runs.  (In ASan builds the calling thread's quarantine is emptied first.)  It
 * lives above all three: the page heap is the floor and calls nothing above it.  Unasked,
 * the page heap releases what lies above its retained goal by itself, and a cache gives back
 * its empty spans when it keeps taking fresh pages (pageheap.c, cache.c); a scavenge is the
 * at-once, everything version of both. */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

void sc_scavenge(void)
{
    sc_heap_init();
#if SC_ASAN
    sc_quarantine_drain();            /* what the program freed, held back for ASan */
#endif
    sc_trim_all_caches();
    sc_heap_release_free();
}

void sc_release_pages(void *p, size_t len)
{
    static _Atomic size_t os_page_size;     /* threads may race to set it: same value */
    size_t os_page = atomic_load_explicit(&os_page_size, memory_order_relaxed);
    if (!os_page) {
        os_page = (size_t)sysconf(_SC_PAGESIZE);
        atomic_store_explicit(&os_page_size, os_page, memory_order_relaxed);
    }
    uintptr_t lo = ((uintptr_t)p + os_page - 1) & ~(uintptr_t)(os_page - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(os_page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
