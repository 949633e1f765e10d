/* /-/stats and /metrics: the same figures as JSON and in Prometheus' text format.
 *
 * Connection and coroutine counts are summed over the workers' counters, heap figures
 * come from sc_read_stats, RSS from /proc/self/statm; all are cheap enough to serve on
 * every request. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "app/app.h"
#include "config.h"
#include "counters.h"
#include "scalloc.h"

/* Read with open and read, not stdio: a FILE would take memory from libc's malloc on
 * every request. */
uint64_t rss_bytes(void)
{
    char text[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    text[n] = 0;
    unsigned long long size = 0, resident = 0;
    if (sscanf(text, "%llu %llu", &size, &resident) != 2)
        return 0;
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
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
    f[k++] = (struct figure){ "parking", cfg.parking, true, false };
    f[k++] = (struct figure){ "conns_total", n.conns_total, false, true };
    f[k++] = (struct figure){ "streams_total", n.streams_total, false, true };
    f[k++] = (struct figure){ "parks_total", n.parks_total, false, true };
    f[k++] = (struct figure){ "respawns_total", n.respawns_total, false, true };
    f[k++] = (struct figure){ "workers", (uint64_t)nworkers, false, false };
    return k;
}

static size_t stats_json(char *out, size_t cap)
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

static size_t stats_prometheus(char *out, size_t cap)
{
    struct figure f[24];
    size_t k = collect(f), n = 0;
    for (size_t i = 0; i < k && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "# TYPE h2park_%s %s\nh2park_%s %llu\n", f[i].name,
                              f[i].counter ? "counter" : "gauge", f[i].name, (unsigned long long)f[i].value);
    return n < cap ? n : cap - 1;
}

static void stats(struct request *r)
{
    char text[4096];
    size_t n = stats_json(text, sizeof text);
    req_simple(r, 200, "application/json", text, n);
}

static void metrics(struct request *r)
{
    char text[4096];
    size_t n = stats_prometheus(text, sizeof text);
    req_simple(r, 200, "text/plain; version=0.0.4", text, n);
}

const struct route stats_routes[] = {
    { "/-/stats", M_GET | M_HEAD, stats },
    { "/metrics", M_GET | M_HEAD, metrics },
    { NULL, 0, NULL },
};
