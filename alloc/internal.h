/* Shared internals of scalloc: the span, the thread cache, the page heap.
 *
 * Invariants every file relies on:
 * - A span is FREE (a run of idle pages in the page heap), SMALL (objects of one size
 *   class) or LARGE (one object of whole pages).  The page map holds the span of every
 *   page of a SMALL or LARGE span, and of the first and last page of a FREE run.
 * - A SMALL span is owned by exactly one thread (owner = that thread's id) or by none,
 *   and then sits in a central list with thread_free == SC_TF_ABANDONED.  Only the owner
 *   touches free, nalloc and nfreed of an owned span; other threads push onto
 *   thread_free with a CAS.  Unowned spans are changed under their central lock.
 * - Free-list links are stored in the first word of a free object, XORed with a
 *   process-wide random key, and every list ends with span->end (one past the last
 *   object), never NULL.  A freed object's first word therefore decodes into its own
 *   span: the owner's free tests that (one decode) and, only if it holds, searches the
 *   span's lists before it calls the free a double free, since a live object's first
 *   word may decode into its span too - by chance, whatever the program stores there.
 *   So every object handed out starts with a word that decodes outside (0), to keep the
 *   search off the fast path: a popped object's is cleared, and so is a bumped one's on
 *   pages that may hold old data.  A free from another thread cannot search the owner's
 *   lists, so it calls nothing a double free that is not one for certain (the object it
 *   pushes is the one last pushed; a collected list longer than its span's objects):
 *   a double free is reported exactly or not at all, and an ASan build (its quarantine
 *   knows every freed object) reports every one.
 * - A fresh span is not threaded: objects past span->bump are handed out by bumping,
 *   so pages nobody asked for stay untouched (and, if they came clean, zero), and
 *   mul_limit only admits objects below the bump, so freeing one never handed out is
 *   caught by the same multiply that rejects interior pointers.
 * - One list per span: the thread's own frees push onto the list malloc pops, so an
 *   alloc/free loop reuses one warm object and never leaves the fast path.
 * - nalloc and nfreed count the objects a span ever handed out and took back (remote
 *   frees when collected); their difference is the span's live objects, so a free
 *   never has to look at whether the span became empty (refill and trim do).  They are
 *   also the statistics: the fast paths count nothing else, and sc_read_stats sums
 *   them over all spans (the page heap keeps the totals of spans that are gone).
 * - Layers call downward only: malloc.c (entry points) -> cache.c (per-thread caches)
 *   -> central.c (spans of exited threads) -> span.c -> pageheap.c, the floor, which
 *   calls nothing above it; fatal.c, foreign.c and valgrind.c are leaves everyone may call.
 *   scavenge.c, stats.c and fork.c sit on top and reach into several layers; export.c
 *   (the C library's malloc family) is built on the public API and fork.c's registration
 *   of the fork handlers, which it makes the process's first.
 * - libscalloc.a is for linking into executables: its TLS is local-exec, one
 *   segment-relative access.  libscalloc.so (SC_SHARED, built -fPIC) is loaded with the
 *   program (LD_PRELOAD or DT_NEEDED), so its TLS is initial-exec: a static offset read
 *   from the GOT, one instruction more, and no __tls_get_addr call (which global-dynamic
 *   would make, and which may itself call malloc).
 * - In ASan builds (SAN=1) a free object and every byte of a span not handed out is
 *   poisoned, so that ASan reports any access to them; the allocator's own reads and
 *   writes of a free object's link word open it for that access (sc_link_load,
 *   sc_link_store), and a quarantine (quarantine.c) delays reuse.  Other builds compile
 *   none of it.
 * - Every word one thread writes while another may read it is accessed with explicit
 *   atomics (relaxed where nothing else hangs on the value, acquire/release where it
 *   hands memory over), so the code says what it means and ThreadSanitizer can check it.
 *   Counters are written by one thread at a time (a span's owner, or whoever holds its
 *   central lock) and read by anyone.  On x86-64 the fast paths count with one add to
 *   memory and test shared words with one compare against memory, in inline assembly
 *   (the compiler does not fold relaxed atomics into other instructions); under
 *   ThreadSanitizer, which cannot see inside assembly, they are the C11 builtins. */
#ifndef SC_INTERNAL_H
#define SC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "scalloc.h"
#include "sc_sizeclasses.h"

#if defined(__SANITIZE_THREAD__)
#define SC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SC_TSAN 1
#endif
#endif
#ifndef SC_TSAN
#define SC_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SC_ASAN 1
#endif
#endif
#ifndef SC_ASAN
#define SC_ASAN 0
#endif
#if SC_ASAN
#include <sanitizer/asan_interface.h>
#define sc_asan_poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define sc_asan_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define sc_asan_poison(p, n) ((void)(p), (void)(n))
#define sc_asan_unpoison(p, n) ((void)(p), (void)(n))
#endif

/* The single-instruction forms of the fast paths' shared accesses (see above). */
#if defined(__x86_64__) && !SC_TSAN
#define SC_ASM_ATOMICS 1
#else
#define SC_ASM_ATOMICS 0
#endif

#define SC_LIKELY(x) __builtin_expect(!!(x), 1)
#define SC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SC_HIDDEN __attribute__((visibility("hidden")))
#if defined(SC_SHARED) && SC_SHARED
#define SC_TLS __attribute__((tls_model("initial-exec")))
#else
#define SC_TLS __attribute__((tls_model("local-exec")))
#endif

/* A span class is a size class and whether the span holds coroutine stacks; heap span
 * classes equal their size class, so the malloc path indexes with the class itself. */
#define SC_NSPANCLASS (SC_NCLASS * 2)
#define SC_SPANCLASS(cls, stack) ((unsigned)(cls) + ((stack) ? SC_NCLASS : 0u))
#define SC_SPANCLASS_CLASS(sc) ((sc) % SC_NCLASS)
#define SC_SPANCLASS_STACK(sc) ((sc) >= SC_NCLASS)

#define SC_TF_ABANDONED ((uintptr_t)1)

enum sc_span_state { SC_SPAN_FREE, SC_SPAN_SMALL, SC_SPAN_LARGE };

typedef struct sc_span sc_span;
struct sc_span {
    /* What the fast paths read comes first. */
    void *free;
    uintptr_t end;
    _Atomic uintptr_t owner;
    uintptr_t base;
    uint32_t divmul;           /* floor(2^32 / elemsize) + 1 */
    uint32_t mul_limit;        /* (uint32)(off*divmul) < mul_limit <=> off starts a handed-out object;
                                  raised by the owner, read by remote frees (atomics) */
    uint32_t base_mul;         /* (uint32)base * divmul: off*divmul = p*divmul - base_mul (mod 2^32) */
    uint32_t excess;           /* elemsize * divmul - 2^32 */
    uintptr_t limit;           /* nelems * elemsize */
    union {
        struct { uint64_t nalloc, nfreed; };   /* objects handed out and taken back, all time */
        /* A FREE run's own words (no run has objects): how many of its pages are dirty, and
         * the tick in which the oldest of them was freed (pageheap.c).  Zero again, as nalloc
         * and nfreed, once the run is a span. */
        struct sc_idle { uint64_t since; uint64_t dirty; } idle;
    };
    uint32_t npages;
    uint8_t spanclass;
    uint8_t state;
    uint8_t stack;
    uint8_t in_full;           /* central: on the full list rather than the partial one */
    /* Cold (the struct is 120 bytes, a cost per span and so per object: keep it so). */
    uintptr_t bump;            /* objects from here to end were never handed out */
    _Atomic uintptr_t thread_free;
    sc_span *next, *prev;
    uint32_t elemsize;
    bool needzero;             /* the pages may hold data (else never-used objects are zero) */
    uint8_t cached;            /* a freed large object kept in a thread's cache */
};

/* Freed objects above 32 KiB that a thread keeps for its next allocation of the same
 * page count, so that an object freed and allocated again in a loop - a connection's
 * output buffer for a large body - skips the page heap's lock. */
#define SC_LARGE_CACHE 4
#define SC_LARGE_CACHE_PAGES 32    /* objects of up to 256 KiB */

struct sc_large_counts {
    uint64_t mallocs, frees, alloc_bytes, free_bytes;   /* served by the thread's cache */
};

typedef struct sc_cache sc_cache;
struct sc_cache {
    sc_span *cur[SC_NSPANCLASS];
    /* Frees this thread pushed onto other threads' spans, by span class. */
    uint64_t nremote[SC_NSPANCLASS];
    sc_span *others[SC_NSPANCLASS];   /* owned, not current; circular, head first */
    uint32_t nothers[SC_NSPANCLASS];  /* spans in others[] */
    /* Empty one-page spans, by class, for the next span of any class of one page (cache.c);
     * a bit per class whose list is not empty. */
    sc_span *pool[SC_NCLASS];
    uint64_t pool_bits[2];
    size_t pool_pages;
    unsigned last_refill;             /* the span class of the last refill */
    unsigned carve;                   /* spans to carve at once for it from the pool */
    sc_span *large[SC_LARGE_CACHE];   /* cached large spans, oldest first */
    unsigned nlarge;
    struct sc_large_counts large_counts;
    sc_cache *reg_next, *reg_prev;
    unsigned trim_epoch;
    size_t owned_pages;               /* in the spans above (cur and others) */
    size_t fresh_pages;               /* taken from the page heap since the last trim or clock check */
    uint64_t trim_tick;               /* the page-heap tick of the last such trim */
    uint8_t state;                    /* enum sc_cache_state */
};

/* A cache is UNUSED until its thread first needs it, LIVE (registered: summed by the
 * statistics, torn down by the thread-exit handler) until the handler runs, then GONE:
 * what the thread still allocates or frees after that (later key destructors, glibc's
 * own clean-up) goes around the cache, since nothing would tear it down again and the
 * thread-local memory will be a new thread's. */
enum sc_cache_state { SC_CACHE_UNUSED, SC_CACHE_LIVE, SC_CACHE_GONE };

struct sc_heap {
    /* Read without the lock by the free fast path; fixed once initialised. */
    uintptr_t base;
    size_t fast_npages;        /* pages grown so far; 0 under valgrind (every free goes the slow way) */
    sc_span **pagemap;
    uintptr_t key;
    /* Everything below is under lock. */
    size_t reserved_pages;
    size_t grown_pages;
    uint64_t *dirty;           /* 1 bit per page: may be resident and hold data */
    pthread_mutex_t lock;
    sc_span *free_runs[129];   /* [n] runs of n pages, [0] runs above 128 pages */
    uint64_t runs_nonempty[3]; /* bit n: free_runs[n] is not empty */
    sc_span *spare_spans;      /* recycled span structs */
    size_t inuse_pages, stack_pages, idle_pages, released_pages;
    uint64_t tick;             /* the purge tick (pageheap.c) of the last free */
    /* The retained goal (pageheap.c): the peak of the pages in use in this window of half
     * the decay period and in the one before, and when this one began. */
    size_t peak_now, peak_before;
    uint64_t window_start;
    bool releasing;            /* above the goal, and not yet back down to the peak */
    size_t short_dirty_pages;  /* dirty pages in free runs too short to release by pace */
    struct sc_conf { int decay_ms; unsigned retain_pct; } conf;   /* conf.c, sc_set_decay_ms */
    uint64_t release_calls;    /* madvise calls that returned idle pages */
    size_t large_alloc_bytes;
    uint64_t large_mallocs, large_frees;
    uint64_t gone_nalloc[SC_NSPANCLASS], gone_nfreed[SC_NSPANCLASS];   /* of freed spans */
    bool valgrind;
};

extern struct sc_heap sc_heap SC_HIDDEN;
extern sc_span sc_empty_span SC_HIDDEN;
extern __thread sc_cache sc_tls SC_HIDDEN SC_TLS;
/* Remote frees collected by owners, by span class (one add per collected list). */
extern _Atomic uint64_t sc_remote_collected[SC_NSPANCLASS] SC_HIDDEN;

/* The thread pointer: unique among live threads, and one instruction to read. */
static inline uintptr_t sc_thread_id(void)
{
#if defined(__x86_64__)
    uintptr_t tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    return tp;
#elif defined(__aarch64__)
    return (uintptr_t)__builtin_thread_pointer();
#else
    return (uintptr_t)&sc_tls;
#endif
}

static inline void sc_count_n(uint64_t *ctr, uint64_t n)
{
#if SC_ASM_ATOMICS
    /* One instruction, so a concurrent relaxed reader sees the old or the new value. */
    __asm__("addq %1, %0" : "+m"(*ctr) : "ir"(n));
#else
    __atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
#endif
}

static inline void sc_count(uint64_t *ctr) { sc_count_n(ctr, 1); }

static inline uint64_t sc_span_live(const sc_span *s)
{
    return __atomic_load_n(&s->nalloc, __ATOMIC_RELAXED) - __atomic_load_n(&s->nfreed, __ATOMIC_RELAXED);
}

/* The free fast path's two tests on shared words, each a compare with a memory operand
 * (the compiler does not fold relaxed atomic loads into one).  A page below fast_npages
 * has a span in the page map (a real one or the FREE sentinel); a span's owner equals
 * this thread's id only if this thread set it. */
static inline bool sc_page_is_fast(size_t page)
{
#if SC_ASM_ATOMICS
    bool below;
    __asm__("cmpq %2, %1" : "=@ccb"(below) : "r"(page), "m"(sc_heap.fast_npages));
    return below;
#else
    return page < __atomic_load_n(&sc_heap.fast_npages, __ATOMIC_RELAXED);
#endif
}

static inline bool sc_owned_here(const sc_span *s)
{
#if SC_ASM_ATOMICS
    bool mine;
    __asm__("cmpq %2, %1" : "=@cce"(mine) : "r"(sc_thread_id()), "m"(s->owner));
    return mine;
#else
    return atomic_load_explicit(&s->owner, memory_order_relaxed) == sc_thread_id();
#endif
}

/* NULL outside the grown heap; inside it never NULL (pages in no span map to a FREE
 * span nobody owns). */
static inline sc_span *sc_span_of(const void *p)
{
    size_t idx = ((uintptr_t)p - sc_heap.base) >> SC_PAGE_SHIFT;
    if (SC_UNLIKELY(idx >= __atomic_load_n(&sc_heap.fast_npages, __ATOMIC_RELAXED)))
        return NULL;
    return sc_heap.pagemap[idx];
}

static inline bool sc_starts_object_below(const sc_span *s, const void *p, uint32_t mul_limit)
{
    return (uint32_t)((uint32_t)(uintptr_t)p * s->divmul - s->base_mul) < mul_limit;
}

/* For the owner, which alone raises mul_limit (a compare against memory). */
static inline bool sc_span_is_object_start(const sc_span *s, const void *p)
{
    return sc_starts_object_below(s, p, s->mul_limit);
}

static inline void *sc_link_decode(const sc_span *s, uintptr_t word)
{
    (void)s;
    return (void *)(word ^ sc_heap.key);
}

static inline uintptr_t sc_link_encode(const void *next) { return (uintptr_t)next ^ sc_heap.key; }

/* The first word of an object being freed or free: the link.  Under ASan such an object is
 * poisoned, and the allocator opens the word for its own access only. */
static inline uintptr_t sc_link_load(const void *p)
{
    sc_asan_unpoison(p, sizeof(uintptr_t));
    uintptr_t word = *(const uintptr_t *)p;
    sc_asan_poison(p, sizeof(uintptr_t));
    return word;
}

static inline void sc_link_store(void *p, uintptr_t word)
{
    sc_asan_unpoison(p, sizeof(uintptr_t));
    *(uintptr_t *)p = word;
    sc_asan_poison(p, sizeof(uintptr_t));
}

/* A free object's first word decodes to a link inside its own span (or to its end). */
static inline bool sc_looks_freed(const sc_span *s, const void *p)
{
    uintptr_t next = sc_link_load(p) ^ sc_heap.key;
    return next - s->base <= s->limit;
}

/* The owner's free: p goes on top of the list malloc pops. */
static inline __attribute__((always_inline)) void sc_span_push(sc_span *s, void *p)
{
    sc_link_store(p, sc_link_encode(s->free));
    s->free = p;
    sc_count(&s->nfreed);
}

static inline __attribute__((always_inline)) void *sc_span_pop(sc_span *s)
{
    void **p = s->free;
    sc_asan_unpoison(p, s->elemsize);
    s->free = sc_link_decode(s, *(uintptr_t *)p);
    /* Else a live object nobody wrote to would look freed, and its free go the slow way. */
    *(uintptr_t *)p = 0;
    sc_count(&s->nalloc);
    return p;
}

/* pageheap.c */
void sc_heap_init(void) SC_HIDDEN;
sc_span *sc_heap_alloc(size_t npages, size_t align, unsigned spanclass, bool zero) SC_HIDDEN;
void sc_heap_free(sc_span *s) SC_HIDDEN;
bool sc_heap_resize(sc_span *s, size_t npages) SC_HIDDEN;
uint64_t sc_heap_tick_now(void) SC_HIDDEN;
sc_span *sc_span_lookup(const void *p) SC_HIDDEN;
void sc_heap_sum_counts(uint64_t nalloc[SC_NSPANCLASS], uint64_t nfreed[SC_NSPANCLASS]) SC_HIDDEN;
void sc_heap_retire_counts(sc_span *chain) SC_HIDDEN;
void sc_heap_release_free(void) SC_HIDDEN;
/* span.c */
void sc_span_init_small(sc_span *s) SC_HIDDEN;
void *sc_span_bump(sc_span *s) SC_HIDDEN;
size_t sc_list_length(const sc_span *s, void *head) SC_HIDDEN;
bool sc_list_contains(const sc_span *s, void *head, const void *p) SC_HIDDEN;
void *sc_list_concat(const sc_span *s, void *a, void *b) SC_HIDDEN;
void sc_span_collect_remote(sc_span *s) SC_HIDDEN;
void sc_remote_collected_add(unsigned spanclass, size_t n) SC_HIDDEN;
/* central.c */
void sc_central_abandon(sc_span *s) SC_HIDDEN;
sc_span *sc_central_adopt(unsigned spanclass) SC_HIDDEN;
bool sc_central_free(sc_span *s, void *p) SC_HIDDEN;
/* cache.c */
void *sc_cache_refill(size_t spanclass, bool *zeroed) SC_HIDDEN __attribute__((cold));
void sc_cache_trim(sc_cache *c) SC_HIDDEN;
bool sc_cache_use(sc_cache *c) SC_HIDDEN;
void sc_cache_count_gone(unsigned spanclass) SC_HIDDEN;
void sc_cache_sum(uint64_t nremote[SC_NSPANCLASS], struct sc_large_counts *large) SC_HIDDEN;
void *sc_cache_large_get(size_t npages) SC_HIDDEN;
bool sc_cache_large_put(sc_span *s) SC_HIDDEN;
void sc_trim_all_caches(void) SC_HIDDEN;
/* malloc.c */
void sc_free_slow(void *p, sc_span *s) SC_HIDDEN;
sc_span *sc_check_free(void *p, sc_span *s) SC_HIDDEN;
void sc_free_now(void *p) SC_HIDDEN;                     /* ASan builds: sc_free is quarantine.c's */
/* quarantine.c (ASan builds) */
void sc_quarantine_drain(void) SC_HIDDEN;
void sc_quarantine_counts(uint64_t held[SC_NSPANCLASS], struct sc_large_counts *large) SC_HIDDEN;
/* fork.c, and the locks it takes */
void sc_fork_install(void) SC_HIDDEN;
void sc_stats_lock(void) SC_HIDDEN;
void sc_stats_unlock(void) SC_HIDDEN;
void sc_registry_lock(void) SC_HIDDEN;
void sc_registry_unlock(void) SC_HIDDEN;
void sc_central_lock_all(void) SC_HIDDEN;
void sc_central_unlock_all(void) SC_HIDDEN;
void sc_heap_lock(void) SC_HIDDEN;
void sc_heap_unlock(void) SC_HIDDEN;
void sc_cache_forget_other_threads(void) SC_HIDDEN;
/* valgrind.c */
bool sc_running_on_valgrind(void) SC_HIDDEN;
void sc_vg_malloclike(void *p, size_t n, bool zeroed) SC_HIDDEN;
void sc_vg_freelike(void *p) SC_HIDDEN;
void sc_vg_noaccess(void *p, size_t n) SC_HIDDEN;
void sc_vg_defined(void *p, size_t n) SC_HIDDEN;
/* foreign.c: false (0) unless the drop-in passed p to the allocator that owns it */
bool sc_foreign_free(void *p) SC_HIDDEN;
size_t sc_foreign_usable(void *p) SC_HIDDEN;
/* conf.c: SCALLOC_CONF over the defaults in conf */
void sc_conf_read(struct sc_conf *conf) SC_HIDDEN;
void sc_conf_parse(const char *value, struct sc_conf *conf) SC_HIDDEN;   /* NULL: nothing */
/* fatal.c */
__attribute__((noreturn, format(printf, 1, 2))) void sc_fatal(const char *fmt, ...) SC_HIDDEN;

#endif
