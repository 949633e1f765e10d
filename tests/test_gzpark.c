/* Unit tests of the gzip stream that parks between its pieces (server/runtime/gzpark.c),
 * decoded by zlib's own gunzip as a client's would be: every piece decodes whole as soon as
 * it arrives (a server-sent event is not held back), the stream ends with a valid trailer
 * (CRC-32 and length checked by zlib), what a stream keeps between pieces stays within its
 * bound, and on a realistic event stream - 60 JSON events of 200 to 1,500 bytes - the
 * result is within 10% of one compressor kept for the whole stream (each event compressed
 * on its own is about twice as large: the figures are printed).  Hostile ends: empty
 * pieces, a piece larger than the history, a single piece that is also the last, a piece
 * after the last. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "check.h"
#include "runtime/gzpark.h"

#define EVENTS 60
static char events[EVENTS][2048];
static size_t event_len[EVENTS];

static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned next(unsigned n)
{
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (unsigned)((rng >> 33) % n);
}

/* Server-sent events carrying JSON quote batches: repetitive keys, varying numbers. */
static void make_events(void)
{
    static const char *const sym[] = { "AAPL", "MSFT", "GOOG", "AMZN", "TSLA", "NVDA", "META", "IBM", "ORCL", "INTC" };
    static const char *const ex[] = { "XNAS", "XNYS", "BATS" };
    for (int i = 0; i < EVENTS; i++) {
        char *p = events[i];
        int n = sprintf(p, "id: %d\nevent: quotes\ndata: {\"id\": %d, \"type\": \"quote_batch\", \"ts\": %d, "
                           "\"source\": \"feed-eu-1\", \"quotes\": [", 1000 + i, 1000 + i, 1733450000 + i);
        unsigned q = 1 + next(12);
        for (unsigned k = 0; k < q; k++)
            n += sprintf(p + n, "%s{\"symbol\": \"%s\", \"bid\": %u.%02u, \"ask\": %u.%02u, \"volume\": %u, "
                                "\"exchange\": \"%s\", \"flags\": [\"regular\"]}", k ? ", " : "", sym[next(10)],
                         10 + next(890), next(100), 10 + next(890), next(100), 100 + next(99900), ex[next(3)]);
        n += sprintf(p + n, "]}\n\n");
        event_len[i] = (size_t)n;
    }
}

/* A client's gunzip, fed as the bytes come. */
struct client {
    z_stream z;
    char out[1 << 18];
    size_t got;
    int rc;
};
static void client_init(struct client *c)
{
    memset(c, 0, sizeof *c);
    inflateInit2(&c->z, 15 + 16);
}
static void client_feed(struct client *c, const char *p, size_t n)
{
    c->z.next_in = (unsigned char *)p;
    c->z.avail_in = (uInt)n;
    c->z.next_out = (unsigned char *)c->out + c->got;
    c->z.avail_out = (uInt)(sizeof c->out - c->got);
    c->rc = inflate(&c->z, Z_SYNC_FLUSH);
    c->got = sizeof c->out - c->z.avail_out;
}

static void events_decode_as_they_come(void)
{
    make_events();
    struct gzpark_work *w = gzpark_work_new(5);
    CHECK(w);
    struct gzpark s = { 0 };
    struct buf out = { 0 };
    struct client c;
    client_init(&c);
    size_t raw = 0, kept_max = 0;
    for (int i = 0; i < EVENTS; i++) {
        size_t before = out.len, seen = c.got;
        CHECK(gzpark_piece(w, &s, events[i], event_len[i], false, &out) == 0);
        CHECK(out.len > before);
        client_feed(&c, out.data + before, out.len - before);
        CHECK(c.rc == Z_OK);
        CHECKF(c.got - seen == event_len[i] && !memcmp(c.out + seen, events[i], event_len[i]),
               "event %d: %zu of %zu bytes decoded at once", i, c.got - seen, event_len[i]);
        CHECK(s.packed_len <= GZPARK_PACKED_MAX && s.packed_cap <= GZPARK_PACKED_MAX);
        if (s.packed_cap > kept_max)
            kept_max = s.packed_cap;
        raw += event_len[i];
    }
    size_t before = out.len;
    CHECK(gzpark_piece(w, &s, "", 0, true, &out) == 0);
    CHECK(!s.packed && s.done);
    client_feed(&c, out.data + before, out.len - before);
    CHECKF(c.rc == Z_STREAM_END, "inflate says %d at the trailer", c.rc);
    CHECK(c.got == raw);
    CHECK(gzpark_piece(w, &s, "x", 1, false, &out) == -1);   /* after the last */

    /* The same stream by one compressor kept throughout, and event by event alone. */
    size_t whole = 0, alone = 0;
    z_stream z = { 0 };
    deflateInit2(&z, 5, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    static unsigned char tmp[1 << 16];
    for (int i = 0; i < EVENTS; i++) {
        z.next_in = (unsigned char *)events[i];
        z.avail_in = (uInt)event_len[i];
        z.next_out = tmp;
        z.avail_out = sizeof tmp;
        deflate(&z, i == EVENTS - 1 ? Z_FINISH : Z_SYNC_FLUSH);
        whole += sizeof tmp - z.avail_out;
        z_stream y = { 0 };
        deflateInit2(&y, 5, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        y.next_in = (unsigned char *)events[i];
        y.avail_in = (uInt)event_len[i];
        y.next_out = tmp;
        y.avail_out = sizeof tmp;
        deflate(&y, Z_SYNC_FLUSH);
        alone += sizeof tmp - y.avail_out;
        deflateEnd(&y);
    }
    deflateEnd(&z);
    printf("# %d events, %zu bytes: parked between events %zu (%.3f, kept at most %zu bytes), one compressor "
           "kept %zu (%.3f), each alone %zu (%.3f)\n", EVENTS, raw, out.len, (double)out.len / raw, kept_max, whole,
           (double)whole / raw, alone, (double)alone / raw);
    CHECKF(out.len <= whole * 11 / 10, "%zu against %zu kept throughout", out.len, whole);
    inflateEnd(&c.z);
    buf_free(&out);
    gzpark_work_free(w);
}

static void odd_pieces(void)
{
    struct gzpark_work *w = gzpark_work_new(9);
    CHECK(w);
    static char big[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)("abcdefghij"[next(10)] + (i % 7 == 0));
    const struct {
        const char *p;
        size_t n;
    } pieces[] = { { "", 0 }, { big, sizeof big }, { "", 0 }, { "tail\n", 5 }, { big, 3000 } };
    struct gzpark s = { 0 };
    struct buf out = { 0 };
    struct client c;
    client_init(&c);
    size_t want = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        size_t before = out.len, seen = c.got;
        CHECK(gzpark_piece(w, &s, pieces[i].p, pieces[i].n, false, &out) == 0);
        client_feed(&c, out.data + before, out.len - before);
        CHECK(c.rc == Z_OK || (c.rc == Z_BUF_ERROR && !pieces[i].n));
        CHECK(c.got - seen == pieces[i].n && !memcmp(c.out + seen, pieces[i].p, pieces[i].n));
        CHECK(s.packed_len <= GZPARK_PACKED_MAX);
        want += pieces[i].n;
        c.got = 0;                 /* (the test's buffer, not the stream) */
    }
    size_t before = out.len;
    CHECK(gzpark_piece(w, &s, "end", 3, true, &out) == 0);
    client_feed(&c, out.data + before, out.len - before);
    CHECK(c.rc == Z_STREAM_END && c.got == 3 && !memcmp(c.out, "end", 3));
    CHECK(c.z.total_out == want + 3);
    inflateEnd(&c.z);
    buf_free(&out);

    /* One piece that is also the last: a whole gzip member. */
    struct gzpark one = { 0 };
    struct buf o = { 0 };
    CHECK(gzpark_piece(w, &one, "hello\n", 6, true, &o) == 0);
    char dec[16];
    uLongf dl = sizeof dec;
    z_stream z = { 0 };
    inflateInit2(&z, 15 + 16);
    z.next_in = (unsigned char *)o.data;
    z.avail_in = (uInt)o.len;
    z.next_out = (unsigned char *)dec;
    z.avail_out = (uInt)dl;
    CHECK(inflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out == 6 && !memcmp(dec, "hello\n", 6) && !z.avail_in);
    inflateEnd(&z);
    buf_free(&o);
    /* Abandoned before its end: what it kept goes back. */
    struct gzpark gone = { 0 };
    struct buf g = { 0 };
    CHECK(gzpark_piece(w, &gone, big, 5000, false, &g) == 0 && gone.packed);
    gzpark_free(&gone);
    CHECK(!gone.packed && !gone.packed_len);
    buf_free(&g);
    gzpark_work_free(w);
}

int main(void)
{
    RUN(events_decode_as_they_come);
    RUN(odd_pieces);
    CHECK_DONE();
}
