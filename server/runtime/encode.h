/* A response body's compressor: one interface over zlib (gzip), libbrotli (br) and libzstd
 * (zstd), streaming - input in pieces, output appended to a buffer as it comes - with flush
 * points (encode.c). */
#ifndef H2PARK_ENCODE_H
#define H2PARK_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "runtime/acceptenc.h"

enum encode_op {
    ENC_CONTINUE,                  /* the library may keep what it took for later */
    ENC_FLUSH,                     /* all taken so far goes out, decodable now (a flush point) */
    ENC_FINISH,                    /* the body's end: the stream's trailer */
};

struct encoder;
/* A compressor for coding (not CODING_IDENTITY) at level; size_hint: the body's length,
 * or -1.  The bytes its library's state takes, while it has one, are counted in the
 * worker's n->compress_state_bytes (one writer, read by anyone); a state made while that
 * is at budget or more is a small one - the level lowered, the window 1 KiB: tens of KiB,
 * not hundreds - counted in n->compress_lowered.  NULL without memory. */
struct worker_counters;
struct encoder *encoder_new(enum coding coding, int level, int64_t size_hint, struct worker_counters *n,
                            uint64_t budget);
/* Compresses in[0..len) with op, appending what comes out to out: 0, or -1 without memory
 * (or a library's error: the stream is then unusable).  After ENC_FINISH the library's
 * state is gone: the encoder holds a few bytes until encoder_free. */
int encoder_put(struct encoder *e, const void *in, size_t len, enum encode_op op, struct buf *out);
enum coding encoder_coding(const struct encoder *e);
/* The levels each library takes (the configuration checks against them). */
void encoder_levels(enum coding coding, int *lo, int *hi);
void encoder_free(struct encoder *e);

#endif
