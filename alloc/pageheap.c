/* The page heap (Go's mheap): hands out runs of 8 KiB pages and takes them back.
 *
 * One large region of address space is reserved at start (MAP_NORESERVE, so it costs
 * nothing until touched) and taken into use in 2 MiB steps; a single reservation lets
 * the page map be one flat array indexed by page number, which keeps sc_free's lookup to
 * a subtraction, a shift and a load.  Free runs are kept in lists by length (exact up to
 * 128 pages, one list above) and coalesce with their neighbours on free; the page map
 * entries of a run's first and last page are its boundary tags.
 *
 * A bit per page says whether the page may be resident and hold data ("dirty").  Pages
 * fresh from the kernel and pages released with MADV_DONTNEED read as zero, so a zeroed
 * allocation only clears its dirty pages and leaves the rest untouched.  MADV_DONTNEED is
 * used rather than MADV_FREE because RSS drops at once (what operators and the load
 * tests read) and the pages are then known to be zero; MADV_FREE leaves RSS high until
 * the kernel is under pressure and makes the contents undefined, so every reuse would
 * have to clear them again.
 *
 * Idle pages also go back by themselves, paced by a goal rather than by each free (Go's
 * scavenger, runtime/mgcscavenge.go, keeps the heap's retained memory near a goal derived
 * from its recent use; jemalloc decays dirty pages over dirty_decay_ms, mimalloc purges
 * after purge_delay).  The goal is
 *     goal = peak + peak * retain_pct / 100 + 1 MiB
 * where peak is the most pages the heap had in use (spans and stacks) in the last decay
 * period: the larger of two windows' peaks, this window's and the last one's, each half the
 * decay period long.  While the program's use stays near its recent peak nothing goes back,
 * however often it frees and takes memory again - so a program that frees a large buffer
 * and takes it again moments later (git's delta windows, zlib's buffers) pays no madvise and
 * no fresh page faults for it; once its use has stayed lower for a decay period, the peak
 * follows it down and what lies above the goal goes back.  That is the hysteresis: memory
 * the program wants again costs a system call and a fault per page when returned, and only
 * RSS the program itself had in use a moment ago when kept.
 *
 * Two more rules keep the number of madvise calls down, since each returns one run: the
 * calls, not the pages, are what a program that frees and takes memory in phases pays for.
 * Long runs (RELEASE_MIN_RUN pages, 1 MiB, or more) count against the goal: once the heap
 * retains more than the goal in use and in long runs' dirty pages, long runs go back,
 * largest first, until it is down to its peak and 1 MiB (a band, so that the heap does not
 * release a run at every tick while it hovers at the goal).  Short runs - the gaps between
 * live spans of a heap in use - go back above the goal only once they have idled
 * SHORT_IDLE_DECAYS decay periods (checked once a window), or at any age once everything the
 * heap holds exceeds twice the goal, in both cases down to the goal: a gap freed and filled
 * again within seconds stays, one the program has left for good goes back once.
 * Measured on git gc --aggressive over redis's history to 3.0.0, one pack thread (strace's
 * madvise count, page faults and peak RSS; glibc 0, 111,000 and 464 MiB; before this goal
 * 15,216, 350,000, 364 MiB): short runs only at twice the goal, 440, 112,000, 467 MiB; idle
 * 8 periods, 1,411, 142,000, 458 MiB; idle 2 periods (these), 3,727, 195,000, 398 MiB.  With
 * every run counted against the goal and released down to it, 1,585-1,961 calls with two
 * pack threads; long runs from 512 KiB, 658; from 1 MiB, 119.
 *
 * There is no thread of the allocator's own (the drop-in runs inside arbitrary programs:
 * a thread would have to be stopped and restarted around fork, would wake idle programs and
 * shows in their thread lists); the pacing rides on slow paths that already take the lock.
 * Time is cut into 1 ms ticks read from CLOCK_MONOTONIC_COARSE (a read of the vDSO's page,
 * 6 ns, taken before the lock), and the first sc_heap_free or sc_heap_resize of a new tick -
 * frees are what make pages idle, so allocations read no clock - moves the windows on and
 * releases what the goal says, of runs whose pages have idled two ticks or more, at most
 * RELEASE_PACE pages a tick so that no one free stalls for long.  A program that stops
 * calling free keeps what it freed last until it frees again (or calls sc_scavenge).
 * SCALLOC_CONF sets decay_ms and retain_pct (conf.c); decay_ms:-1 releases nothing unasked.
 *
 * Each run knows how many of its pages are dirty and since when.  The count is exact:
 * every page of a span is dirty (taking a page marks it), so a freed span adds all its
 * pages, a release clears the count, and a run split by an allocation keeps what the pages
 * taken did not have.  A run's age is its oldest dirty page's, so that pages freed every tick
 * next to old ones cannot keep those young; a run due for release (old enough, and the heap
 * above its goal) is released before a freed span merges into it, so a fresh free keeps its
 * own age.  A clean run has no age.
 *
 * Measured before this goal (runs released two ticks after their free, beyond max(1 MiB,
 * 1/64 of the pages in use)): git gc --aggressive over redis's history to 3.0.0 made 16,527
 * madvise calls and 355,000 page faults against glibc's 6 and 152,000; docs/allocator.md has
 * the figures with the goal.
 *
 * The walk over the free runs happens at most once a tick, over the long runs only unless
 * the heap holds twice its goal or a new window starts, and stops once it is back under its goal; runs alternate
 * with spans, so there are never more of them than spans.
 * Ticks are 64-bit counts of the monotonic clock, so they never wrap. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Small steps: taking pages into use writes their page map entries (8 bytes per page), and
 * those are resident from then on - 64 KiB for a 64 MiB step, a tenth of the RSS of a
 * small program (bench_workloads glibc-simple peaks at 5.5 MiB). */
#define GROW_PAGES ((size_t)(2u << 20) >> SC_PAGE_SHIFT)
#define EXACT_RUNS 128
#define MAX_ARENA ((size_t)64 << 30)
#define MIN_ARENA ((size_t)1 << 30)
#define VALGRIND_ARENA ((size_t)4 << 30)
#define META_CHUNK (64u << 10)
#define PURGE_TICK_NS 1000000u
#define RETAIN_MIN_PAGES 128u   /* 1 MiB above the peak, however small */
#define PURGE_IDLE_TICKS 2u     /* freed in tick t, released from t + 2 */
#define RELEASE_PACE 2048u      /* pages a tick: 16 MiB, a few ms of madvise at most */
#define RELEASE_MIN_RUN 128u    /* long runs: 1 MiB or more */
#define SHORT_IDLE_DECAYS 2u    /* short runs idle this many decay periods go back above the goal */
#define DECAY_MS_DEFAULT 1000
#define RETAIN_PCT_DEFAULT 10

struct sc_heap sc_heap = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .conf = { .decay_ms = DECAY_MS_DEFAULT, .retain_pct = RETAIN_PCT_DEFAULT },
};
/* What the page map says for a page in no span: owned by nobody and FREE, so the free
 * fast path needs no NULL test and the slow path reports an invalid free. */
static sc_span nowhere = { .state = SC_SPAN_FREE };
#define NOWHERE (&nowhere)
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static char *meta_next, *meta_end;

static void *map_or_die(size_t bytes, const char *what)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        sc_fatal("cannot map %zu bytes for the %s: %s", bytes, what, strerror(errno));
    return p;
}

static void heap_init_once(void)
{
    sc_heap.valgrind = sc_running_on_valgrind();
    size_t want = sc_heap.valgrind ? VALGRIND_ARENA : MAX_ARENA;
    void *region = MAP_FAILED;
    for (; want >= MIN_ARENA; want /= 2) {
        region = mmap(NULL, want + SC_PAGE_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (region != MAP_FAILED)
            break;
    }
    if (region == MAP_FAILED)
        sc_fatal("cannot reserve address space for the heap: %s", strerror(errno));
    uintptr_t base = ((uintptr_t)region + SC_PAGE_SIZE - 1) & ~(uintptr_t)(SC_PAGE_SIZE - 1);
    sc_heap.reserved_pages = want >> SC_PAGE_SHIFT;
    sc_heap.pagemap = map_or_die(sc_heap.reserved_pages * sizeof(sc_span *), "page map");
    sc_heap.dirty = map_or_die(sc_heap.reserved_pages / 8 + 8, "page bitmap");

    uintptr_t key = 0;
    if (getrandom(&key, sizeof key, GRND_NONBLOCK) != sizeof key) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        key = (uintptr_t)ts.tv_nsec * 0x9E3779B97F4A7C15u ^ (uintptr_t)&key;
    }
    sc_heap.key = key | 1;     /* never 0, so an all-zero word never decodes to a link */
    sc_heap.base = base;
    sc_heap.fast_npages = 0;       /* grows with the heap (grow) */
    sc_conf_read(&sc_heap.conf);
    sc_heap.tick = sc_heap.window_start = sc_heap_tick_now();
}

void sc_heap_init(void) { pthread_once(&heap_once, heap_init_once); }

/* Span structs live in their own mapped chunks, recycled through a list. */
static sc_span *span_new(void)
{
    sc_span *s = sc_heap.spare_spans;
    if (s) {
        sc_heap.spare_spans = s->next;
    } else {
        if (!meta_next || (size_t)(meta_end - meta_next) < sizeof *s) {   /* no arithmetic on NULL */
            meta_next = map_or_die(META_CHUNK, "span metadata");
            meta_end = meta_next + META_CHUNK;
        }
        s = (sc_span *)meta_next;
        meta_next += sizeof *s;
    }
    memset(s, 0, sizeof *s);
    return s;
}

static void span_recycle(sc_span *s)
{
    s->state = SC_SPAN_FREE;
    s->npages = 0;
    s->next = sc_heap.spare_spans;
    sc_heap.spare_spans = s;
}

static size_t page_index(uintptr_t addr) { return (addr - sc_heap.base) >> SC_PAGE_SHIFT; }
static bool page_dirty(size_t i) { return sc_heap.dirty[i / 64] >> (i % 64) & 1; }

static size_t count_dirty(size_t first, size_t n)
{
    size_t dirty = 0;
    for (size_t i = first; i < first + n; i++)
        dirty += page_dirty(i);
    return dirty;
}

uint64_t sc_heap_tick_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) / PURGE_TICK_NS;
}

static size_t pages_used(void) { return sc_heap.inuse_pages + sc_heap.stack_pages; }

/* Every change of the pages in use upward passes here, under the lock. */
static void note_peak(void)
{
    if (pages_used() > sc_heap.peak_now)
        sc_heap.peak_now = pages_used();
}

/* Short runs' dirty pages are left out of the goal (see above): counted as they join and
 * leave the lists, and as they are released. */
static bool run_short(const sc_span *s) { return s->npages < RELEASE_MIN_RUN; }

static bool run_old_enough(const sc_span *r, uint64_t now)
{
    return r->idle.dirty && now - r->idle.since >= PURGE_IDLE_TICKS;
}

static bool run_due(const sc_span *r, uint64_t now)
{
    return sc_heap.releasing && sc_heap.conf.decay_ms >= 0 && !run_short(r) && run_old_enough(r, now);
}

/* The idle record of two runs joined: clean pages have no age. */
static struct sc_idle idle_join(struct sc_idle a, struct sc_idle b)
{
    if (!a.dirty)
        return b;
    if (!b.dirty)
        return a;
    a.since = b.since < a.since ? b.since : a.since;
    a.dirty += b.dirty;
    return a;
}

static void release_dirty_pages(sc_span *s)
{
    size_t first = page_index(s->base), end = first + s->npages;
    for (size_t i = first; i < end && s->idle.dirty;) {
        if (i % 64 == 0 && !sc_heap.dirty[i / 64]) {   /* a long clean run is mostly zero words */
            i += 64;
            continue;
        }
        if (!page_dirty(i)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < end && page_dirty(j)) {
            sc_heap.dirty[j / 64] &= ~((uint64_t)1 << (j % 64));
            j++;
        }
        madvise((void *)(sc_heap.base + (i << SC_PAGE_SHIFT)), (j - i) << SC_PAGE_SHIFT, MADV_DONTNEED);
        sc_heap.release_calls++;
        sc_heap.released_pages += j - i;
        if (run_short(s))
            sc_heap.short_dirty_pages -= j - i;
        s->idle.dirty -= j - i;
        i = j;
    }
}

static size_t run_list(size_t npages) { return npages <= EXACT_RUNS ? npages : 0; }

static void run_link(sc_span *s)
{
    size_t list = run_list(s->npages);
    if (run_short(s))
        sc_heap.short_dirty_pages += s->idle.dirty;
    sc_span **head = &sc_heap.free_runs[list];
    sc_heap.runs_nonempty[list / 64] |= (uint64_t)1 << (list % 64);
    s->prev = NULL;
    s->next = *head;
    if (*head)
        (*head)->prev = s;
    *head = s;
    size_t first = page_index(s->base);
    sc_heap.pagemap[first] = s;
    sc_heap.pagemap[first + s->npages - 1] = s;
}

static void run_unlink(sc_span *s)
{
    size_t list = run_list(s->npages);
    if (run_short(s))
        sc_heap.short_dirty_pages -= s->idle.dirty;
    if (s->prev)
        s->prev->next = s->next;
    else if (!(sc_heap.free_runs[list] = s->next))
        sc_heap.runs_nonempty[list / 64] &= ~((uint64_t)1 << (list % 64));
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

static void set_pagemap(size_t first, size_t n, sc_span *s)
{
    for (size_t i = 0; i < n; i++)
        sc_heap.pagemap[first + i] = s;
}

static sc_span *find_run(size_t npages)
{
    /* The shortest non-empty exact list that fits, found in the bitmap. */
    for (size_t n = npages; n <= EXACT_RUNS; n = (n | 63) + 1) {
        uint64_t bits = sc_heap.runs_nonempty[n / 64] & (~(uint64_t)0 << (n % 64));
        if (n / 64 == EXACT_RUNS / 64)
            bits &= ((uint64_t)2 << (EXACT_RUNS % 64)) - 1;
        if (bits)
            return sc_heap.free_runs[(n & ~(size_t)63) + (size_t)__builtin_ctzll(bits)];
    }
    sc_span *best = NULL;
    for (sc_span *s = sc_heap.free_runs[0]; s; s = s->next)
        if (s->npages >= npages && (!best || s->npages < best->npages || (s->npages == best->npages && s->base < best->base)))
            best = s;
    return best;
}

/* Adds a free run for pages [first, first+n), whose dirty pages idle describes, merging it
 * with free neighbours. */
static void insert_free_run(size_t first, size_t n, sc_span *s, struct sc_idle idle)
{
    if (first > 0) {
        sc_span *left = sc_heap.pagemap[first - 1];
        if (left && left != NOWHERE && left->state == SC_SPAN_FREE) {
            if (run_due(left, sc_heap.tick))
                release_dirty_pages(left);
            idle = idle_join(left->idle, idle);
            run_unlink(left);
            sc_heap.pagemap[first - 1] = NOWHERE;
            first = page_index(left->base);
            n += left->npages;
            span_recycle(left);
        }
    }
    if (first + n < sc_heap.grown_pages) {
        sc_span *right = sc_heap.pagemap[first + n];
        if (right && right != NOWHERE && right->state == SC_SPAN_FREE) {
            if (run_due(right, sc_heap.tick))
                release_dirty_pages(right);
            idle = idle_join(idle, right->idle);
            run_unlink(right);
            sc_heap.pagemap[first + n] = NOWHERE;
            n += right->npages;
            sc_heap.pagemap[first + n - 1] = NOWHERE;
            span_recycle(right);
        }
    }
    if (!s)
        s = span_new();
    s->state = SC_SPAN_FREE;
    s->base = sc_heap.base + (first << SC_PAGE_SHIFT);
    s->npages = (uint32_t)n;
    s->idle = idle;
    run_link(s);
}

/* Releases runs of lists hi down to lo (0: the runs above EXACT_RUNS pages, the longest,
 * first) that have idled long enough, until *excess pages went back or *budget is spent. */
static void release_runs(uint64_t now, uint64_t min_age, size_t hi, size_t lo, size_t *excess, size_t *budget)
{
    for (size_t b = hi; b >= lo && *excess && *budget; b = b ? b - 1 : EXACT_RUNS) {
        for (sc_span *r = sc_heap.free_runs[b]; r && *excess && *budget; r = r->next) {
            if (!run_old_enough(r, now) || now - r->idle.since < min_age)
                continue;
            size_t before = sc_heap.released_pages;
            release_dirty_pages(r);
            size_t n = sc_heap.released_pages - before;
            *excess = n < *excess ? *excess - n : 0;
            *budget = n < *budget ? *budget - n : 0;
        }
        if (b == lo)
            break;
    }
}

/* The first free of a tick moves the windows of the peak on and releases what the goal says
 * (see above), at most RELEASE_PACE pages. */
static void heap_tick(uint64_t now)
{
    if (now <= sc_heap.tick)      /* read before the lock: maybe behind another's */
        return;
    sc_heap.tick = now;
    if (sc_heap.conf.decay_ms < 0)
        return;
    bool new_window = now - sc_heap.window_start >= (uint64_t)sc_heap.conf.decay_ms / 2;
    if (new_window) {
        sc_heap.peak_before = sc_heap.peak_now;
        sc_heap.peak_now = pages_used();
        sc_heap.window_start = now;
    }
    size_t peak = sc_heap.peak_now > sc_heap.peak_before ? sc_heap.peak_now : sc_heap.peak_before;
    size_t low = peak + RETAIN_MIN_PAGES, goal = low + peak * sc_heap.conf.retain_pct / 100;
    size_t dirty = sc_heap.idle_pages - sc_heap.released_pages, used = pages_used(), budget = RELEASE_PACE;
    size_t retained = used + dirty - sc_heap.short_dirty_pages;       /* in long runs */
    if (sc_heap.releasing || retained > goal) {
        size_t excess = retained > low ? retained - low : 0;
        release_runs(now, 0, 0, RELEASE_MIN_RUN, &excess, &budget);
        sc_heap.releasing = excess > 0;
    }
    retained = used + sc_heap.idle_pages - sc_heap.released_pages;   /* in all runs */
    size_t excess = retained > goal ? retained - goal : 0;
    if (retained > 2 * goal)
        release_runs(now, 0, RELEASE_MIN_RUN - 1, 1, &excess, &budget);
    else if (excess && new_window)
        release_runs(now, SHORT_IDLE_DECAYS * (uint64_t)sc_heap.conf.decay_ms, RELEASE_MIN_RUN - 1, 1, &excess, &budget);
}

/* A freed span's pages: all dirty, since this tick. */
static struct sc_idle idle_fresh(size_t n)
{
    return (struct sc_idle){ .since = sc_heap.tick, .dirty = n };
}

static bool grow(size_t npages)
{
    size_t n = (npages + GROW_PAGES - 1) / GROW_PAGES * GROW_PAGES;
    if (n > sc_heap.reserved_pages - sc_heap.grown_pages) {
        n = npages;
        if (n > sc_heap.reserved_pages - sc_heap.grown_pages)
            return false;
    }
    size_t first = sc_heap.grown_pages;
    set_pagemap(first, n, NOWHERE);
    sc_heap.grown_pages += n;
    if (!sc_heap.valgrind)
        __atomic_store_n(&sc_heap.fast_npages, sc_heap.grown_pages, __ATOMIC_RELEASE);
    sc_heap.idle_pages += n;
    sc_heap.released_pages += n;
    insert_free_run(first, n, NULL, (struct sc_idle){ 0 });
    return true;
}

/* A span of npages for spanclass (class 0: one large object) whose address is a multiple
 * of align (a power of two; SC_PAGE_SIZE or less: any page), its pages zeroed if zero.
 * For a larger alignment it takes a run with room to spare and gives back the pages
 * before and after the aligned part, so the span starts at its object like any other.
 * The span class is set here, under the lock that sc_heap_sum_counts walks under. */
sc_span *sc_heap_alloc(size_t npages, size_t align, unsigned spanclass, bool zero)
{
    bool stack = SC_SPANCLASS_STACK(spanclass), large = SC_SPANCLASS_CLASS(spanclass) == 0;
    size_t spare = align > SC_PAGE_SIZE ? (align >> SC_PAGE_SHIFT) - 1 : 0;
    sc_heap_init();
    pthread_mutex_lock(&sc_heap.lock);
    sc_span *s = find_run(npages + spare);
    if (!s && grow(npages + spare))
        s = find_run(npages + spare);
    if (!s) {
        pthread_mutex_unlock(&sc_heap.lock);
        return NULL;
    }
    run_unlink(s);
    struct sc_idle idle = s->idle;
    s->nalloc = s->nfreed = 0;
    s->state = large ? SC_SPAN_LARGE : SC_SPAN_SMALL;
    s->spanclass = (uint8_t)spanclass;
    s->stack = stack;
    size_t first = page_index(s->base);
    size_t head = spare ? (((s->base + align - 1) & ~(uintptr_t)(align - 1)) - s->base) >> SC_PAGE_SHIFT : 0;
    if (head) {
        /* Its right neighbour is s, no longer FREE: the head run merges only leftward. */
        struct sc_idle h = idle;
        h.dirty = count_dirty(first, head);
        idle.dirty -= h.dirty;
        insert_free_run(first, head, NULL, h);
        first += head;
        s->base += head << SC_PAGE_SHIFT;
        s->npages -= (uint32_t)head;
    }
    if (SC_UNLIKELY(sc_heap.valgrind))     /* pages of freed blocks are no-access to memcheck */
        sc_vg_defined((void *)s->base, npages << SC_PAGE_SHIFT);
    if (large)                              /* and poisoned to ASan (a small span poisons its own) */
        sc_asan_unpoison((void *)s->base, npages << SC_PAGE_SHIFT);
    size_t clean = 0;
    s->needzero = false;
    for (size_t i = first; i < first + npages; i++) {
        if (page_dirty(i)) {
            if (zero)
                memset((void *)(sc_heap.base + (i << SC_PAGE_SHIFT)), 0, SC_PAGE_SIZE);
            else
                s->needzero = true;
        } else {
            clean++;
            sc_heap.dirty[i / 64] |= (uint64_t)1 << (i % 64);
        }
    }
    if (s->npages > npages) {
        /* The rest keeps the run's ages and the dirty pages the span did not take. */
        size_t rest = s->npages - npages;
        sc_heap.pagemap[first + s->npages - 1] = NOWHERE;
        s->npages = (uint32_t)npages;
        idle.dirty -= npages - clean;
        insert_free_run(first + npages, rest, NULL, idle);
    }
    sc_heap.released_pages -= clean;
    sc_heap.idle_pages -= npages;
    set_pagemap(first, npages, s);
    if (stack)
        sc_heap.stack_pages += npages;
    else
        sc_heap.inuse_pages += npages;
    note_peak();
    if (large && !stack) {
        sc_heap.large_alloc_bytes += npages << SC_PAGE_SHIFT;
        sc_heap.large_mallocs++;
    }
    pthread_mutex_unlock(&sc_heap.lock);
    return s;
}

void sc_heap_free(sc_span *s)
{
    uint64_t now = sc_heap_tick_now();           /* outside the lock: it is held long enough */
    pthread_mutex_lock(&sc_heap.lock);
    heap_tick(now);
    size_t first = page_index(s->base), n = s->npages;
    if (s->stack)
        sc_heap.stack_pages -= n;
    else
        sc_heap.inuse_pages -= n;
    /* A cached span's free was counted by the thread that cached it. */
    if (s->state == SC_SPAN_LARGE && !s->stack && !s->cached) {
        sc_heap.large_alloc_bytes -= (size_t)n << SC_PAGE_SHIFT;
        sc_heap.large_frees++;
    }
    s->cached = 0;
    if (s->state == SC_SPAN_SMALL) {
        sc_heap.gone_nalloc[s->spanclass] += s->nalloc;
        sc_heap.gone_nfreed[s->spanclass] += s->nfreed;
    }
    sc_heap.idle_pages += n;
    set_pagemap(first, n, NOWHERE);
    /* The struct lives on as a free run and later as another span: nothing of its small
     * life may stay, or a large object on it would pass the free fast path's owner and
     * boundary tests. */
    atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
    __atomic_store_n(&s->mul_limit, 0, __ATOMIC_RELAXED);
    s->free = NULL;
    s->end = 0;
    insert_free_run(first, n, s, idle_fresh(n));
    pthread_mutex_unlock(&sc_heap.lock);
}

/* A large object's span resized in place to npages: the tail given back to the free runs,
 * or the free run right after it taken, if it is long enough (then true).  realloc's way to
 * grow or shrink a large buffer without copying it. */
bool sc_heap_resize(sc_span *s, size_t npages)
{
    if (sc_heap.valgrind || s->stack || !npages)
        return false;
    uint64_t now = sc_heap_tick_now();           /* outside the lock: it is held long enough */
    pthread_mutex_lock(&sc_heap.lock);
    heap_tick(now);
    size_t first = page_index(s->base), old = s->npages;
    if (npages < old) {
        size_t tail = old - npages;
        set_pagemap(first + npages, tail, NOWHERE);
        s->npages = (uint32_t)npages;
        sc_heap.inuse_pages -= tail;
        sc_heap.idle_pages += tail;
        sc_heap.large_alloc_bytes -= tail << SC_PAGE_SHIFT;
        sc_asan_poison((void *)(s->base + (npages << SC_PAGE_SHIFT)), tail << SC_PAGE_SHIFT);
        insert_free_run(first + npages, tail, NULL, idle_fresh(tail));
        pthread_mutex_unlock(&sc_heap.lock);
        return true;
    }
    size_t extra = npages - old, next = first + old;
    sc_span *r = next < sc_heap.grown_pages ? sc_heap.pagemap[next] : NULL;
    if (!r || r == NOWHERE || r->state != SC_SPAN_FREE || page_index(r->base) != next || r->npages < extra) {
        pthread_mutex_unlock(&sc_heap.lock);
        return false;
    }
    size_t clean = 0;
    for (size_t i = next; i < next + extra; i++) {
        if (!page_dirty(i)) {
            clean++;
            sc_heap.dirty[i / 64] |= (uint64_t)1 << (i % 64);
        }
    }
    run_unlink(r);
    if (r->npages > extra) {
        /* The rest stays a free run: its last page keeps its tag, its first is new. */
        r->base += extra << SC_PAGE_SHIFT;
        r->npages -= (uint32_t)extra;
        r->idle.dirty -= extra - clean;
        run_link(r);
    } else {
        span_recycle(r);
    }
    set_pagemap(next, extra, s);
    s->npages = (uint32_t)npages;
    sc_heap.released_pages -= clean;
    sc_heap.idle_pages -= extra;
    sc_heap.inuse_pages += extra;
    note_peak();
    sc_heap.large_alloc_bytes += extra << SC_PAGE_SHIFT;
    sc_asan_unpoison((void *)(sc_heap.base + (next << SC_PAGE_SHIFT)), extra << SC_PAGE_SHIFT);
    pthread_mutex_unlock(&sc_heap.lock);
    return true;
}

/* Every free run's resident pages back to the OS (sc_scavenge, after the caches have
 * given back what they hold). */
void sc_heap_release_free(void)
{
    sc_heap_init();
    pthread_mutex_lock(&sc_heap.lock);
    for (size_t b = 0; b <= EXACT_RUNS; b++)
        for (sc_span *s = sc_heap.free_runs[b]; s; s = s->next)
            release_dirty_pages(s);
    pthread_mutex_unlock(&sc_heap.lock);
}

void sc_get_config(struct sc_config *out)
{
    sc_heap_init();
    out->size_specialized = SC_SIZE_SPECIALIZED;
    out->page_size = SC_PAGE_SIZE;
    out->arena_bytes = sc_heap.reserved_pages << SC_PAGE_SHIFT;
    out->grow_bytes = GROW_PAGES << SC_PAGE_SHIFT;
    out->release_method = "MADV_DONTNEED";
    pthread_mutex_lock(&sc_heap.lock);
    out->decay_ms = sc_heap.conf.decay_ms;
    out->retain_pct = sc_heap.conf.retain_pct;
    pthread_mutex_unlock(&sc_heap.lock);
}

int sc_set_decay_ms(int decay_ms)
{
    sc_heap_init();
    if (decay_ms < -1)
        decay_ms = -1;
    pthread_mutex_lock(&sc_heap.lock);
    int was = sc_heap.conf.decay_ms;
    sc_heap.conf.decay_ms = decay_ms;
    pthread_mutex_unlock(&sc_heap.lock);
    return was;
}

/* Objects allocated and freed by span class: the counts of all small spans, and of
 * those gone.  Owners count without the lock, one instruction at a time; the walk takes
 * the lock only so that spans neither appear nor vanish under it.  A span whose pages
 * were just taken and not yet set up holds zeros (sc_heap_alloc cleared them). */
void sc_heap_sum_counts(uint64_t nalloc[SC_NSPANCLASS], uint64_t nfreed[SC_NSPANCLASS])
{
    pthread_mutex_lock(&sc_heap.lock);
    for (unsigned sc = 0; sc < SC_NSPANCLASS; sc++) {
        nalloc[sc] = sc_heap.gone_nalloc[sc];
        nfreed[sc] = sc_heap.gone_nfreed[sc];
    }
    for (size_t i = 0; i < sc_heap.grown_pages;) {
        const sc_span *s = sc_heap.pagemap[i];
        if (s == NOWHERE || page_index(s->base) != i) {
            i++;
            continue;
        }
        if (s->state == SC_SPAN_SMALL) {
            /* nfreed first: read the other way round, a free between the loads could
             * make a span look to have freed more than it allocated.  A pooled span's
             * owner may be carving it for another class (its counts are zero). */
            unsigned sc = __atomic_load_n(&s->spanclass, __ATOMIC_RELAXED);
            nfreed[sc] += __atomic_load_n(&s->nfreed, __ATOMIC_RELAXED);
            nalloc[sc] += __atomic_load_n(&s->nalloc, __ATOMIC_RELAXED);
        }
        i += s->npages;
    }
    pthread_mutex_unlock(&sc_heap.lock);
}

/* The counts of empty spans a thread keeps for spans of other classes (cache.c), a chain
 * through next: added to those of spans gone, and cleared, under the lock the statistics
 * read them under, so that no snapshot counts them twice or not at all. */
void sc_heap_retire_counts(sc_span *chain)
{
    pthread_mutex_lock(&sc_heap.lock);
    for (sc_span *s = chain; s; s = s->next) {
        sc_heap.gone_nalloc[s->spanclass] += s->nalloc;
        sc_heap.gone_nfreed[s->spanclass] += s->nfreed;
        __atomic_store_n(&s->nalloc, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->nfreed, 0, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&sc_heap.lock);
}

/* Where the resident memory is, span class by span class: every span's pages, and every
 * free run's, asked of the kernel (mincore), under the heap lock.  For finding what a
 * workload keeps resident that it does not use (a page of a dead buffer, a page shared by
 * two objects, empty spans and dirty idle pages kept at hand) - far too slow for every
 * request. */
static size_t resident_bytes(uintptr_t base, size_t bytes)
{
    static unsigned char vec[(SC_PAGE_SIZE << 14) / 4096];
    size_t os_page = (size_t)sysconf(_SC_PAGESIZE), resident = 0;
    for (size_t off = 0; off < bytes; off += sizeof vec * os_page) {
        size_t len = bytes - off < sizeof vec * os_page ? bytes - off : sizeof vec * os_page;
        if (mincore((void *)(base + off), len, vec) == 0)
            for (size_t k = 0; k < len / os_page; k++)
                resident += (vec[k] & 1) ? os_page : 0;
    }
    return resident;
}

void sc_read_residency(struct sc_residency *out)
{
    memset(out, 0, sizeof *out);
    sc_heap_init();
    pthread_mutex_lock(&sc_heap.lock);
    for (size_t i = 0; i < sc_heap.grown_pages;) {
        const sc_span *s = sc_heap.pagemap[i];
        if (s == NOWHERE || page_index(s->base) != i || !s->npages) {
            i++;
            continue;
        }
        size_t bytes = (size_t)s->npages << SC_PAGE_SHIFT, resident = resident_bytes(s->base, bytes);
        bool large = s->state == SC_SPAN_LARGE;
        struct sc_class_residency *c = s->state == SC_SPAN_FREE ? &out->idle
                                       : s->stack             ? &out->stacks
                                                              : &out->by_class[large ? 0 : SC_SPANCLASS_CLASS(__atomic_load_n(&s->spanclass, __ATOMIC_RELAXED))];
        uint64_t live = s->state == SC_SPAN_FREE ? 0 : large ? !s->cached : sc_span_live(s);
        c->spans++;
        c->bytes += bytes;
        c->resident += resident;
        c->objects += live;
        if (s->state != SC_SPAN_FREE && !live) {
            c->empty_spans++;
            c->empty_resident += resident;
        }
        i += s->npages;
    }
    pthread_mutex_unlock(&sc_heap.lock);
}

uint64_t sc_heap_resident(void)
{
    static unsigned char vec[(SC_PAGE_SIZE << 14) / 4096];
    static pthread_mutex_t vec_lock = PTHREAD_MUTEX_INITIALIZER;
    long os_page = sysconf(_SC_PAGESIZE);
    size_t chunk = sizeof vec * (size_t)os_page;
    pthread_mutex_lock(&sc_heap.lock);
    uintptr_t base = sc_heap.base;
    size_t bytes = sc_heap.grown_pages << SC_PAGE_SHIFT;
    pthread_mutex_unlock(&sc_heap.lock);
    /* The grown part only grows: pages that change state meanwhile are counted either way. */
    uint64_t resident = 0;
    pthread_mutex_lock(&vec_lock);
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t len = bytes - off < chunk ? bytes - off : chunk;
        if (mincore((void *)(base + off), len, vec) == 0)
            for (size_t k = 0; k < len / (size_t)os_page; k++)
                resident += (vec[k] & 1) ? (uint64_t)os_page : 0;
    }
    pthread_mutex_unlock(&vec_lock);
    return resident;
}

/* The page map lookup without the fast path's valgrind cut-off. */
sc_span *sc_span_lookup(const void *p)
{
    size_t idx = ((uintptr_t)p - sc_heap.base) >> SC_PAGE_SHIFT;
    if (!sc_heap.base || idx >= sc_heap.reserved_pages)
        return NULL;
    return sc_heap.pagemap[idx];
}

/* fork.c */
void sc_heap_lock(void) { pthread_mutex_lock(&sc_heap.lock); }
void sc_heap_unlock(void) { pthread_mutex_unlock(&sc_heap.lock); }
