/* Unit tests of the compressors (server/runtime/encode.c), checked with the libraries' own
 * decoders: for gzip, br and zstd, input in pieces of every size (0 bytes to 200 KiB) with
 * flush points between some, and at each flush point everything given so far decodes from
 * the output so far - what an event stream's client sees - then the whole body at the end;
 * no state made before the first input (HEAD), none kept after the end; every level the
 * configuration allows. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include "check.h"
#include "counters.h"
#include "runtime/encode.h"

/* A streaming decoder of each kind: decode(out so far) must give exactly the input so far. */
struct dec {
    enum coding coding;
    z_stream z;
    BrotliDecoderState *br;
    ZSTD_DStream *zs;
    struct buf got;
    size_t fed;                    /* of the compressed output */
};

static void dec_init(struct dec *d, enum coding c)
{
    memset(d, 0, sizeof *d);
    d->coding = c;
    if (c == CODING_GZIP)
        inflateInit2(&d->z, 15 + 16);
    else if (c == CODING_BR)
        d->br = BrotliDecoderCreateInstance(NULL, NULL, NULL);
    else
        d->zs = ZSTD_createDStream(), ZSTD_initDStream(d->zs);
}

static void dec_free(struct dec *d)
{
    if (d->coding == CODING_GZIP)
        inflateEnd(&d->z);
    else if (d->coding == CODING_BR)
        BrotliDecoderDestroyInstance(d->br);
    else
        ZSTD_freeDStream(d->zs);
    buf_free(&d->got);
}

/* Feeds the compressed bytes out[fed..len): 0, or -1 for a decoder's error. */
static int dec_feed(struct dec *d, const struct buf *out)
{
    const uint8_t *in = (const uint8_t *)out->data + d->fed;
    size_t avail = out->len - d->fed;
    d->fed = out->len;
    uint8_t tmp[65536];
    for (;;) {
        size_t made = 0;
        if (d->coding == CODING_GZIP) {
            d->z.next_in = (Bytef *)(uintptr_t)in;
            d->z.avail_in = (uInt)avail;
            d->z.next_out = tmp;
            d->z.avail_out = sizeof tmp;
            int rc = inflate(&d->z, Z_SYNC_FLUSH);
            if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
                return -1;
            made = sizeof tmp - d->z.avail_out;
            in = d->z.next_in;
            avail = d->z.avail_in;
        } else if (d->coding == CODING_BR) {
            size_t ao = sizeof tmp;
            uint8_t *no = tmp;
            if (BrotliDecoderDecompressStream(d->br, &avail, &in, &ao, &no, NULL) == BROTLI_DECODER_RESULT_ERROR)
                return -1;
            made = sizeof tmp - ao;
        } else {
            ZSTD_inBuffer ib = { in, avail, 0 };
            ZSTD_outBuffer ob = { tmp, sizeof tmp, 0 };
            if (ZSTD_isError(ZSTD_decompressStream(d->zs, &ob, &ib)))
                return -1;
            made = ob.pos;
            in += ib.pos;
            avail -= ib.pos;
        }
        if (made && buf_append(&d->got, tmp, made))
            return -1;
        if (!made && !avail)
            return 0;
    }
}

/* A whole compressed stream decodes to body[0..n). */
static bool decodes_to(enum coding c, const struct buf *out, const char *body, size_t n)
{
    struct dec d;
    dec_init(&d, c);
    bool ok = dec_feed(&d, out) == 0 && d.got.len == n && !memcmp(d.got.data, body, n);
    dec_free(&d);
    return ok;
}

static uint64_t rng = 47;
static uint32_t next(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

/* Text that compresses somewhat, like events of an API. */
static void text(char *p, size_t n)
{
    static const char *const w[] = { "{\"id\":", "\"user\":", "\"update\"", ",", "}", "\n", "alpha", "beta", "42" };
    size_t i = 0;
    while (i < n) {
        const char *s = w[next() % 9];
        size_t l = strlen(s);
        for (size_t k = 0; k < l && i < n; k++)
            p[i++] = s[k];
        if (next() % 7 == 0 && i < n)
            p[i++] = (char)('a' + next() % 26);
    }
}

static struct worker_counters wn;   /* what the encoders count */
#define live wn.compress_state_bytes

static void round_trip(enum coding c, int level, int pieces, size_t max_piece)
{
    struct encoder *e = encoder_new(c, level, -1, &wn, UINT64_MAX);
    CHECK(e);
    struct buf out = { 0 };
    struct dec d;
    dec_init(&d, c);
    size_t total = 0;
    char *all = malloc((size_t)pieces * max_piece + 1);
    for (int i = 0; i < pieces; i++) {
        size_t n = max_piece ? next() % (max_piece + 1) : 0;
        text(all + total, n);
        bool flush = next() % 3 == 0;
        CHECK(encoder_put(e, all + total, n, flush ? ENC_FLUSH : ENC_CONTINUE, &out) == 0);
        total += n;
        if (flush) {                /* a flush point: all of it decodes now */
            CHECK(dec_feed(&d, &out) == 0);
            CHECKF(d.got.len == total && (!total || !memcmp(d.got.data, all, total)), "%s: %zu decoded of %zu at a flush point",
                   coding_name[c], d.got.len, total);
        }
    }
    CHECKF(!pieces || !max_piece || live > 0, "%s: no state counted while compressing", coding_name[c]);
    CHECK(encoder_put(e, NULL, 0, ENC_FINISH, &out) == 0);
    CHECKF(live == 0, "%s: %llu bytes still counted after the end", coding_name[c], (unsigned long long)live);
    CHECK(encoder_put(e, "x", 1, ENC_CONTINUE, &out) == -1);   /* nothing after the end */
    CHECK(dec_feed(&d, &out) == 0);
    CHECKF(d.got.len == total && (!total || !memcmp(d.got.data, all, total)), "%s level %d: %zu decoded of %zu", coding_name[c],
           level, d.got.len, total);
    encoder_free(e);
    dec_free(&d);
    buf_free(&out);
    free(all);
}

static void every_coding_flush_points(void)
{
    for (enum coding c = CODING_GZIP; c < CODING_COUNT; c++) {
        round_trip(c, c == CODING_ZSTD ? 1 : 5, 60, 3000);
        if (check_failed_now)
            return;
    }
}

static void large_pieces(void)
{
    for (enum coding c = CODING_GZIP; c < CODING_COUNT; c++) {
        round_trip(c, 3, 6, 200000);
        if (check_failed_now)
            return;
    }
}

static void empty_bodies_and_empty_pieces(void)
{
    for (enum coding c = CODING_GZIP; c < CODING_COUNT; c++) {
        round_trip(c, 1, 0, 0);         /* no input at all: a valid empty stream */
        if (check_failed_now)
            return;
        round_trip(c, 1, 20, 0);        /* only empty pieces and flushes */
        if (check_failed_now)
            return;
    }
}

static void every_level(void)
{
    for (enum coding c = CODING_GZIP; c < CODING_COUNT; c++) {
        int lo, hi;
        encoder_levels(c, &lo, &hi);
        for (int l = lo; l <= hi && l <= 19; l++) {
            round_trip(c, l, 4, 2000);
            if (check_failed_now)
                return;
        }
    }
}

static void no_identity_encoder(void)
{
    CHECK(encoder_new(CODING_IDENTITY, 1, -1, &wn, UINT64_MAX) == NULL);
    CHECK(encoder_new(CODING_COUNT, 1, -1, &wn, UINT64_MAX) == NULL);
    /* An encoder given nothing (a HEAD response's) frees without having made a state. */
    struct encoder *e = encoder_new(CODING_BR, 5, 1000, &wn, UINT64_MAX);
    CHECK(e);
    struct buf out = { 0 };
    CHECK(encoder_put(e, NULL, 0, ENC_FLUSH, &out) == 0 && out.len == 0 && live == 0);
    encoder_free(e);
}

static void size_hint_exact_and_wrong(void)
{
    /* zstd is told the length: a body of that length decodes; gzip and br take it as a hint */
    for (enum coding c = CODING_GZIP; c < CODING_COUNT; c++) {
        char body[5000];
        text(body, sizeof body);
        struct encoder *e = encoder_new(c, 3, sizeof body, &wn, UINT64_MAX);
        struct buf out = { 0 };
        CHECK(encoder_put(e, body, 1000, ENC_FLUSH, &out) == 0);
        CHECK(encoder_put(e, body + 1000, sizeof body - 1000, ENC_FINISH, &out) == 0);
        CHECK(decodes_to(c, &out, body, sizeof body));
        encoder_free(e);
        buf_free(&out);
    }
}

/* At the budget, a state is small - and its stream still decodes at every flush point. */
static void small_state_at_budget(void)
{
    for (enum coding c = CODING_GZIP; c < CODING_COUNT; c++) {
        char body[20000];
        text(body, sizeof body);
        struct encoder *big = encoder_new(c, c == CODING_ZSTD ? 1 : 5, -1, &wn, UINT64_MAX);
        struct buf out = { 0 };
        CHECK(encoder_put(big, body, 100, ENC_FLUSH, &out) == 0);
        uint64_t full = live;
        uint64_t lowered = wn.compress_lowered;
        struct encoder *e = encoder_new(c, 9, -1, &wn, 1);     /* the budget is used */
        struct buf o2 = { 0 };
        CHECK(encoder_put(e, body, 1000, ENC_FLUSH, &o2) == 0);
        uint64_t small = live - full;
        CHECKF(small * 4 < full && small < 96 * 1024, "%s: %llu bytes small, %llu full", coding_name[c],
               (unsigned long long)small, (unsigned long long)full);
        CHECK(wn.compress_lowered == lowered + 1);
        printf("# %s: state %llu bytes, small %llu\n", coding_name[c], (unsigned long long)full,
               (unsigned long long)small);
        CHECK(encoder_put(e, body + 1000, sizeof body - 1000, ENC_FINISH, &o2) == 0);
        CHECK(decodes_to(c, &o2, body, sizeof body));
        encoder_free(e);
        encoder_free(big);
        CHECK(live == 0);
        buf_free(&out);
        buf_free(&o2);
    }
}

int main(void)
{
    RUN(small_state_at_budget);
    RUN(every_coding_flush_points);
    RUN(large_pieces);
    RUN(empty_bodies_and_empty_pieces);
    RUN(every_level);
    RUN(no_identity_encoder);
    RUN(size_hint_exact_and_wrong);
    CHECK_DONE();
}
