/* Pointers the heap never returned, handed to the drop-in's free, realloc or
 * malloc_usable_size (libscalloc.so only).
 *
 * A preloaded malloc is not always the only allocator in the process: h2load, nghttpd and
 * redis-server link jemalloc, whose C++ operator new comes before libstdc++'s and
 * allocates from jemalloc while libstdc++'s own operator delete calls free; a library
 * may keep memory from glibc's __libc_malloc.  Such a pointer lies outside the heap's
 * reserved region, so the page map says at once that it is not ours, and it goes to the
 * allocator next in symbol lookup order (RTLD_NEXT: jemalloc's free there, glibc's
 * elsewhere), which either owns it or reports it as glibc would.  Pointers inside the
 * region are the heap's business and are checked as always.
 *
 * libscalloc.a, linked into a program that wants every bad free reported, has none of
 * this: there sc_free aborts on any pointer it did not return. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "internal.h"

#if defined(SC_SHARED) && SC_SHARED
static void (*_Atomic next_free)(void *);
static size_t (*_Atomic next_usable)(void *);

/* Resolved on first use: rare, and never before the dynamic linker can answer. */
static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

bool sc_foreign_free(void *p)
{
    void (*fn)(void *) = atomic_load_explicit(&next_free, memory_order_relaxed);
    if (!fn) {
        fn = (void (*)(void *))next("free");
        if (!fn)
            return false;
        atomic_store_explicit(&next_free, fn, memory_order_relaxed);
    }
    fn(p);
    return true;
}

size_t sc_foreign_usable(void *p)
{
    size_t (*fn)(void *) = atomic_load_explicit(&next_usable, memory_order_relaxed);
    if (!fn) {
        fn = (size_t (*)(void *))next("malloc_usable_size");
        if (!fn)
            return 0;
        atomic_store_explicit(&next_usable, fn, memory_order_relaxed);
    }
    return fn(p);
}
#else
bool sc_foreign_free(void *p)
{
    (void)p;
    return false;
}

size_t sc_foreign_usable(void *p)
{
    (void)p;
    return 0;
}
#endif
