/* Copies of HTTP field names and values: a few to a few dozen bytes each, a dozen of
 * them per request.  At that size the C library's memcpy costs its call and its size
 * dispatch more than the bytes (callgrind: 15-20 instructions for a 10-byte copy), so
 * copies of up to 32 bytes are done inline with overlapping loads and stores, and a
 * name is lower-cased eight bytes at a time rather than byte by byte. */
#ifndef H2PARK_FIELDCOPY_H
#define H2PARK_FIELDCOPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void copy16(char *dst, const char *src)
{
    uint64_t a, b;
    memcpy(&a, src, 8);
    memcpy(&b, src + 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + 8, &b, 8);
}

static inline void field_copy(char *dst, const char *src, size_t n)
{
    if (n <= 16) {
        if (n >= 8) {
            uint64_t a, b;
            memcpy(&a, src, 8);
            memcpy(&b, src + n - 8, 8);
            memcpy(dst, &a, 8);
            memcpy(dst + n - 8, &b, 8);
        } else if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, src, 4);
            memcpy(&b, src + n - 4, 4);
            memcpy(dst, &a, 4);
            memcpy(dst + n - 4, &b, 4);
        } else {
            for (size_t i = 0; i < n; i++)
                dst[i] = src[i];
        }
    } else if (n <= 32) {
        char tail[16];
        memcpy(tail, src + n - 16, 16);    /* both loads first: dst may be src's neighbour */
        copy16(dst, src);
        memcpy(dst + n - 16, tail, 16);
    } else {
        memcpy(dst, src, n);
    }
}

/* The eight bytes of w with A-Z made a-z, every other byte as it was. */
static inline uint64_t lower_word(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t low7 = w & ~high;
    uint64_t ge_a = low7 + ones * (0x80 - 'A');        /* high bit: byte >= 'A' (7 bits) */
    uint64_t gt_z = low7 + ones * (0x80 - 'Z' - 1);    /* high bit: byte > 'Z' */
    uint64_t upper = ge_a & ~gt_z & ~w & high;         /* and the byte is ASCII */
    return w | upper >> 2;                             /* 0x80 >> 2 == 0x20 */
}

/* Lower case is idempotent, so the last word may overlap the one before it. */
static inline void field_copy_lower(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    if (n >= 8) {
        uint64_t w, last;
        memcpy(&last, src + n - 8, 8);
        for (; i + 8 < n; i += 8) {
            memcpy(&w, src + i, 8);
            w = lower_word(w);
            memcpy(dst + i, &w, 8);
        }
        last = lower_word(last);
        memcpy(dst + n - 8, &last, 8);
        return;
    }
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[i] = (char)((unsigned)(ch - 'A') < 26u ? ch + ('a' - 'A') : ch);
    }
}

#endif
