/* /-/stats and /metrics: the same figures as JSON and in Prometheus' text format.
 *
 * Connection and coroutine counts are summed over the workers' counters, heap figures
 * come from sc_read_stats, RSS from /proc/self/statm (read with open and read: stdio
 * would allocate a buffer on every request); all are cheap enough to serve on every
 * request.  libc_heap_bytes is what glibc's own allocator holds: zero when the daemon
 * exports the malloc family from the heap, as it does outside sanitizer builds. */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "h2park.h"
#include "scalloc.h"

uint64_t rss_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *rest;
    strtoull(buf, &rest, 10);                       /* total size; resident follows */
    return strtoull(rest, NULL, 10) * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t libc_heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.arena + mi.hblkhd;
}

struct figure {
    const char *name;
    uint64_t value;
    bool boolean, counter;
};

static size_t collect(struct figure *f)
{
    struct worker_counters n;
    workers_sum(&n);
    struct sc_stats st;
    sc_read_stats(&st);
    size_t k = 0;
    f[k++] = (struct figure){ "conns", n.conns, false, false };
    f[k++] = (struct figure){ "parked_conns", n.parked_conns, false, false };
    f[k++] = (struct figure){ "coroutines", n.serve_coroutines + n.handler_coroutines, false, false };
    f[k++] = (struct figure){ "serve_coroutines", n.serve_coroutines, false, false };
    f[k++] = (struct figure){ "handler_coroutines", n.handler_coroutines, false, false };
    f[k++] = (struct figure){ "stack_inuse_bytes", st.stack_inuse, false, false };
    f[k++] = (struct figure){ "heap_alloc_bytes", st.heap_alloc, false, false };
    f[k++] = (struct figure){ "heap_inuse_bytes", st.heap_inuse, false, false };
    f[k++] = (struct figure){ "heap_sys_bytes", st.heap_sys, false, false };
    f[k++] = (struct figure){ "heap_released_bytes", st.heap_released, false, false };
    f[k++] = (struct figure){ "rss_bytes", rss_bytes(), false, false };
    f[k++] = (struct figure){ "libc_heap_bytes", libc_heap_bytes(), false, false };
    f[k++] = (struct figure){ "parking", cfg.parking, true, false };
    f[k++] = (struct figure){ "conns_total", n.conns_total, false, true };
    f[k++] = (struct figure){ "streams_total", n.streams_total, false, true };
    f[k++] = (struct figure){ "parks_total", n.parks_total, false, true };
    f[k++] = (struct figure){ "respawns_total", n.respawns_total, false, true };
    f[k++] = (struct figure){ "workers", (uint64_t)nworkers, false, false };
    return k;
}

size_t stats_json(char *out, size_t cap)
{
    struct figure f[24];
    size_t k = collect(f), n = 0;
    n += (size_t)snprintf(out + n, cap - n, "{");
    for (size_t i = 0; i < k && n < cap; i++) {
        if (f[i].boolean)
            n += (size_t)snprintf(out + n, cap - n, "%s\"%s\": %s", i ? ", " : "", f[i].name, f[i].value ? "true" : "false");
        else
            n += (size_t)snprintf(out + n, cap - n, "%s\"%s\": %llu", i ? ", " : "", f[i].name, (unsigned long long)f[i].value);
    }
    if (n < cap)
        n += (size_t)snprintf(out + n, cap - n, "}\n");
    return n < cap ? n : cap - 1;
}

size_t stats_prometheus(char *out, size_t cap)
{
    struct figure f[24];
    size_t k = collect(f), n = 0;
    for (size_t i = 0; i < k && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "# TYPE h2park_%s %s\nh2park_%s %llu\n", f[i].name,
                              f[i].counter ? "counter" : "gauge", f[i].name, (unsigned long long)f[i].value);
    return n < cap ? n : cap - 1;
}
