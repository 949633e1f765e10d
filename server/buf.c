/* A growable byte buffer on the size-class heap.  It grows by sc_grow_cap (Go's policy,
 * rounded to what the allocator hands out anyway) and is freed outright rather than
 * kept, so an idle connection holds no buffer at all. */
#include <string.h>

#include "buf.h"
#include "scalloc.h"

int buf_reserve(struct buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t need = b->len + extra;
    if (need < b->len)
        return -1;
    size_t cap = sc_grow_cap(b->cap, need, 1);
    char *p = sc_realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = sc_usable_size(p);
    return 0;
}

void buf_fit(struct buf *b)
{
    if (!b->len) {
        buf_free(b);
        return;
    }
    if (sc_roundup(b->len) >= b->cap)
        return;
    char *p = sc_realloc(b->data, b->len);
    if (!p)
        return;
    b->data = p;
    b->cap = sc_usable_size(p);
}

void buf_free(struct buf *b)
{
    if (b->data)                /* most buffers freed are ones never allocated */
        sc_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
