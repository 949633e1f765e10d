/* bench_copy: what server/copy.h is about, measured on this machine.
 *
 * Copies of 16 KiB (an HTTP/2 frame's payload, a TLS record) between page-aligned
 * buffers with the destination d bytes after the source modulo 4096: glibc's memcpy,
 * copy_apart, and pread from a file in the page cache (the kernel's copy to user space).
 * Prints nanoseconds per copy, the best of several passes.  On a CPU whose rep movsb is
 * slow for destinations 1-31 bytes after the source, memcpy and pread show it at
 * d = 8..24 and copy_apart does not; elsewhere all rows are flat.
 *
 *   build/bench/bench_copy */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"

enum { LEN = 16384, REPS = 4000, PASSES = 5, SPAN = 8 };

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(void)
{
    size_t region = (size_t)SPAN * 65536;
    char *src = aligned_alloc(4096, region), *dst = aligned_alloc(4096, region + 8192);
    if (!src || !dst)
        return 1;
    memset(src, 1, region);
    memset(dst, 2, region + 8192);
    char path[] = "/tmp/bench_copy.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, src, region) != (ssize_t)region)
        return 1;
    unlink(path);
    static const int dist[] = { 0, 8, 9, 16, 24, 32, 64, 2048 };
    printf("16 KiB copies, destination d bytes after the source modulo 4096 (ns per copy, best of %d)\n", PASSES);
    printf("%6s %10s %10s %10s\n", "d", "memcpy", "copy_apart", "pread");
    for (size_t k = 0; k < sizeof dist / sizeof dist[0]; k++) {
        double best[3] = { 1e18, 1e18, 1e18 };
        for (int pass = 0; pass < PASSES; pass++)
            for (int how = 0; how < 3; how++) {
                double t0 = now_ns();
                for (int i = 0; i < REPS; i++) {
                    size_t at = (size_t)(i % SPAN) * 65536;
                    char *to = dst + at + dist[k];
                    if (how == 0)
                        memcpy(to, src + at, LEN);
                    else if (how == 1)
                        copy_apart(to, src + at, LEN);
                    else if (pread(fd, to, LEN, (off_t)at) != LEN)
                        return 1;
                    __asm__ volatile("" : : "r"(to) : "memory");
                }
                double t = (now_ns() - t0) / REPS;
                if (t < best[how])
                    best[how] = t;
            }
        printf("%6d %10.0f %10.0f %10.0f\n", dist[k], best[0], best[1], best[2]);
    }
    close(fd);
    return 0;
}
