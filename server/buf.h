/* A growable byte buffer on the size-class heap.  It grows by sc_grow_cap (Go's policy,
 * rounded to what the allocator hands out anyway) and is freed outright rather than
 * kept, so an idle connection holds no buffer at all. */
#ifndef H2PARK_BUF_H
#define H2PARK_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct buf {
    char *data;
    size_t len, cap;
};

/* v in decimal at out (at least 21 bytes), not terminated; the length.  For the hot paths,
 * where snprintf's parsing of its format costs more than the number. */
static inline size_t u64_dec(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* The inverse, strictly, as HTTP's numbers are (1*DIGIT): s[0..n) is one or more decimal
 * digits - no sign, no space - of a value at most max.  0 and *out, or -1. */
static inline int u64_parse(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)((unsigned char)s[i] - '0');
        if (d > 9 || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int buf_reserve(struct buf *b, size_t extra);
/* Inline: most appends fit, and are then a compare and a copy. */
static inline int buf_append(struct buf *b, const void *p, size_t n)
{
    if (n > b->cap - b->len && buf_reserve(b, n))
        return -1;
    if (n)                      /* (no arithmetic on a buffer not yet allocated) */
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}
void buf_free(struct buf *b);
/* Moves the contents into an object of their own size when that is a smaller one (for a
 * buffer done growing); the data may move.  Kept as it is if memory is short. */
void buf_fit(struct buf *b);

#endif
