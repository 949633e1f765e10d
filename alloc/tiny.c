/* The tiny allocator (Go's mallocgc tiny path, with explicit free): requests of a few
 * bytes share 16-byte blocks instead of each taking an 8- or 16-byte object.
 *
 * A thread packs its tiny objects into its current block at a running offset, each
 * aligned for any type of its size or smaller (8 from 8 bytes up, 4 from 4, 2 from 2:
 * C's wording for malloc, where Go aligns by the size's low bits - Go knows the type, C
 * does not, and a 12-byte struct with a flexible array may start with a double).  When a
 * request does not fit, a new block is taken from the thread's span of blocks (class
 * SC_TINY_SPANS, 16-byte objects like any other) if it leaves more room than the old one,
 * as in Go; where Go would then put the object alone in a block of its own, it takes a
 * 16-byte class object here (the same memory, and no bitmap to keep).
 *
 * Go frees a block when the collector finds none of its objects reachable.  Here the
 * last two bytes of each block hold its live bitmap, so a block offers 14 bytes:
 *   bits 0..13  an object starts at this offset and is live;
 *   bits 1..14  the frontier: the first byte after the last object of a block that is
 *               still some thread's current block (14: the block is full);
 *   bit 15      held: the block is some thread's current block.
 * A free clears its object's bit with a CAS, from any thread; whoever leaves the bitmap
 * at zero frees the block to its span, by the span's usual owner or remote path.  A
 * current block cannot reach zero (held), and retiring one clears the held and frontier
 * bits in one atomic step, freeing it if nothing else was left.  So a block goes back to
 * its span the moment its last object is freed, whichever thread frees it.
 *
 * The bitmap is also what a count could not be: a free of a bit already clear is a double
 * free (or a pointer that is no object's start), caught like any other; and an object's
 * usable size is the distance to the next set bit - the next live object, or the
 * frontier - so sc_usable_size and realloc stay exact enough to be safe: a neighbour
 * freed later only lets the size grow over dead bytes, which nothing reuses while the
 * block lives (offsets only move forward).  So every bad tiny free is caught: a clear bit
 * (a double free, an interior pointer), the frontier (while the block is held, the highest
 * set bit below 15 is no object), a block never handed out (the span's boundary test), a
 * block back on its span's list (its bitmap is zero).
 *
 * Tiny objects are never a block's fast-path free: a tiny span's owner field carries a
 * tag bit (sc_owner_tag), so sc_free's ownership test fails and the slow path, which
 * looks at the span class first, comes here.  Frees of every other object keep their
 * fast path unchanged.
 *
 * Built only with make TINY=1: it saves memory where programs make many objects of a few
 * bytes, but real programs make few (about 1-2% of gcc's, git's and python3's
 * allocations) and a tiny malloc+free costs two to three times a class object's; the
 * README has the figures.  Even then it is off where per-object tracking needs whole
 * objects: in ASan builds (the Makefile sets
 * SC_TINY 0: shadow memory has 8-byte granules, so objects packed at byte offsets could
 * not be poisoned one by one) and under valgrind's memcheck (each tiny request then
 * takes a class object, announced as usual). */
#include <string.h>

#include "internal.h"

#if SC_TINY

#define TINY_USABLE 14u
#define HELD 0x8000u
#define NO_BLOCK 16u

static inline _Atomic uint16_t *bitmap(const void *block)
{
    return (_Atomic uint16_t *)((uintptr_t)block + TINY_USABLE);
}

/* Alignment - 1 for n of 1..15 bytes: the largest power of two not above n, at most 8. */
static inline unsigned align_mask(size_t n) { return (1u << (63 - __builtin_clzll(n))) - 1; }

/* A class object where a tiny one cannot be had (a thread past its exit handler, valgrind). */
static void *class_object(size_t n)
{
    unsigned sc = SC_SPANCLASS(n <= 8 ? 1 : 2, 0);
    sc_span *s = sc_tls.cur[sc];
    return (uintptr_t)s->free != s->end ? sc_span_pop(s) : sc_cache_refill(sc, NULL);
}

static void count_free(sc_cache *c)
{
    if (SC_LIKELY(c->state == SC_CACHE_LIVE) || sc_cache_use(c))
        sc_count(&c->tiny_frees);
    else
        sc_cache_count_tiny_gone();
}

void sc_tiny_retire(sc_cache *c)
{
    if (c->tiny_off == NO_BLOCK)
        return;
    char *block = c->tiny;
    uint16_t drop = (uint16_t)(HELD | 1u << c->tiny_off);
    uint16_t old = atomic_fetch_and_explicit(bitmap(block), (uint16_t)~drop, memory_order_acq_rel);
    c->tiny = NULL;
    c->tiny_off = NO_BLOCK;
    if (!(old & ~drop))
        sc_free_block(block, sc_span_of(block));
}

static __attribute__((noinline)) void *new_block(sc_cache *c, size_t n)
{
    if (SC_UNLIKELY(c->state != SC_CACHE_LIVE) && !sc_cache_use(c))
        return class_object(n);      /* nothing would retire a block held now */
    if (SC_UNLIKELY(sc_heap.valgrind))
        return class_object(n);
    bool replace = c->tiny_off == NO_BLOCK || n < c->tiny_off;
    /* Go would put the object alone in a new block and keep the old one current; a block
     * nothing else will share is just a 16-byte object, and costs less as one. */
    if (!replace)
        return class_object(n);
    if (replace && c->tiny_off != NO_BLOCK) {
        /* Retiring the current block: if all its objects are gone already, it is reused
         * as the new one rather than given back and taken again. */
        char *old = c->tiny;
        uint16_t drop = (uint16_t)(HELD | 1u << c->tiny_off);
        if (!(atomic_fetch_and_explicit(bitmap(old), (uint16_t)~drop, memory_order_acq_rel) & ~drop)) {
            atomic_store_explicit(bitmap(old), (uint16_t)(HELD | 1u | 1u << n), memory_order_relaxed);
            c->tiny_off = (unsigned)n;
            sc_count(&c->tiny_allocs);
            return old;
        }
        c->tiny = NULL;
        c->tiny_off = NO_BLOCK;
    }
    sc_span *s = c->cur[SC_TINY_SPANS];
    char *block = (uintptr_t)s->free != s->end ? sc_span_pop(s) : sc_cache_refill(SC_TINY_SPANS, NULL);
    if (!block)
        return NULL;
    /* Before any of it is handed out: no other thread knows the block yet. */
    atomic_store_explicit(bitmap(block), (uint16_t)(HELD | 1u | 1u << n), memory_order_relaxed);
    c->tiny = block;
    c->tiny_off = (unsigned)n;
    sc_count(&c->tiny_allocs);
    return block;
}

static inline __attribute__((always_inline)) void *tiny_alloc(size_t n)
{
    sc_cache *c = &sc_tls;
    unsigned mask = align_mask(n), front = c->tiny_off;
    unsigned off = (front + mask) & ~mask;
    if (SC_UNLIKELY(off + n > TINY_USABLE))
        return new_block(c, n);
    /* The old frontier's bit becomes this object's (or goes, past alignment padding), and
     * the new frontier's is set: one atomic XOR, as frees of other objects may race. */
    atomic_fetch_xor_explicit(bitmap(c->tiny), (uint16_t)(1u << front ^ 1u << off ^ 1u << (off + n)),
                              memory_order_relaxed);
    c->tiny_off = off + (unsigned)n;
    sc_count(&c->tiny_allocs);
    return c->tiny + off;
}

void *sc_tiny_malloc(size_t n) { return tiny_alloc(n); }

void *sc_malloc_tiny(size_t n) { return tiny_alloc(n); }

#define TINY_ENTRY(n) \
    void *sc_malloc_tiny_##n(void) { return tiny_alloc(n); }
SC_FOREACH_TINY(TINY_ENTRY)
#undef TINY_ENTRY

void sc_tiny_free(void *p, sc_span *s)
{
    uintptr_t block = (uintptr_t)p & ~(uintptr_t)15;
    unsigned off = (unsigned)((uintptr_t)p & 15);
    if (!sc_starts_object_below(s, (void *)block, __atomic_load_n(&s->mul_limit, __ATOMIC_RELAXED)))
        sc_fatal("invalid free of %p: in a tiny block never handed out", p);
    _Atomic uint16_t *bits = bitmap((void *)block);
    uint16_t old = atomic_load_explicit(bits, memory_order_relaxed), left;
    do {
        unsigned below15 = old & 0x7fffu;
        bool live = off < TINY_USABLE && (old >> off & 1);
        if (!live || ((old & HELD) && below15 >> off == 1))     /* the frontier is no object */
            sc_fatal("double free of %p (or not the start of a tiny object)", p);
        left = (uint16_t)(old & ~(1u << off));
    } while (!atomic_compare_exchange_weak_explicit(bits, &old, left, memory_order_acq_rel, memory_order_relaxed));
    count_free(&sc_tls);
    if (!left)
        sc_free_block((void *)block, s);
}

size_t sc_tiny_usable(const void *p)
{
    unsigned off = (unsigned)((uintptr_t)p & 15);
    unsigned bits = atomic_load_explicit(bitmap((void *)((uintptr_t)p & ~(uintptr_t)15)), memory_order_acquire) & 0x7fffu;
    unsigned above = off < TINY_USABLE ? bits >> (off + 1) : 0;
    return above ? (size_t)__builtin_ctz(above) + 1 : TINY_USABLE - off;
}

#else

void *sc_tiny_malloc(size_t n) { return sc_malloc_generic(n); }
void *sc_malloc_tiny(size_t n) { return sc_malloc_generic(n); }
void sc_tiny_free(void *p, sc_span *s) { (void)p, (void)s; }
size_t sc_tiny_usable(const void *p) { (void)p; return 0; }
void sc_tiny_retire(sc_cache *c) { (void)c; }

#endif
