/* Valgrind client requests, so memcheck sees sc_malloc/sc_free as an allocator.
 *
 * They are compiled in only where valgrind's headers exist, and are never on a fast
 * path: under valgrind the heap sends every malloc and free through the slow paths
 * (see sc_heap.fast_npages and the valgrind branch of sc_cache_refill). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>

/* Only tools that track heap blocks need the annotated slow paths; under callgrind or
 * cachegrind the fast paths run as they do natively, so instruction counts are real.
 * The tools that track blocks are the ones that preload a malloc replacement. */
bool sc_running_on_valgrind(void)
{
    if (!RUNNING_ON_VALGRIND)
        return false;
    const char *pre = getenv("LD_PRELOAD");
    static const char *const trackers[] = { "memcheck", "helgrind", "drd", "massif", "dhat" };
    for (size_t i = 0; pre && i < sizeof trackers / sizeof trackers[0]; i++)
        if (strstr(pre, trackers[i]))
            return true;
    return false;
}
void sc_vg_malloclike(void *p, size_t n, bool zeroed) { VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed); }
void sc_vg_freelike(void *p) { VALGRIND_FREELIKE_BLOCK(p, 0); }
void sc_vg_noaccess(void *p, size_t n) { VALGRIND_MAKE_MEM_NOACCESS(p, n); }
void sc_vg_defined(void *p, size_t n) { VALGRIND_MAKE_MEM_DEFINED(p, n); }
#else
bool sc_running_on_valgrind(void) { return false; }
void sc_vg_malloclike(void *p, size_t n, bool zeroed) { (void)p, (void)n, (void)zeroed; }
void sc_vg_freelike(void *p) { (void)p; }
void sc_vg_noaccess(void *p, size_t n) { (void)p, (void)n; }
void sc_vg_defined(void *p, size_t n) { (void)p, (void)n; }
#endif
