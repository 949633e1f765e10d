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
 * only on that path (a program that uses new has libstdc++ loaded).  A nothrow new is,
 * by the standard's definition, the throwing one called inside a try block that turns any
 * exception into a null pointer: the handler runs the same way, and may itself throw
 * bad_alloc.  C cannot catch an exception, so a nothrow new that cannot allocate while a
 * handler is installed calls the C++ runtime's own nothrow operator (libstdc++'s, found in
 * the object that defines std::get_new_handler), which does exactly that around the
 * throwing operator - this file's, which it calls through the PLT. */
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

/* The C++ runtime's own definition of name: in the object that defines get_new_handler,
 * never this library's. */
static void *runtime_operator(const char *name, handler_fn (*get_handler)(void))
{
    Dl_info info;
    if (!dladdr((void *)get_handler, &info) || !info.dli_fname)
        return NULL;
    void *lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return NULL;
    void *fn = dlsym(lib, name);
    dlclose(lib);
    Dl_info where;
    if (fn && dladdr(fn, &where) && dladdr((void *)runtime_operator, &info) && where.dli_fbase == info.dli_fbase)
        return NULL;
    return fn;
}

typedef void *(*nothrow_fn)(size_t, const void *);
typedef void *(*nothrow_aligned_fn)(size_t, size_t, const void *);

/* A nothrow new that could not allocate: NULL at once if no handler is installed, else
 * the C++ runtime's nothrow operator name (see above).  Without one (a program whose C++
 * runtime is linked in statically), the handler is called here as the throwing form
 * would, and an exception it throws is not caught. */
static void *nothrow_failed(const char *name, size_t n, size_t align, const void *nt)
{
    handler_fn (*get_handler)(void) = (handler_fn (*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
    if (!get_handler || !get_handler())
        return NULL;
    void *fn = runtime_operator(name, get_handler);
    if (fn)
        return align ? ((nothrow_aligned_fn)fn)(n, align, nt) : ((nothrow_fn)fn)(n, nt);
    for (handler_fn h; (h = get_handler());) {
        h();
        void *p = align ? sc_aligned_alloc(align, n) : malloc(n);
        if (p)
            return p;
    }
    return NULL;
}

void *_Znwm(size_t n) { return new_(n); }
void *_Znam(size_t n) { return new_(n); }
void *_ZnwmSt11align_val_t(size_t n, size_t al) { return new_aligned(n, al); }
void *_ZnamSt11align_val_t(size_t n, size_t al) { return new_aligned(n, al); }

void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt)
{
    void *p = malloc(n);
    return p ? p : nothrow_failed("_ZnwmRKSt9nothrow_t", n, 0, nt);
}

void *_ZnamRKSt9nothrow_t(size_t n, const void *nt)
{
    void *p = malloc(n);
    return p ? p : nothrow_failed("_ZnamRKSt9nothrow_t", n, 0, nt);
}

void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt)
{
    void *p = sc_aligned_alloc(al, n);
    return p ? p : nothrow_failed("_ZnwmSt11align_val_tRKSt9nothrow_t", n, al, nt);
}

void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt)
{
    void *p = sc_aligned_alloc(al, n);
    return p ? p : nothrow_failed("_ZnamSt11align_val_tRKSt9nothrow_t", n, al, nt);
}

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
