/* C++'s allocation operators on the heap, for the drop-in (libscalloc.so only).
 *
 * libstdc++'s operator new calls malloc, so it would reach the heap anyway - but a
 * program may link another allocator that defines the operators itself (Debian's h2load,
 * nghttpd and redis-server link jemalloc, built with its C++ operators): its new then
 * allocates from that allocator while libstdc++'s internal deletes call free.  Defining
 * every form here, in the library that comes first in symbol lookup, puts all of C++'s
 * allocations on the heap like C's.  The names are the Itanium ABI's (new(size_t) is
 * _Znwm, delete(void *, size_t) _ZdlPvm, ...); sizes and alignments map onto malloc,
 * free and aligned_alloc.
 *
 * A throwing new that cannot allocate calls the program's new_handler until it gives up
 * and then throws std::bad_alloc, as the standard wants; both are libstdc++'s, looked up
 * only on that path (a program that uses new has libstdc++ loaded). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "scalloc.h"

typedef void (*handler_fn)(void);

static void *new_failed(size_t n, size_t align)
{
    handler_fn (*get_handler)(void) = (handler_fn (*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
    for (;;) {
        handler_fn h = get_handler ? get_handler() : NULL;
        if (!h)
            break;
        h();
        void *p = align ? sc_aligned_alloc(align, n) : malloc(n);
        if (p)
            return p;
    }
    void (*throw_bad_alloc)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
    if (throw_bad_alloc)
        throw_bad_alloc();
    abort();
}

static inline void *new_(size_t n)
{
    void *p = malloc(n);
    return p ? p : new_failed(n, 0);
}

static inline void *new_aligned(size_t n, size_t align)
{
    void *p = sc_aligned_alloc(align, n);
    return p ? p : new_failed(n, align);
}

/* The nothrow forms return NULL rather than throw; the handler is not consulted. */
void *_Znwm(size_t n) { return new_(n); }
void *_Znam(size_t n) { return new_(n); }
void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return malloc(n); }
void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return malloc(n); }
void *_ZnwmSt11align_val_t(size_t n, size_t al) { return new_aligned(n, al); }
void *_ZnamSt11align_val_t(size_t n, size_t al) { return new_aligned(n, al); }
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt) { (void)nt; return sc_aligned_alloc(al, n); }
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt) { (void)nt; return sc_aligned_alloc(al, n); }

void _ZdlPv(void *p) { free(p); }
void _ZdaPv(void *p) { free(p); }
void _ZdlPvm(void *p, size_t n) { (void)n; free(p); }
void _ZdaPvm(void *p, size_t n) { (void)n; free(p); }
void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; free(p); }
void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; free(p); }
void _ZdlPvSt11align_val_t(void *p, size_t al) { (void)al; free(p); }
void _ZdaPvSt11align_val_t(void *p, size_t al) { (void)al; free(p); }
void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) { (void)n, (void)al; free(p); }
void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al) { (void)n, (void)al; free(p); }
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt) { (void)al, (void)nt; free(p); }
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *nt) { (void)al, (void)nt; free(p); }
