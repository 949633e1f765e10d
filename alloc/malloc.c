/* The public entry points (Go's malloc.go): the size-specialized and generic malloc
 * fast paths, free, and what is built on them.
 *
 * The specialized functions are stamped out from the generated class list: each is the
 * generic fast path with its span class fixed at compile time, so it skips the
 * size-to-class lookup and the large-object test and indexes the cache with a constant.
 * The free fast path is a page-map lookup, an ownership test, an object-boundary test
 * (one multiply), a double-free test (one decode, exact after a search of the list on the
 * slow path), and a push; everything else - other threads' objects, unowned spans, large
 * objects, NULL, bad pointers - takes the slow path. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "internal.h"

/* At start, so that no allocation is ever inside pthread_atfork when it is called. */
__attribute__((constructor)) static void install_fork_handlers(void) { sc_fork_install(); }

static inline __attribute__((always_inline)) void *alloc_small(size_t sc)
{
    sc_span *s = sc_tls.cur[sc];
    if (SC_UNLIKELY((uintptr_t)s->free == s->end))
        return sc_cache_refill(sc, NULL);
    return sc_span_pop(s);
}

#define SPECIALIZED(cls, size, prev) \
    void *sc_malloc_##size(void) { return alloc_small(SC_SPANCLASS(cls, 0)); }
SC_FOREACH_SPECIALIZED(SPECIALIZED)
#undef SPECIALIZED

static void *malloc_zero(void) { return sc_malloc_generic(0); }

void *(*const sc_malloc_table[SC_SPECIALIZED_LIMIT + 1])(void) = {
    [0] = malloc_zero,
#define SPECIALIZED(cls, size, prev) [(prev) + 1 ... (size)] = sc_malloc_##size,
    SC_FOREACH_SPECIALIZED(SPECIALIZED)
#undef SPECIALIZED
};

static size_t size_class(size_t n) { return sc_size_to_class[n]; }

/* Whole pages, at an address that is a multiple of align (a power of two; a page or less
 * is any page).  Inlined into its two callers, so that the common one (alloc_large) has
 * the alignment tests folded away. */
static inline __attribute__((always_inline)) void *alloc_pages(size_t n, size_t align, bool zero, bool stack)
{
    if (n > ((size_t)1 << 46) || align > ((size_t)1 << 46)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t npages = (n + SC_PAGE_SIZE - 1) >> SC_PAGE_SHIFT;
    if (!zero && !stack && align <= SC_PAGE_SIZE) {
        void *p = sc_cache_large_get(npages);
        if (p)
            return p;
    }
    sc_span *s = sc_heap_alloc(npages ? npages : 1, align, SC_SPANCLASS(0, stack), zero);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    if (SC_UNLIKELY(sc_heap.valgrind))
        sc_vg_malloclike((void *)s->base, n, zero);
    return (void *)s->base;
}

static __attribute__((noinline)) void *alloc_large(size_t n, bool zero, bool stack)
{
    return alloc_pages(n, SC_PAGE_SIZE, zero, stack);
}

void *sc_malloc_generic(size_t n)
{
    if (SC_LIKELY(n <= SC_MAX_SMALL))
        return alloc_small(size_class(n));
    return alloc_large(n, false, false);
}

/* The span of p, a pointer the heap handed out (NULL excluded); any other aborts naming
 * what is wrong with it.  s, if not NULL, is p's page-map entry. */
static inline __attribute__((always_inline)) sc_span *check_free(void *p, sc_span *s)
{
    if (!s)
        s = sc_span_lookup(p);
    if (!s || s->state == SC_SPAN_FREE || s->state > SC_SPAN_LARGE)
        sc_fatal("invalid free of %p: not a pointer this heap returned (or already freed)", p);
    if (s->state == SC_SPAN_LARGE) {
        if ((uintptr_t)p != s->base)
            sc_fatal("invalid free of %p: inside the %u-page object at %p", p, s->npages, (void *)s->base);
        if (s->cached)
            sc_fatal("double free of %p", p);
    } else if (!sc_starts_object_below(s, p, __atomic_load_n(&s->mul_limit, __ATOMIC_RELAXED))) {
        /* The owner may be raising the limit as this runs: p, handed out before, is below. */
        sc_fatal("invalid free of %p: not the start of an object", p);
    }
    return s;
}

sc_span *sc_check_free(void *p, sc_span *s) { return check_free(p, s); }

static void free_large(sc_span *s, void *p)
{
    if (SC_UNLIKELY(sc_heap.valgrind))
        sc_vg_freelike(p);
    if (!sc_cache_large_put(s))
        sc_heap_free(s);
}

static void free_remote(sc_cache *c, sc_span *s, void *p)
{
    uintptr_t me = sc_thread_id();
    bool counted_here = SC_LIKELY(c->state == SC_CACHE_LIVE) || sc_cache_use(c);
    /* Read while p is live: once p is pushed the owner may collect it, give the empty
     * span back and reuse the struct for another class. */
    unsigned spanclass = __atomic_load_n(&s->spanclass, __ATOMIC_RELAXED);
    uintptr_t old = atomic_load_explicit(&s->thread_free, memory_order_relaxed);
    for (;;) {
        if (old == SC_TF_ABANDONED) {
            if (sc_central_free(s, p))
                return;
            /* Adopted meanwhile: by us, or by another thread. */
            if (atomic_load_explicit(&s->owner, memory_order_relaxed) == me) {
                sc_span_push(s, p);
                return;
            }
            old = atomic_load_explicit(&s->thread_free, memory_order_relaxed);
            continue;
        }
        if (SC_UNLIKELY(old == (uintptr_t)p))       /* freed already, and not collected since */
            sc_fatal("double free of %p", p);
        sc_link_store(p, sc_link_encode(old ? (void *)old : (void *)s->end));
        if (atomic_compare_exchange_weak_explicit(&s->thread_free, &old, (uintptr_t)p,
                                                  memory_order_release, memory_order_relaxed)) {
            /* Counted once pushed: a reader may still count it live for an instant. */
            if (SC_LIKELY(counted_here))
                sc_count(&c->nremote[spanclass]);
            else
                sc_cache_count_gone(spanclass);
            return;
        }
    }
}

void sc_free_slow(void *p, sc_span *s)
{
    if (!p)
        return;
    if (!s && !(s = sc_span_lookup(p)) && sc_foreign_free(p))
        return;
    s = check_free(p, s);
    if (s->state == SC_SPAN_LARGE) {
        free_large(s, p);
        return;
    }
    sc_cache *c = &sc_tls;
    if (SC_UNLIKELY(sc_heap.valgrind)) {
        sc_vg_freelike(p);
        sc_vg_defined(p, sizeof(uintptr_t));
    }
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) == sc_thread_id()) {
        /* Ours, but here because it looked freed (or under valgrind): make sure. */
        if (sc_looks_freed(s, p)) {
            sc_span_collect_remote(s);
            if (sc_list_contains(s, s->free, p))
                sc_fatal("double free of %p", p);
        }
        sc_span_push(s, p);
        return;
    }
    /* Another thread's span: its lists cannot be searched from here, and a live object's
     * first word may decode into its span by chance - whatever a program stores there -
     * so nothing short of exact is a reason to abort (internal.h): free_remote catches
     * the free of the object it pushed last, the collection a list that loops. */
    free_remote(c, s, p);
}

/* In ASan builds sc_free is the quarantine's (quarantine.c), which frees here later. */
#if SC_ASAN
#define FREE_NOW sc_free_now
#else
#define FREE_NOW sc_free
#endif

void FREE_NOW(void *p)
{
    size_t page = ((uintptr_t)p - sc_heap.base) >> SC_PAGE_SHIFT;
    sc_span *s = NULL;
    if (SC_UNLIKELY(!sc_page_is_fast(page)))
        goto slow;            /* NULL, not ours, or valgrind */
    s = sc_heap.pagemap[page];
    if (SC_UNLIKELY(!sc_owned_here(s) || !sc_span_is_object_start(s, p) || sc_looks_freed(s, p)))
        goto slow;
    sc_span_push(s, p);
    return;
slow:
    sc_free_slow(p, s);
}

void *sc_calloc(size_t count, size_t n)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, n, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (bytes > SC_MAX_SMALL)
        return alloc_large(bytes, true, false);
    /* The fast path's lists hold used objects; the refill path may hand out a never-used
     * object from clean pages, which is zero already and stays untouched. */
    unsigned sc = SC_SPANCLASS(size_class(bytes), 0);
    sc_span *s = sc_tls.cur[sc];
    bool zeroed = false;
    void *p = (uintptr_t)s->free != s->end ? sc_span_pop(s) : sc_cache_refill(sc, &zeroed);
    if (p && !zeroed)
        memset(p, 0, bytes);
    return p;
}

/* Every object is aligned to the largest power of two that divides its class size, up
 * to a page (spans start on pages), and large objects to a page; so an alignment up to a
 * page is the first class from n's up whose size it divides (32 KiB serves all), and a
 * larger one is a large object the page heap places there.  Either way the pointer is an
 * object's start, freed and measured like any other: no interior pointers. */
void *sc_aligned_alloc(size_t align, size_t n)
{
    if (!align || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    if (n <= SC_MAX_SMALL && align <= SC_PAGE_SIZE) {
        for (size_t cls = size_class(n);; cls++)
            if (sc_class_size[cls] % align == 0)
                return alloc_small(SC_SPANCLASS(cls, 0));
    }
    return alloc_pages(n, align, false, false);
}

size_t sc_usable_size(const void *p)
{
    if (!p)
        return 0;
    sc_span *s = sc_span_lookup(p);
    size_t foreign;
    if (!s && (foreign = sc_foreign_usable((void *)p)))
        return foreign;
    if (!s || s->state == SC_SPAN_FREE)
        sc_fatal("sc_usable_size(%p): not a pointer this heap returned", p);
    if (s->state == SC_SPAN_LARGE)
        return (size_t)s->npages << SC_PAGE_SHIFT;
    return s->elemsize;
}

size_t sc_roundup(size_t n)
{
    if (n <= SC_MAX_SMALL)
        return sc_class_size[size_class(n)];
    if (n > SIZE_MAX - SC_PAGE_SIZE)
        return n;
    return (n + SC_PAGE_SIZE - 1) & ~(size_t)(SC_PAGE_SIZE - 1);
}

void *sc_realloc(void *p, size_t n)
{
    if (!p)
        return sc_malloc_generic(n);
    if (n == 0) {
        sc_free(p);
        return NULL;
    }
    size_t have = sc_usable_size(p);       /* aborts on a bad pointer */
    sc_span *s = sc_span_lookup(p);
    /* A pointer from another allocator (the drop-in's foreign.c) moves onto the heap. */
    if (!s)
        goto move;
    /* A large object that stays large: its span grows into the free pages after it or
     * gives its tail back, without a copy, where it can. */
    if (n > SC_MAX_SMALL && have > SC_MAX_SMALL && n <= ((size_t)1 << 46)) {
        size_t npages = (n + SC_PAGE_SIZE - 1) >> SC_PAGE_SHIFT;
        if (s->state == SC_SPAN_LARGE && (uintptr_t)p == s->base && !s->cached &&
            (npages == s->npages || sc_heap_resize(s, npages)))
            return p;
    }
    /* Keep the object when the new size still takes the same class or page count. */
    if (sc_roundup(n) == have)
        return p;
move:;
    void *q = sc_malloc_generic(n);
    if (!q)
        return NULL;
    memcpy(q, p, have < n ? have : n);
    sc_free(p);
    return q;
}

void *sc_stack_alloc(size_t n)
{
    if (SC_LIKELY(n <= SC_MAX_SMALL))
        return alloc_small(SC_SPANCLASS(size_class(n), 1));
    return alloc_large(n, false, true);
}

void sc_stack_free(void *p) { sc_free(p); }
