/* The per-thread cache (Go's mcache): one current span per span class, plus the other
 * spans this thread owns, so that the common malloc and the common free of an object the
 * thread owns take no lock and no atomic read-modify-write.
 *
 * Unlike Go, where the garbage collector sweeps, frees here are explicit; a span stays
 * with the thread that carved it, so a thread freeing its own objects always takes the
 * fast path however many spans they spread over.  When the current span runs dry,
 * refill looks, in order, at its remote frees, a few of the thread's other spans
 * (oldest first, rotating full ones to the back), a central span abandoned by an
 * exited thread, the thread's pool of empty one-page spans of any class (below), and
 * finally fresh pages.  Empty spans go back to the page heap when the
 * cache is trimmed (sc_scavenge asks every cache), and when the thread keeps taking fresh
 * pages: once it has taken more than max(TRIM_MIN_PAGES, 1/TRIM_FRACTION of the pages it
 * owns) since its last trim, it first gives back all its empty spans, so that a program
 * that moves from one phase to the next reuses the pages of the last one's sizes rather
 * than keeping a set of empty spans per size.  The walk visits every span the thread owns;
 * the fraction keeps that O(1) per page taken, amortized, and a thread whose spans serve it
 * without fresh pages never walks.  It also runs at most once per page-heap tick (1 ms,
 * read from the coarse clock: in effect once per step of that clock, 4 ms here; pageheap.c):
 * a program that cycles through its sizes faster than that would otherwise send each span
 * to the page heap and take it back once a cycle - for glibc's bench-malloc-simple
 * (bench_workloads glibc-simple 1 10, a cycle of eight sizes every 0.1 ms) that lowered the
 * peak RSS from 7.2 to 5.5 MiB but took 1.15 s instead of 0.61 (medians of 5 interleaved
 * runs); the pool does it within the thread, without the page heap.  (Refill itself reuses
 * an empty span of the class it needs when it meets one.)
 * The cache also keeps the thread's last few freed large objects (SC_LARGE_CACHE), given
 * back on trim and at exit.  The cache itself is static TLS, so the fast path reaches it
 * with one segment-relative load and needs no initialisation check: an unused slot
 * points at an empty span. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

#define REFILL_SCAN 8
#define TRIM_MIN_PAGES 16
#define TRIM_FRACTION 16

sc_span sc_empty_span;
__thread sc_cache sc_tls SC_TLS = {
    .cur = { [0 ... SC_NSPANCLASS - 1] = &sc_empty_span },
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static sc_cache *registry;
static uint64_t exited_nremote[SC_NSPANCLASS];
static struct sc_large_counts exited_large;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned trim_epoch;

static void others_push_tail(sc_cache *c, unsigned sc, sc_span *s)
{
    sc_span *head = c->others[sc];
    c->nothers[sc]++;
    if (!head) {
        s->next = s->prev = s;
        c->others[sc] = s;
        return;
    }
    s->next = head;
    s->prev = head->prev;
    head->prev->next = s;
    head->prev = s;
}

static void others_remove(sc_cache *c, unsigned sc, sc_span *s)
{
    c->nothers[sc]--;
    if (s->next == s) {
        c->others[sc] = NULL;
    } else {
        s->prev->next = s->next;
        s->next->prev = s->prev;
        if (c->others[sc] == s)
            c->others[sc] = s->next;
    }
    s->next = s->prev = NULL;
}

/* The oldest cached large span goes back to the page heap. */
static void large_release_oldest(sc_cache *c)
{
    sc_span *s = c->large[0];
    c->nlarge--;
    for (unsigned i = 0; i < c->nlarge; i++)
        c->large[i] = c->large[i + 1];
    sc_heap_free(s);
}

void *sc_cache_large_get(size_t npages)
{
    sc_cache *c = &sc_tls;
    for (unsigned i = c->nlarge; i-- > 0;) {
        sc_span *s = c->large[i];
        if (s->npages != npages)
            continue;
        c->nlarge--;
        for (unsigned j = i; j < c->nlarge; j++)
            c->large[j] = c->large[j + 1];
        s->cached = 0;
        sc_asan_unpoison((void *)s->base, npages << SC_PAGE_SHIFT);
        sc_count(&c->large_counts.mallocs);
        sc_count_n(&c->large_counts.alloc_bytes, npages << SC_PAGE_SHIFT);
        return (void *)s->base;
    }
    return NULL;
}

bool sc_cache_large_put(sc_span *s)
{
    sc_cache *c = &sc_tls;
    if (s->stack || s->npages > SC_LARGE_CACHE_PAGES || SC_UNLIKELY(sc_heap.valgrind))
        return false;
    if (SC_UNLIKELY(c->state != SC_CACHE_LIVE) && !sc_cache_use(c))
        return false;
    if (c->nlarge == SC_LARGE_CACHE)
        large_release_oldest(c);
    s->cached = 1;
    c->large[c->nlarge++] = s;
    sc_count(&c->large_counts.frees);
    sc_count_n(&c->large_counts.free_bytes, (uint64_t)s->npages << SC_PAGE_SHIFT);
    return true;
}

static void pool_release(sc_cache *c);

static void cache_flush(sc_cache *c)
{
    pool_release(c);
    c->owned_pages = c->fresh_pages = 0;
    while (c->nlarge)
        large_release_oldest(c);
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++) {
        if (c->cur[sc] != &sc_empty_span)
            sc_central_abandon(c->cur[sc]);
        c->cur[sc] = &sc_empty_span;
        while (c->others[sc]) {
            sc_span *s = c->others[sc];
            others_remove(c, sc, s);
            sc_central_abandon(s);
        }
    }
}

/* Under registry_lock: a cache's counts go to the exited totals. */
static void retire_counts(sc_cache *c)
{
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++) {
        exited_nremote[sc] += c->nremote[sc];
        __atomic_store_n(&c->nremote[sc], 0, __ATOMIC_RELAXED);
    }
    exited_large.mallocs += c->large_counts.mallocs;
    exited_large.frees += c->large_counts.frees;
    exited_large.alloc_bytes += c->large_counts.alloc_bytes;
    exited_large.free_bytes += c->large_counts.free_bytes;
    memset(&c->large_counts, 0, sizeof c->large_counts);
}

/* Under registry_lock. */
static void unlink_cache(sc_cache *c)
{
    if (c->reg_prev)
        c->reg_prev->reg_next = c->reg_next;
    else
        registry = c->reg_next;
    if (c->reg_next)
        c->reg_next->reg_prev = c->reg_prev;
    c->reg_next = c->reg_prev = NULL;
    c->state = SC_CACHE_GONE;
}

static void thread_exit(void *arg)
{
    sc_cache *c = arg;
    cache_flush(c);
    pthread_mutex_lock(&registry_lock);
    retire_counts(c);
    unlink_cache(c);
    pthread_mutex_unlock(&registry_lock);
}

/* A free pushed onto another thread's span by a thread whose cache is gone. */
void sc_cache_count_gone(unsigned spanclass)
{
    pthread_mutex_lock(&registry_lock);
    exited_nremote[spanclass]++;
    pthread_mutex_unlock(&registry_lock);
}

static void make_exit_key(void)
{
    if (pthread_key_create(&exit_key, thread_exit))
        sc_fatal("cannot create the thread-exit key");
}

/* Makes the calling thread's cache live; false once it is gone (see internal.h). */
bool sc_cache_use(sc_cache *c)
{
    if (c->state == SC_CACHE_GONE)
        return false;
    sc_heap_init();
    pthread_once(&exit_key_once, make_exit_key);
    pthread_mutex_lock(&registry_lock);
    c->reg_prev = NULL;
    c->reg_next = registry;
    if (registry)
        registry->reg_prev = c;
    registry = c;
    c->state = SC_CACHE_LIVE;
    c->trim_epoch = atomic_load_explicit(&trim_epoch, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
    /* Live before this: with more than 32 keys in use it allocates. */
    pthread_setspecific(exit_key, c);
    return true;
}

static bool span_has_free(const sc_span *s) { return (uintptr_t)s->free != s->end || s->bump != s->end; }

/* Takes an object from a span known to have one: listed objects first, so recently
 * freed (warm) memory is reused before untouched memory is. */
static void *span_take(sc_span *s, bool *zeroed)
{
    if ((uintptr_t)s->free != s->end)
        return sc_span_pop(s);
    if (zeroed)
        *zeroed = !s->needzero;
    return sc_span_bump(s);
}

static sc_span *fresh_span(unsigned sc)
{
    unsigned cls = SC_SPANCLASS_CLASS(sc);
    sc_span *s = sc_heap_alloc(sc_class_npages[cls], SC_PAGE_SIZE, sc, false);
    if (!s)
        return NULL;
    sc_span_init_small(s);
    atomic_store_explicit(&s->owner, sc_thread_id(), memory_order_relaxed);
    return s;
}

/* ---- The pool: empty spans for the next span of any class of their size.
 *
 * A span whose objects are all freed is still its class's: a thread that moves on to
 * other sizes keeps it, and takes fresh pages for them, until it next gives spans back
 * to the page heap.  So a thread puts its empty one-page spans of heap classes in a pool
 * of its own (most classes up to 8 KiB take one page) and takes its next span from there
 * before the page heap: one of its own class as it is, with its free list, else one of
 * another class, carved anew - a few stores, and no lock but one per batch of carvings
 * (1, 2, 4, then 8 spans while refills stay with one class) for the spans' counts (sc_heap_retire_counts: the statistics must never see a span's
 * counts in two classes).  Spans become empty without a free noticing (free never looks),
 * so the pool is filled when a refill is of another class than the last one, if the last
 * one's current span is empty - the thread has moved on: its empty spans, newest first.
 * It goes back to the page heap whole when the thread takes a span from there (a span of
 * several pages, or more than the pool holds: the page heap may join pooled pages into
 * the run it needs), at a trim (sc_scavenge) and at thread exit.
 *
 * glibc's bench-malloc-simple (bench_workloads glibc-simple 1 10: batches of 1000 objects
 * of one size, eight sizes in turn every 0.1 ms) kept every size's spans - the 4 KiB
 * batch's 500 and the smaller sizes' 250 - where with the pool all sizes share the 4 KiB
 * batch's 500 (peak RSS 7.4 -> 5.5 MiB). ---- */

#define CARVE_BATCH 8     /* at most; 1, 2, 4 and then 8 at a time while one class refills */

static bool poolable(unsigned sc, const sc_span *s)
{
    return sc > 0 && sc < SC_NCLASS && s->npages == 1 && SC_LIKELY(!sc_heap.valgrind);
}

static void pool_push(sc_cache *c, sc_span *s)
{
    unsigned sc = s->spanclass;
    s->next = c->pool[sc];
    c->pool[sc] = s;
    c->pool_bits[sc / 64] |= (uint64_t)1 << (sc % 64);
    c->pool_pages++;
}

static sc_span *pool_pop(sc_cache *c, unsigned sc)
{
    sc_span *s = c->pool[sc];
    if (!(c->pool[sc] = s->next))
        c->pool_bits[sc / 64] &= ~((uint64_t)1 << (sc % 64));
    s->next = NULL;
    c->pool_pages--;
    return s;
}

/* A chain (through next) of empty spans the thread owned, out of cur[] and others[]. */
static void pool_put(sc_cache *c, sc_span *chain)
{
    for (sc_span *s = chain, *next; s; s = next) {
        next = s->next;
        pool_push(c, s);
        c->owned_pages--;
    }
}

/* A pooled span for class sc, or NULL: one of sc's own, as it is; else some of other
 * classes, carved for sc, the first returned and the rest at the front of sc's circle. */
static sc_span *pool_take(sc_cache *c, unsigned sc)
{
    if (!c->pool_pages || sc == 0 || sc >= SC_NCLASS || sc_class_npages[sc] != 1)
        return NULL;
    if (c->pool[sc]) {
        c->owned_pages++;
        return pool_pop(c, sc);
    }
    sc_span *chain = NULL;
    unsigned n = 0, want = c->carve;
    c->carve = want < CARVE_BATCH ? 2 * want : CARVE_BATCH;
    for (unsigned w = 0; w < 2 && n < want; w++) {
        while (c->pool_bits[w] && n < want) {
            sc_span *s = pool_pop(c, w * 64 + (unsigned)__builtin_ctzll(c->pool_bits[w]));
            s->next = chain;
            chain = s;
            n++;
        }
    }
    sc_heap_retire_counts(chain);
    c->owned_pages += n;
    sc_span *first = chain, *second = chain->next;
    for (sc_span *s = chain, *next; s; s = next) {
        next = s->next;
        s->next = NULL;
        __atomic_store_n(&s->spanclass, (uint8_t)sc, __ATOMIC_RELAXED);
        sc_span_init_small(s);
        s->needzero = true;                   /* its pages held the old class's objects */
        if (s != first)
            others_push_tail(c, sc, s);
    }
    if (second)
        c->others[sc] = second;               /* a circle's tail is just before its head */
    return first;
}

/* The pool back to the page heap. */
static void pool_release(sc_cache *c)
{
    for (unsigned w = 0; w < 2; w++)
        while (c->pool_bits[w])
            sc_heap_free(pool_pop(c, w * 64 + (unsigned)__builtin_ctzll(c->pool_bits[w])));
}

/* The thread moved from class last to another: if last's current span is empty, it and
 * last's other empty spans, newest first, go to the pool; the walk stops at the first
 * span with a live object, so it costs one visit more than the spans it pools. */
static void pool_class_left(sc_cache *c, unsigned last)
{
    sc_span *cur = c->cur[last];
    if (last == 0 || last >= SC_NCLASS || cur == &sc_empty_span || !poolable(last, cur))
        return;
    sc_span_collect_remote(cur);
    if (sc_span_live(cur))
        return;
    c->cur[last] = &sc_empty_span;
    sc_span *chain = cur, **tail = &cur->next;
    cur->next = NULL;
    while (c->others[last]) {
        sc_span *s = c->others[last]->prev;
        sc_span_collect_remote(s);
        if (sc_span_live(s))
            break;
        others_remove(c, last, s);
        *tail = s;
        tail = &s->next;
    }
    *tail = NULL;
    pool_put(c, chain);
}

/* The thread's spans without live objects, out of cur[] and others[], as a chain; the rest
 * stay, in their order. */
static sc_span *take_empty_spans(sc_cache *c)
{
    sc_span *chain = NULL;
    c->fresh_pages = 0;
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++) {
        sc_span *cur = c->cur[sc];
        if (cur != &sc_empty_span) {
            sc_span_collect_remote(cur);
            if (sc_span_live(cur) == 0) {
                c->cur[sc] = &sc_empty_span;
                cur->next = chain;
                chain = cur;
            }
        }
        /* One full turn: empty spans leave, the rest stay in their order. */
        sc_span *s = c->others[sc];
        for (uint32_t n = c->nothers[sc]; n--;) {
            sc_span *next = s->next;
            sc_span_collect_remote(s);
            if (sc_span_live(s) == 0) {
                others_remove(c, sc, s);
                s->next = chain;
                chain = s;
            }
            s = next;
        }
    }
    return chain;
}

/* A chain of empty spans back to the page heap. */
static void free_spans(sc_cache *c, sc_span *chain)
{
    for (sc_span *s = chain, *next; s; s = next) {
        next = s->next;
        c->owned_pages -= s->npages;
        s->next = NULL;
        sc_heap_free(s);
    }
}

void sc_cache_trim(sc_cache *c)
{
    while (c->nlarge)
        large_release_oldest(c);
    free_spans(c, take_empty_spans(c));
    pool_release(c);
}

/* Takes an object from a span, announcing it to valgrind where the heap runs under it. */
static void *take_announced(sc_span *s, bool *zeroed)
{
    if (SC_LIKELY(!sc_heap.valgrind))
        return span_take(s, zeroed);
    if ((uintptr_t)s->free != s->end)
        sc_vg_defined(s->free, sizeof(uintptr_t));
    bool zero = false;
    void *p = span_take(s, &zero);
    sc_vg_malloclike(p, s->elemsize, zero);
    if (zeroed)
        *zeroed = zero;
    return p;
}

/* Once the thread's cache is gone, each object comes from a span given straight back to
 * the central list: nothing stays owned by a thread about to vanish. */
static void *refill_uncached(unsigned sc, bool *zeroed)
{
    sc_span *s = sc_central_adopt(sc);
    if (!s)
        s = fresh_span(sc);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = take_announced(s, zeroed);
    sc_central_abandon(s);
    return p;
}

void *sc_cache_refill(size_t spanclass, bool *zeroed)
{
    sc_cache *c = &sc_tls;
    unsigned sc = (unsigned)spanclass;
    if (zeroed)
        *zeroed = false;
    if (SC_UNLIKELY(c->state != SC_CACHE_LIVE) && !sc_cache_use(c))
        return refill_uncached(sc, zeroed);
    unsigned epoch = atomic_load_explicit(&trim_epoch, memory_order_relaxed);
    if (SC_UNLIKELY(c->trim_epoch != epoch)) {
        c->trim_epoch = epoch;
        sc_cache_trim(c);
    }
    if (SC_UNLIKELY(c->last_refill != sc)) {
        pool_class_left(c, c->last_refill);
        c->last_refill = sc;
        c->carve = 1;
    }
    sc_span *cur = c->cur[sc];
    if (cur != &sc_empty_span) {
        sc_span_collect_remote(cur);
        if (span_has_free(cur))
            return span_take(cur, zeroed);
    }
    sc_span *pick = NULL;
    for (int i = 0; i < REFILL_SCAN && c->others[sc]; i++) {
        sc_span *s = c->others[sc];
        sc_span_collect_remote(s);
        if (span_has_free(s)) {
            pick = s;
            others_remove(c, sc, s);
            break;
        }
        c->others[sc] = s->next;      /* the head goes to the back of the circle */
    }
    if (!pick && (pick = sc_central_adopt(sc)))
        c->owned_pages += pick->npages;
    if (!pick)
        pick = pool_take(c, sc);
    if (!pick) {
        c->fresh_pages += sc_class_npages[SC_SPANCLASS_CLASS(sc)];
        if (c->fresh_pages > TRIM_MIN_PAGES && c->fresh_pages > c->owned_pages / TRIM_FRACTION) {
            uint64_t now = sc_heap_tick_now();
            if (now != c->trim_tick) {
                c->trim_tick = now;
                free_spans(c, take_empty_spans(c));
                cur = c->cur[sc];      /* given back if it was empty */
            } else {
                c->fresh_pages = 0;    /* so that the clock is read once per fraction again */
            }
        }
        if (!pick && c->pool_pages)
            pool_release(c);           /* the page heap may join them into a run for sc */
        if (!pick && (pick = fresh_span(sc)))
            c->owned_pages += pick->npages;
    }
    if (!pick) {
        errno = ENOMEM;
        return NULL;
    }
    if (cur != &sc_empty_span)
        others_push_tail(c, sc, cur);
    if (SC_UNLIKELY(sc_heap.valgrind)) {
        /* Under valgrind nothing is current, so every malloc comes here and is
         * announced; the span waits at the head of the list for the next one. */
        c->cur[sc] = &sc_empty_span;
        others_push_tail(c, sc, pick);
        c->others[sc] = pick;
        return take_announced(pick, zeroed);
    }
    c->cur[sc] = pick;
    return span_take(pick, zeroed);
}

void sc_trim_all_caches(void)
{
    atomic_fetch_add_explicit(&trim_epoch, 1, memory_order_relaxed);
    sc_cache *c = &sc_tls;
    if (c->state == SC_CACHE_LIVE) {
        c->trim_epoch = atomic_load_explicit(&trim_epoch, memory_order_relaxed);
        sc_cache_trim(c);
    }
}

void sc_cache_sum(uint64_t nremote[SC_NSPANCLASS], struct sc_large_counts *large)
{
    pthread_mutex_lock(&registry_lock);
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++)
        nremote[sc] = exited_nremote[sc];
    *large = exited_large;
    for (sc_cache *c = registry; c; c = c->reg_next) {
        for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++)
            nremote[sc] += __atomic_load_n(&c->nremote[sc], __ATOMIC_RELAXED);
        large->mallocs += __atomic_load_n(&c->large_counts.mallocs, __ATOMIC_RELAXED);
        large->frees += __atomic_load_n(&c->large_counts.frees, __ATOMIC_RELAXED);
        large->alloc_bytes += __atomic_load_n(&c->large_counts.alloc_bytes, __ATOMIC_RELAXED);
        large->free_bytes += __atomic_load_n(&c->large_counts.free_bytes, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* fork.c */
void sc_registry_lock(void) { pthread_mutex_lock(&registry_lock); }
void sc_registry_unlock(void) { pthread_mutex_unlock(&registry_lock); }

/* In a forked child, where the calling thread is the only one: the other threads' caches
 * leave the registry (their counts go to the exited totals), since their memory will be
 * new threads' thread-local storage.  Their spans are not taken back: a thread stopped
 * inside a lock-free path may have left its lists half-updated, so they stay with their
 * vanished owners (a leak in the child, as other allocators leak dead threads' caches). */
void sc_cache_forget_other_threads(void)
{
    pthread_mutex_lock(&registry_lock);
    for (sc_cache *c = registry, *next; c; c = next) {
        next = c->reg_next;
        if (c == &sc_tls)
            continue;
        retire_counts(c);
        unlink_cache(c);
    }
    pthread_mutex_unlock(&registry_lock);
}
