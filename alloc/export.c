/* The C library's allocation functions on the size-class heap: malloc, free, calloc,
 * realloc, reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc and
 * malloc_usable_size.  Linked into a program (h2park links this object; a drop-in
 * libscalloc.so for LD_PRELOAD will be built from it), these definitions come before the C
 * library's in symbol lookup, so every library in the process allocates here - libc's own
 * users (stdio, qsort, thread stacks' TLS, the time zone) included - and glibc's
 * allocator is never called.
 *
 * Written for arbitrary programs, not only h2park:
 * - C wants malloc's memory to suit any type that fits in it, up to alignof(max_align_t)
 *   (16 on x86-64 and aarch64).  Every class is aligned to the largest power of two
 *   dividing its size, so all are but the 24-byte class (8-aligned, as in Go), which
 *   sc_malloc keeps; here requests of 17..24 bytes take the 32-byte class.
 * - Alignments up to a page come from a class whose size the alignment divides, larger
 *   ones from the page heap (sc_aligned_alloc): the pointer is always an object's start.
 * - Failures set errno (ENOMEM, EINVAL) as glibc does; posix_memalign returns the error
 *   and leaves errno alone; calloc and reallocarray refuse products that overflow;
 *   realloc(p, 0) frees p and returns NULL, as glibc's does.
 * - fork: the allocator's locks are taken around it, and its handlers must be the first
 *   registered, so that they take the locks after every other prepare handler ran
 *   (alloc/fork.c says why): on glibc this file also defines __register_atfork, through
 *   which every pthread_atfork of the process passes, and registers the heap's handlers
 *   before the first of them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "scalloc.h"

/* fork.c's: the heap's fork handlers registered, once. */
void sc_fork_install(void) __attribute__((visibility("hidden")));

_Static_assert(alignof(max_align_t) <= 16, "only the 24-byte class falls short of max_align_t");

/* 0 stays 0 (the smallest class), so realloc(p, 0) still frees. */
static inline size_t fundamental(size_t n) { return n - 17 < 8 ? 32 : n; }

void *malloc(size_t n) { return sc_malloc_generic(fundamental(n)); }

void free(void *p) { sc_free(p); }

void *calloc(size_t count, size_t n)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, n, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return sc_calloc(1, fundamental(bytes));
}

void *realloc(void *p, size_t n) { return sc_realloc(p, fundamental(n)); }

void *reallocarray(void *p, size_t count, size_t n)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, n, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, bytes);
}

void *aligned_alloc(size_t align, size_t n) { return sc_aligned_alloc(align, n); }

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    int saved = errno;
    void *p = aligned_alloc(align, n);
    int err = p ? 0 : errno;
    errno = saved;
    if (p)
        *out = p;
    return err;
}

/* glibc's memalign takes any alignment, rounding one that is not a power of two up. */
void *memalign(size_t align, size_t n)
{
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    size_t pow2 = 1;
    while (pow2 < align)
        pow2 <<= 1;
    return aligned_alloc(pow2, n);
}

void *valloc(size_t n) { return aligned_alloc((size_t)sysconf(_SC_PAGESIZE), n); }

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned_alloc(page, n ? (n + page - 1) & ~(page - 1) : page);
}

size_t malloc_usable_size(void *p) { return sc_usable_size(p); }

#ifdef __GLIBC__
typedef int register_fn(void (*)(void), void (*)(void), void (*)(void), void *);

/* glibc's __register_atfork (the next definition in lookup order), found on first use. */
__attribute__((visibility("hidden"))) int sc_next_register_atfork(void (*prepare)(void), void (*parent)(void),
                                                                  void (*child)(void), void *dso)
{
    static register_fn *_Atomic next;
    register_fn *fn = atomic_load_explicit(&next, memory_order_relaxed);
    if (!fn) {
        fn = (register_fn *)dlvsym(RTLD_NEXT, "__register_atfork", "GLIBC_2.3.2");
        if (!fn)
            return ENOSYS;
        atomic_store_explicit(&next, fn, memory_order_relaxed);
    }
    return fn(prepare, parent, child, dso);
}

/* What pthread_atfork calls (glibc links it into every program and library as a call to
 * this): the heap's handlers go first, then the caller's. */
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso)
{
    sc_fork_install();
    return sc_next_register_atfork(prepare, parent, child, dso);
}
#endif
