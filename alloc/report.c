/* SCALLOC_STATS=path: the drop-in's statistics, one line per process at exit.
 *
 * A program run with LD_PRELOAD=libscalloc.so has no way to call sc_read_stats, yet the
 * tests must see that its allocations reached the heap and the benchmarks want its
 * object counts and peak RSS.  So, when the variable names a file, each process appends
 * one line there as it exits (tab-separated key=value: its name and pid, sc_read_stats'
 * figures, and VmHWM).  Appending with O_APPEND keeps the lines of a process tree (gcc
 * and its cc1 and as, git and its helpers) whole.
 *
 * It runs in a destructor, possibly after the program freed its stdio and while other
 * threads still allocate, so it must not allocate: /proc is read with open/read into a
 * stack buffer and the line is formatted there too.  Only the shared library has it
 * (libscalloc.so); a program linking libscalloc.a can call sc_read_stats itself. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scalloc.h"

/* The value of "key:" in /proc/self/status (kB), or -1. */
static long status_kb(const char *key)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    size_t klen = strlen(key);
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, key, klen) && line[klen] == ':')
            return strtol(line + klen + 1, NULL, 10);
    return -1;
}

static void comm(char *out, size_t len)
{
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, len - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        n = 0;
    out[n] = 0;
    out[strcspn(out, "\n\t ")] = 0;
}

__attribute__((destructor)) static void report_at_exit(void)
{
    const char *path = getenv("SCALLOC_STATS");
    if (!path || !*path)
        return;
    struct sc_stats st;
    sc_read_stats(&st);
    char name[32], line[512];
    comm(name, sizeof name);
    int n = snprintf(line, sizeof line,
                     "prog=%s\tpid=%d\tmallocs=%llu\tfrees=%llu\theap_alloc=%llu\theap_inuse=%llu\t"
                     "heap_sys=%llu\tlarge_alloc=%llu\trelease_calls=%llu\thwm_kb=%ld\n",
                     name, (int)getpid(), (unsigned long long)st.mallocs, (unsigned long long)st.frees,
                     (unsigned long long)st.heap_alloc, (unsigned long long)st.heap_inuse,
                     (unsigned long long)st.heap_sys, (unsigned long long)st.large_alloc,
                     (unsigned long long)st.release_calls, status_kb("VmHWM"));
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (n > 0 && write(fd, line, (size_t)n) < 0)
        n = 0;
    close(fd);
}
