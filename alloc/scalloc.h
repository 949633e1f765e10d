/* scalloc: a Go-style size-class heap for C, with explicit free.
 *
 * Requests of 1..32768 bytes round up to one of Go's 67 size classes and are carved
 * from spans of whole 8 KiB pages; larger requests take whole pages.  Each thread owns
 * the spans it allocates from (Go's mcache), spans of exited threads wait in per-class
 * central lists (mcentral), and spans come from a page heap (mheap) that coalesces free
 * page runs and returns them to the OS.  A page map finds the span of any pointer, so
 * objects carry no header.
 *
 * sc_malloc is inline so that a compile-time-constant size of 1..80 bytes calls the
 * function specialized for its class directly (Go 1.27's size-specialized malloc); a
 * library built with make SIZE_SPECIALIZED=0 takes the generic path.
 * sc_config.h, generated and installed beside this header, says how the library was
 * built: users need no -D. */
#ifndef SCALLOC_H
#define SCALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "sc_config.h"

#define SC_NUM_CLASSES 68          /* class 0 stands for "large" */
#define SC_SPECIALIZED_LIMIT 80

struct sc_class_stats {
    uint32_t size;                 /* object size of the class */
    uint64_t mallocs, frees;       /* heap objects (stacks are not counted here) */
};

struct sc_stats {
    uint64_t heap_alloc;           /* bytes in live heap objects, class- or page-rounded */
    uint64_t heap_inuse;           /* bytes in spans holding heap objects */
    uint64_t heap_idle;            /* bytes in free page runs, released or not */
    uint64_t heap_released;        /* bytes of idle pages not backed by memory */
    uint64_t heap_sys;             /* bytes of address space the heap has taken into use */
    uint64_t stack_inuse;          /* bytes in spans holding coroutine stacks */
    uint64_t mallocs, frees;       /* heap objects allocated and freed, all time */
    uint64_t large_alloc;          /* bytes in live objects above 32 KiB */
    uint64_t release_calls;        /* madvise calls that gave idle pages back, all time */
    struct sc_class_stats by_class[SC_NUM_CLASSES];
};

/* Resident memory by span class (sc_read_residency): spans, their bytes, how many of
 * those are resident, and live objects (by the owners' counts; remote frees not yet
 * collected count as live); of those spans, how many hold no live object (a thread keeps
 * them for its next objects of the class; for objects above 32 KiB, the freed objects a
 * thread keeps for its next of the same size) and their resident bytes. */
struct sc_class_residency {
    uint64_t spans, bytes, resident, objects;
    uint64_t empty_spans, empty_resident;
};
struct sc_residency {
    struct sc_class_residency by_class[SC_NUM_CLASSES];   /* [0]: objects above 32 KiB */
    struct sc_class_residency stacks;                      /* coroutine stacks, all sizes */
    struct sc_class_residency idle;                        /* free page runs (spans: runs) */
};

struct sc_config {
    int size_specialized;          /* how this library was built */
    size_t page_size;
    size_t arena_bytes;            /* address space reserved for the heap */
    size_t grow_bytes;             /* how much the heap takes into use at a time */
    const char *release_method;    /* how idle pages go back to the OS */
    int decay_ms;                  /* SCALLOC_CONF's decay_ms, or sc_set_decay_ms's */
    unsigned retain_pct;           /* SCALLOC_CONF's retain_pct */
};

void *sc_malloc_generic(size_t n);
void  sc_free(void *p);
void *sc_calloc(size_t count, size_t n);
void *sc_realloc(void *p, size_t n);
/* An object of at least n bytes at a multiple of align (a power of two, else NULL and
 * EINVAL), freed with sc_free like any other. */
void *sc_aligned_alloc(size_t align, size_t n);
size_t sc_usable_size(const void *p);
size_t sc_roundup(size_t n);
void *sc_stack_alloc(size_t n);
void  sc_stack_free(void *p);
size_t sc_grow_cap(size_t old_cap, size_t needed, size_t elem_size);
void  sc_scavenge(void);
/* How long free pages above the retained goal (the peak of the pages in use over this period,
 * plus retain_pct of it) may stay resident before the heap gives them back by itself; -1:
 * never, only sc_scavenge.  Returns the setting it replaces (SCALLOC_CONF sets the first). */
int   sc_set_decay_ms(int decay_ms);
/* Gives the OS pages lying wholly inside [p, p+len) of a live object back to the OS: for
 * a buffer whose contents are dead for a while.  Those bytes read as zero afterwards. */
void  sc_release_pages(void *p, size_t len);
void  sc_read_stats(struct sc_stats *out);
/* Walks every span and asks the kernel which pages are resident: for analysis. */
void  sc_read_residency(struct sc_residency *out);
/* Resident bytes of the whole heap, stacks included (one mincore over its address space:
 * cheap enough to sample every second). */
uint64_t sc_heap_resident(void);
void  sc_get_config(struct sc_config *out);

/* sc_malloc_8 ... sc_malloc_80, one per class of at most 80 bytes, generated from the
 * class table into build/gen/sc_specialized.h (installed beside this header). */
#include "sc_specialized.h"
/* Indexed by the requested size (0..80), like Go's mallocNoScanTable. */
extern void *(*const sc_malloc_table[SC_SPECIALIZED_LIMIT + 1])(void);

static inline __attribute__((always_inline, malloc)) void *sc_malloc(size_t n)
{
#if SC_SIZE_SPECIALIZED
    if (__builtin_constant_p(n) && n >= 1 && n <= SC_SPECIALIZED_LIMIT) {
        return SC_SPECIALIZED_DISPATCH(n);
    }
    if (n - 1 < SC_SPECIALIZED_LIMIT)
        return sc_malloc_table[n]();
#endif
    return sc_malloc_generic(n);
}

#endif
