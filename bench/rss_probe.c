/* rss_probe: where a program's peak RSS goes under the drop-in, class by class.
 *
 *   LD_PRELOAD="build/libscalloc.so build/bench/librss_probe.so" RSS_PROBE=out.txt PROGRAM...
 *
 * Preloaded after libscalloc.so (or alone, under another allocator: then it reports the peak
 * and how much of it is anonymous memory, nothing else), it starts a thread that reads the process's resident set
 * (/proc/self/statm) every millisecond and, whenever it has grown past the last snapshot's
 * by more than 0.5%, takes a new snapshot of the heap: sc_read_residency (every span's and
 * free run's pages asked of the kernel) and sc_read_stats.  At exit it appends the last
 * snapshot - the one nearest the peak - to RSS_PROBE (else stderr) as a table: per size
 * class the live objects' bytes, what else is resident in the spans that hold them (free
 * objects, and pages never touched count nothing), the resident bytes of spans with no live
 * object that threads keep for their next objects of the class; then objects above 32 KiB
 * live and freed-but-kept, the dirty pages of free runs the page heap keeps at hand, and
 * what is resident outside the heap (the program, its libraries, stacks, memory it maps
 * itself).  The snapshot stops the heap for a few ms (it holds the page heap's lock), so
 * it perturbs time, not what is measured.  The sampling thread allocates nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scalloc.h"

static struct sc_residency snap, work;
static struct sc_stats snap_stats, work_stats;
static uint64_t snap_rss, snap_file, snap_heap, peak_rss, peak_file;
/* Looked up, so that the probe also runs under other allocators (RSS and its split only). */
static void (*read_residency)(struct sc_residency *);
static void (*read_stats)(struct sc_stats *);
static uint64_t (*heap_resident)(void);
static double snap_at, start;
static volatile int stop;
static pthread_t sampler;
static long os_page;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t file_now;      /* of the last rss_now: the file-backed part */

static uint64_t rss_now(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long size, resident, shared;
    if (sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) != 3)
        return 0;
    file_now = (uint64_t)shared * (uint64_t)os_page;
    return (uint64_t)resident * (uint64_t)os_page;
}

static void *sample(void *arg)
{
    (void)arg;
    while (!stop) {
        uint64_t rss = rss_now();
        if (rss > peak_rss)
            peak_rss = rss, peak_file = file_now;
        if (read_residency && rss > snap_rss + snap_rss / 200) {
            read_residency(&work);
            read_stats(&work_stats);
            uint64_t heap = heap_resident();
            /* The snapshot is of the moment it ended: read the RSS again. */
            uint64_t after = rss_now();
            snap = work;
            snap_stats = work_stats;
            snap_heap = heap;
            snap_rss = after > rss ? after : rss;
            snap_file = file_now;
            snap_at = now() - start;
        }
        usleep(1000);
    }
    return NULL;
}

__attribute__((constructor)) static void probe_start(void)
{
    os_page = sysconf(_SC_PAGESIZE);
    start = now();
    read_residency = (void (*)(struct sc_residency *))dlsym(RTLD_DEFAULT, "sc_read_residency");
    read_stats = (void (*)(struct sc_stats *))dlsym(RTLD_DEFAULT, "sc_read_stats");
    heap_resident = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "sc_heap_resident");
    if (!read_stats || !heap_resident)
        read_residency = NULL;
    pthread_create(&sampler, NULL, sample, NULL);
}

static double mib(uint64_t b) { return (double)b / (1 << 20); }

__attribute__((destructor)) static void probe_report(void)
{
    stop = 1;
    pthread_join(sampler, NULL);
    const char *path = getenv("RSS_PROBE");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        f = stderr;
    char name[64] = "?";
    int fd = open("/proc/self/comm", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, name, sizeof name - 1);
        name[n > 0 ? n - 1 : 0] = 0;
        close(fd);
    }
    fprintf(f, "# %s (pid %d): peak RSS %.2f MiB (%.2f anonymous, %.2f file-backed)\n", name, (int)getpid(), mib(peak_rss),
            mib(peak_rss - peak_file), mib(peak_file));
    if (!read_residency)
        goto out;
    fprintf(f, "snapshot at %.2f s: RSS %.2f MiB (%.2f file-backed), heap resident %.2f MiB, anonymous outside the heap %.2f MiB\n",
            snap_at, mib(snap_rss), mib(snap_file), mib(snap_heap),
            mib(snap_rss > snap_heap + snap_file ? snap_rss - snap_heap - snap_file : 0));
    fprintf(f, "| class | size | spans | live objects | live MiB | free in spans MiB | empty spans | empty spans MiB |\n");
    fprintf(f, "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    uint64_t live = 0, freein = 0, empty = 0, nempty = 0, spans = 0;
    for (int c = 1; c < SC_NUM_CLASSES; c++) {
        const struct sc_class_residency *x = &snap.by_class[c];
        if (!x->spans)
            continue;
        uint64_t bytes_live = x->objects * snap_stats.by_class[c].size, res = x->resident - x->empty_resident;
        uint64_t free_bytes = res > bytes_live ? res - bytes_live : 0;
        live += bytes_live, freein += free_bytes, empty += x->empty_resident, nempty += x->empty_spans;
        spans += x->spans;
        if (x->resident < (64u << 10))       /* the table lists what matters */
            continue;
        fprintf(f, "| %d | %u | %llu | %llu | %.2f | %.2f | %llu | %.2f |\n", c, snap_stats.by_class[c].size,
                (unsigned long long)x->spans, (unsigned long long)x->objects, mib(bytes_live), mib(free_bytes),
                (unsigned long long)x->empty_spans, mib(x->empty_resident));
    }
    fprintf(f, "| all small | | %llu | | %.2f | %.2f | %llu | %.2f |\n", (unsigned long long)spans, mib(live), mib(freein),
            (unsigned long long)nempty, mib(empty));
    /* The spans' counts take a free from another thread for one once the owner collects it;
     * the statistics as soon as it is pushed. */
    uint64_t small_alloc = snap_stats.heap_alloc - snap_stats.large_alloc;
    fprintf(f, "of the live: %.2f MiB freed by other threads, not yet collected by the spans' owners (objects live: %llu)\n",
            mib(live > small_alloc ? live - small_alloc : 0), (unsigned long long)(snap_stats.mallocs - snap_stats.frees));
    const struct sc_class_residency *l = &snap.by_class[0], *idle = &snap.idle;
    fprintf(f, "large objects: %llu live, %.2f MiB resident; %llu freed and kept by threads, %.2f MiB resident\n",
            (unsigned long long)l->objects, mib(l->resident - l->empty_resident), (unsigned long long)l->empty_spans,
            mib(l->empty_resident));
    fprintf(f, "free page runs: %llu, %.2f MiB, %.2f MiB of it resident (kept at hand)\n", (unsigned long long)idle->spans,
            mib(idle->bytes), mib(idle->resident));
    if (snap.stacks.spans)
        fprintf(f, "stacks: %.2f MiB resident\n", mib(snap.stacks.resident));
out:
    if (f != stderr)
        fclose(f);
}
