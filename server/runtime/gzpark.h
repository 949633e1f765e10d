/* A gzip stream compressed piece by piece that keeps a few bytes and a small compressed
 * history between pieces (gzpark.c): a compressed event stream that parks. */
#ifndef H2PARK_GZPARK_H
#define H2PARK_GZPARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define GZPARK_HISTORY 2048        /* input bytes the next piece may refer back to */
#define GZPARK_PACKED_MAX 896      /* at most this kept for them (a size class of the heap) */

/* A stream's state between pieces: zeroed to begin. */
struct gzpark {
    uint32_t crc, isize;
    uint8_t *packed;               /* the history, raw-deflated on its own */
    uint16_t packed_len, packed_cap;
    bool started, done;
};

/* A worker's compressors, reset for every piece: level is gzip's (1..9). */
struct gzpark_work;
struct gzpark_work *gzpark_work_new(int level);
void gzpark_work_free(struct gzpark_work *w);

/* Compresses in[0..len) as s's next piece, appending to out (the gzip header before the
 * first): flushed so that the client can decode all of it now, or, with last, the stream's
 * end and trailer (s then holds nothing).  0, or -1 without memory or on a library error
 * (the stream is then unusable). */
int gzpark_piece(struct gzpark_work *w, struct gzpark *s, const void *in, size_t len, bool last, struct buf *out);
/* What s holds, given back (a stream abandoned before its last piece). */
void gzpark_free(struct gzpark *s);

#endif
