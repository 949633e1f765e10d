/* Large copies that keep clear of the CPU's slow case.
 *
 * On this machine's AMD EPYC, `rep movsb` - what glibc 2.36's memcpy uses from its
 * threshold (2112 bytes here) up, and what the kernel's copies to and from user space
 * use at every size - runs 5 to 17 times slower when the destination lies 1 to 31 bytes
 * after the source modulo 4096: 16 KiB in 5.5 us against 0.34 (memcpy), 7 us against
 * 1.4 (pread from the page cache); any other distance, even an odd one, is fast.  HTTP/2
 * puts a 9-byte frame header before each payload and OpenSSL an 8-byte-aligned record
 * header before its plaintext, so copies from page-aligned sources (file pages, large
 * buffers) meet it every few frames.  docs/performance.md (CPU per request) has the measurements.
 *
 * copy_near_behind says whether a copy from src to dst is in that case (with a margin:
 * up to 63 bytes, one cache line); copy_apart copies such a pair in pieces below glibc's
 * threshold, where its vector loop runs it at 1.0 us per 16 KiB instead of 5.5 (still three
 * times an unaliased copy: where the caller can choose the distance instead, it does), and
 * anything else with one memcpy.  build/bench/bench_copy measures all three on a machine;
 * on CPUs without the slow case the pieces cost a few calls per 16 KiB. */
#ifndef H2PARK_COPY_H
#define H2PARK_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define COPY_PIECE 2048

static inline bool copy_near_behind(const void *dst, const void *src)
{
    return ((((uintptr_t)dst - (uintptr_t)src) & 4095) - 1) < 63;
}

static inline void copy_apart(void *dst, const void *src, size_t n)
{
    if (n <= COPY_PIECE || !copy_near_behind(dst, src)) {
        memcpy(dst, src, n);
        return;
    }
    char *d = dst;
    const char *s = src;
    for (; n > COPY_PIECE; n -= COPY_PIECE, d += COPY_PIECE, s += COPY_PIECE)
        memcpy(d, s, COPY_PIECE);
    memcpy(d, s, n);
}

#endif
