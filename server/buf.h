/* A growable byte buffer on the size-class heap.  It grows by sc_grow_cap (Go's policy,
 * rounded to what the allocator hands out anyway) and is freed outright rather than
 * kept, so an idle connection holds no buffer at all. */
#ifndef H2PARK_BUF_H
#define H2PARK_BUF_H

#include <stddef.h>

struct buf {
    char *data;
    size_t len, cap;
};

int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *p, size_t n);
void buf_free(struct buf *b);

#endif
