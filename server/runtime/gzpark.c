/* A gzip stream that keeps almost nothing between its pieces: for a compressed event
 * stream that waits, parked, for its next event.
 *
 * A deflate stream may be continued by another compressor after a flush point: a
 * Z_SYNC_FLUSH ends on a byte boundary after an empty stored block, and the next raw
 * deflate output simply follows it (pigz's technique).  What the continuing compressor
 * lacks is the history its matches may refer back to: it is given the last GZPARK_HISTORY
 * bytes of the stream's input as its dictionary (deflateSetDictionary) - the client's
 * decompressor holds all of it in its window, so every match is decodable.  The gzip
 * trailer needs only the running CRC-32 and length.
 *
 * So between pieces a stream keeps its CRC, its length and that history - compressed on
 * its own (about 0.4 of its size for JSON events), never more than GZPARK_PACKED_MAX
 * bytes: a smaller history is kept when it does not fit.  The compressors themselves (a
 * small deflate state: a 4 KiB window, which reaches the history and an event, and a
 * small hash) belong to the worker (struct gzpark_work) and are reset for each piece, so
 * a thousand waiting streams cost a thousand small records, not a thousand compressors.
 *
 * Measured on 60 JSON events of 227-1,422 bytes (tests/test_gzpark.c prints it): the
 * stream is within 10% of what one compressor kept for the whole stream makes, where
 * compressing each event on its own makes twice as much. */
#define _GNU_SOURCE
#include <string.h>
#include <zlib.h>

#include "runtime/gzpark.h"
#include "scalloc.h"

#define WINDOW_BITS 12             /* 4 KiB: the history and an event's matches */
#define MEM_LEVEL 6

struct gzpark_work {
    z_stream piece;                /* raw deflate of a piece, dictionary set */
    z_stream pack;                 /* raw deflate of a history to keep */
    z_stream unpack;               /* raw inflate of a kept history */
    int level;
    unsigned char hist[GZPARK_HISTORY * 2];
};

static voidpf zalloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return sc_calloc(items, size);
}
static void zfree(voidpf opaque, voidpf p)
{
    (void)opaque;
    sc_free(p);
}

struct gzpark_work *gzpark_work_new(int level)
{
    struct gzpark_work *w = sc_calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->level = level;
    w->piece.zalloc = w->pack.zalloc = w->unpack.zalloc = zalloc;
    w->piece.zfree = w->pack.zfree = w->unpack.zfree = zfree;
    bool piece = deflateInit2(&w->piece, level, Z_DEFLATED, -WINDOW_BITS, MEM_LEVEL, Z_DEFAULT_STRATEGY) == Z_OK;
    bool pack = deflateInit2(&w->pack, 9, Z_DEFLATED, -WINDOW_BITS, MEM_LEVEL, Z_DEFAULT_STRATEGY) == Z_OK;
    bool unpack = inflateInit2(&w->unpack, -15) == Z_OK;
    if (piece && pack && unpack)
        return w;
    if (piece)
        deflateEnd(&w->piece);
    if (pack)
        deflateEnd(&w->pack);
    if (unpack)
        inflateEnd(&w->unpack);
    sc_free(w);
    return NULL;
}

void gzpark_work_free(struct gzpark_work *w)
{
    if (!w)
        return;
    deflateEnd(&w->piece);
    deflateEnd(&w->pack);
    inflateEnd(&w->unpack);
    sc_free(w);
}

/* The stream's kept history into w->hist: its length, or -1 if it does not inflate. */
static long unpack_history(struct gzpark_work *w, const struct gzpark *s)
{
    if (!s->packed_len)
        return 0;
    inflateReset(&w->unpack);
    w->unpack.next_in = s->packed;
    w->unpack.avail_in = s->packed_len;
    w->unpack.next_out = w->hist;
    w->unpack.avail_out = GZPARK_HISTORY;
    int rc = inflate(&w->unpack, Z_SYNC_FLUSH);
    if ((rc != Z_OK && rc != Z_STREAM_END) || w->unpack.avail_in)
        return -1;
    return (long)(GZPARK_HISTORY - w->unpack.avail_out);
}

/* Keeps the last bytes of hist[0..len) (as many as fit GZPARK_PACKED_MAX compressed). */
static int pack_history(struct gzpark_work *w, struct gzpark *s, const unsigned char *hist, size_t len)
{
    unsigned char out[GZPARK_PACKED_MAX + 64];
    for (size_t keep = len < GZPARK_HISTORY ? len : GZPARK_HISTORY; keep; keep /= 2) {
        deflateReset(&w->pack);
        w->pack.next_in = (unsigned char *)hist + len - keep;
        w->pack.avail_in = (uInt)keep;
        w->pack.next_out = out;
        w->pack.avail_out = sizeof out;
        if (deflate(&w->pack, Z_SYNC_FLUSH) != Z_OK || w->pack.avail_in || !w->pack.avail_out)
            continue;
        size_t n = sizeof out - w->pack.avail_out;
        if (n > GZPARK_PACKED_MAX)
            continue;
        unsigned char *p = n > s->packed_cap ? sc_malloc(n) : s->packed;
        if (!p)
            return -1;
        if (p != s->packed) {
            sc_free(s->packed);
            s->packed = p;
            s->packed_cap = (uint16_t)n;
        }
        memcpy(p, out, n);
        s->packed_len = (uint16_t)n;
        return 0;
    }
    s->packed_len = 0;             /* nothing kept: the next piece starts afresh */
    return 0;
}

static int append(struct buf *out, const void *p, size_t n)
{
    if (buf_reserve(out, n))
        return -1;
    memcpy(out->data + out->len, p, n);
    out->len += n;
    return 0;
}

int gzpark_piece(struct gzpark_work *w, struct gzpark *s, const void *in, size_t len, bool last, struct buf *out)
{
    if (s->done)
        return -1;
    if (!s->started) {
        static const unsigned char header[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };   /* no name, no time; Unix */
        if (append(out, header, sizeof header))
            return -1;
        s->started = true;
        s->crc = (uint32_t)crc32(0, NULL, 0);
    }
    long hl = unpack_history(w, s);
    if (hl < 0)
        return -1;
    deflateReset(&w->piece);
    if (hl && deflateSetDictionary(&w->piece, w->hist, (uInt)hl) != Z_OK)
        return -1;
    w->piece.next_in = (unsigned char *)in;
    w->piece.avail_in = (uInt)len;
    int flush = last ? Z_FINISH : Z_SYNC_FLUSH;
    for (;;) {
        if (buf_reserve(out, len / 2 + 64))
            return -1;
        w->piece.next_out = (unsigned char *)out->data + out->len;
        w->piece.avail_out = (uInt)(out->cap - out->len);
        int rc = deflate(&w->piece, flush);
        out->len = out->cap - w->piece.avail_out;
        if (rc == Z_STREAM_END || (rc == Z_OK && w->piece.avail_out && !w->piece.avail_in && !last))
            break;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return -1;
    }
    s->crc = (uint32_t)crc32(s->crc, in, (uInt)len);
    s->isize += (uint32_t)len;     /* (mod 2^32, as RFC 1952 has it) */
    if (last) {
        unsigned char t[8];
        for (int i = 0; i < 4; i++) {
            t[i] = (unsigned char)(s->crc >> (8 * i));
            t[4 + i] = (unsigned char)(s->isize >> (8 * i));
        }
        s->done = true;
        gzpark_free(s);
        return append(out, t, sizeof t);
    }
    /* The next piece's history: the end of this one's and what it took. */
    const unsigned char *src = in;
    if (len >= GZPARK_HISTORY)
        return pack_history(w, s, src + len - GZPARK_HISTORY, GZPARK_HISTORY);
    memcpy(w->hist + hl, src, len);
    return pack_history(w, s, w->hist, (size_t)hl + len);
}

void gzpark_free(struct gzpark *s)
{
    sc_free(s->packed);
    s->packed = NULL;
    s->packed_len = s->packed_cap = 0;
}
