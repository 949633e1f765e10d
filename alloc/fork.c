/* fork(): the child must find every allocator lock free and the statistics whole.
 *
 * A thread of the parent may hold any of the locks when another forks, and in the child
 * nobody would release it.  So the handlers take them all before the fork, in the order
 * the allocator nests them (statistics, thread registry, central lists, page heap:
 * nothing holds one of these while taking an earlier one), and release them after it in
 * both processes.  In the child only the forking thread exists; the others' caches leave
 * the registry (cache.c says why their spans stay where they are).
 *
 * When to take them matters as much.  fork runs the prepare handlers in the reverse order
 * of their registration, then the parent's and the child's in that order; glibc takes its
 * own malloc's locks inside fork, after every prepare handler and after the stdio list
 * lock (some stdio paths allocate while a thread holds it), and releases them before any
 * parent or child handler, since any handler may allocate - and another thread may be
 * blocked in malloc holding a lock that a handler is about to take.  A heap that takes
 * its locks in a handler must therefore be the first registered: its prepare handler is
 * then the last to run, and its parent and child handlers the first.  A constructor is
 * not early enough: a library loaded with the program (or before the preloaded heap)
 * runs its constructor first, and one that registers a prepare handler that allocates
 * there would find the heap's locks taken, by its own thread, for ever.  So where the
 * heap is the C library's malloc (export.c: the drop-in, and programs linking it in), it
 * also replaces glibc's __register_atfork, which every pthread_atfork in the process
 * calls (glibc links pthread_atfork into each program and library as a call to it): the
 * first registration of the process, whoever makes it, registers the heap's handlers
 * first; and the prepare handler takes the stdio list lock before the heap's, as glibc's
 * fork does (the lock is recursive: fork takes it again).  Elsewhere (libscalloc.a alone,
 * whose heap only its program's own sc_ calls reach) the handlers are registered when
 * the program starts (a constructor in malloc.c), with pthread_atfork. */
#define _GNU_SOURCE
#include "internal.h"

#ifdef __GLIBC__
/* Exported by glibc (GLIBC_2.2.5), declared in no header. */
void _IO_list_lock(void);
void _IO_list_unlock(void);
void _IO_list_resetlock(void);
#endif

/* export.c's, when it is linked in: glibc's own registration, the one that export.c's
 * __register_atfork passes every other registration on to. */
extern int sc_next_register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso)
    __attribute__((weak)) SC_HIDDEN;
extern void *__dso_handle __attribute__((weak)) SC_HIDDEN;

static bool heap_is_malloc;        /* export.c is linked in: the handlers are registered first */

static void prepare(void)
{
#ifdef __GLIBC__
    if (heap_is_malloc)
        _IO_list_lock();
#endif
    sc_stats_lock();
    sc_registry_lock();
    sc_central_lock_all();
    sc_heap_lock();
}

static void unlock_all(void)
{
    sc_heap_unlock();
    sc_central_unlock_all();
    sc_registry_unlock();
    sc_stats_unlock();
}

static void parent(void)
{
    unlock_all();
#ifdef __GLIBC__
    if (heap_is_malloc)
        _IO_list_unlock();
#endif
}

static void child(void)
{
    unlock_all();
#ifdef __GLIBC__
    /* glibc's fork reset it in a child of a threaded parent (not of a single-threaded
     * one): reset it in every case rather than release a count that may be gone. */
    if (heap_is_malloc)
        _IO_list_resetlock();
#endif
    sc_cache_forget_other_threads();
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
    int err;
    if (sc_next_register_atfork) {
        heap_is_malloc = true;
        err = sc_next_register_atfork(prepare, parent, child, &__dso_handle ? __dso_handle : NULL);
    } else {
        err = pthread_atfork(prepare, parent, child);
    }
    if (err)
        sc_fatal("cannot install the fork handlers");
}

void sc_fork_install(void) { pthread_once(&once, install); }
