/* ASan builds (SAN=1) only: sc_free poisons the object and holds it back for a while, so
 * that AddressSanitizer reports a use after free of any heap object - the server's,
 * nghttp2's, OpenSSL's - as "use-after-poison", instead of the access landing quietly in
 * the next object handed out there.
 *
 * Each thread keeps the objects it freed last in a FIFO of at most QUARANTINE_OBJECTS
 * objects and QUARANTINE_BYTES bytes; the oldest is freed for real (sc_free_now) when a
 * new one would overflow it, when the thread exits, and on sc_scavenge.  An object
 * larger than the whole budget is poisoned and freed at once.  While held, an object
 * counts as freed in the statistics (held[], summed by sc_read_stats), so heap_alloc
 * means the same in every build.  A free of an object already poisoned is a double free.
 *
 * This is the layer above malloc.c: it is sc_free in these builds, and calls malloc.c's
 * free; in other builds this file compiles to nothing and sc_free is malloc.c's. */
#include "internal.h"

#if SC_ASAN
#define QUARANTINE_OBJECTS 1024
#define QUARANTINE_BYTES ((size_t)1 << 20)

enum { Q_UNUSED, Q_LIVE, Q_GONE };

struct quarantine {
    void *obj[QUARANTINE_OBJECTS];
    unsigned head, count;          /* oldest at head */
    size_t bytes;
    int state;                     /* Q_GONE once the thread's exit drained it */
};

static __thread struct quarantine quarantine SC_TLS;
static _Atomic uint64_t held[SC_NSPANCLASS], held_large, held_large_bytes;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* Counts p (+1) or uncounts it (-1) as a free the heap has not seen yet; heap objects
 * only, as the statistics count them (stacks are not). */
static void account(const sc_span *s, size_t bytes, int64_t sign)
{
    if (s->state == SC_SPAN_LARGE) {
        if (!s->stack) {
            atomic_fetch_add_explicit(&held_large, (uint64_t)sign, memory_order_relaxed);
            atomic_fetch_add_explicit(&held_large_bytes, (uint64_t)sign * bytes, memory_order_relaxed);
        }
    } else if (!SC_SPANCLASS_STACK(s->spanclass)) {
        atomic_fetch_add_explicit(&held[s->spanclass], (uint64_t)sign, memory_order_relaxed);
    }
}

static size_t object_bytes(const sc_span *s)
{
    return s->state == SC_SPAN_LARGE ? (size_t)s->npages << SC_PAGE_SHIFT : s->elemsize;
}

static void free_oldest(struct quarantine *q)
{
    void *p = q->obj[q->head];
    q->head = (q->head + 1) % QUARANTINE_OBJECTS;
    q->count--;
    const sc_span *s = sc_span_lookup(p);       /* p is still allocated: its span holds */
    size_t bytes = object_bytes(s);
    q->bytes -= bytes;
    account(s, bytes, -1);
    sc_free_now(p);
}

static void drain(struct quarantine *q)
{
    while (q->count)
        free_oldest(q);
}

static void thread_exit(void *arg)
{
    struct quarantine *q = arg;
    drain(q);
    q->state = Q_GONE;
}

static void make_exit_key(void)
{
    if (pthread_key_create(&exit_key, thread_exit))
        sc_fatal("cannot create the quarantine's thread-exit key");
}

void sc_free(void *p)
{
    if (!p)
        return;
    sc_span *s = sc_check_free(p, NULL);
    if (__asan_address_is_poisoned(p))
        sc_fatal("double free of %p", p);
    size_t bytes = object_bytes(s);
    sc_asan_poison(p, bytes);
    struct quarantine *q = &quarantine;
    if (q->state == Q_GONE || bytes > QUARANTINE_BYTES) {
        sc_free_now(p);
        return;
    }
    if (q->state == Q_UNUSED) {
        q->state = Q_LIVE;
        pthread_once(&exit_key_once, make_exit_key);
        pthread_setspecific(exit_key, q);
    }
    while (q->count == QUARANTINE_OBJECTS || q->bytes + bytes > QUARANTINE_BYTES)
        free_oldest(q);
    account(s, bytes, 1);
    q->obj[(q->head + q->count) % QUARANTINE_OBJECTS] = p;
    q->count++;
    q->bytes += bytes;
}

void sc_quarantine_drain(void) { drain(&quarantine); }

void sc_quarantine_counts(uint64_t counts[SC_NSPANCLASS], struct sc_large_counts *large)
{
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++)
        counts[sc] = atomic_load_explicit(&held[sc], memory_order_relaxed);
    large->frees = atomic_load_explicit(&held_large, memory_order_relaxed);
    large->free_bytes = atomic_load_explicit(&held_large_bytes, memory_order_relaxed);
    large->mallocs = large->alloc_bytes = 0;
}
#endif
