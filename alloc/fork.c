/* fork(): the child must find every allocator lock free and the statistics whole.
 *
 * A thread of the parent may hold any of the locks when another forks, and in the child
 * nobody would release it.  So the handlers take them all before the fork, in the order
 * the allocator nests them (statistics, thread registry, central lists, page heap:
 * nothing holds one of these while taking an earlier one), and release them after it in
 * both processes.  In the child only the forking thread exists; the others' caches leave
 * the registry (cache.c says why their spans stay where they are).
 *
 * The handlers are installed when the program starts (a constructor in malloc.c, which
 * every program using the heap links), before anything can fork or call pthread_atfork
 * from inside an allocation. */
#include "internal.h"

static void prepare(void)
{
    sc_stats_lock();
    sc_registry_lock();
    sc_central_lock_all();
    sc_heap_lock();
}

static void parent(void)
{
    sc_heap_unlock();
    sc_central_unlock_all();
    sc_registry_unlock();
    sc_stats_unlock();
}

static void child(void)
{
    parent();
    sc_cache_forget_other_threads();
}

void sc_fork_install(void)
{
    if (pthread_atfork(prepare, parent, child))
        sc_fatal("cannot install the fork handlers");
}
