/* Unit tests of the upstream's HTTP/1.1 response parser (server/upstream/h1resp.c):
 * what it says of a head, fed whole and fed a byte at a time (every split a socket can
 * make), and the responses it must refuse however they are split - a bare CR anywhere
 * in the head or the chunked framing, which llhttp alone would take as a line's end -
 * while a CR in a body is the body's. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "upstream/upstream.h"

/* Feeds text in pieces of step bytes (0: whole), as pump does: what a call did not take
 * is passed again.  The first event other than UPSTREAM_MORE and UPSTREAM_BODY, or MORE. */
static int feed(struct upstream_response *p, const char *text, size_t step, size_t *body)
{
    size_t len = strlen(text), off = 0, end = 0;
    *body = 0;
    while (off < len) {
        if (end <= off)
            end = step && off + step < len ? off + step : len;
        size_t used;
        int ev = h1resp_parse(p, text + off, end - off, &used);
        off += used;
        if (ev == UPSTREAM_BODY)
            *body += p->body_len;
        else if (ev == UPSTREAM_ERROR || ev == UPSTREAM_END)
            return ev;
        else if (ev == UPSTREAM_MORE && off < end)
            return -1;             /* took less and found nothing: never */
    }
    size_t used;
    return h1resp_parse(p, "", 0, &used);
}

static int outcome(const char *text, size_t step, size_t *body, const char **error)
{
    struct upstream_response p;
    h1resp_init(&p, false, false, 65536);
    int ev = feed(&p, text, step, body);
    if (ev == UPSTREAM_HEAD || ev == UPSTREAM_MORE) {
        size_t used;
        for (int i = 0; i < 4 && ev != UPSTREAM_END && ev != UPSTREAM_ERROR; i++)
            ev = h1resp_parse(&p, "", 0, &used);
    }
    static char why[200];
    snprintf(why, sizeof why, "%s", p.error ? p.error : "");
    *error = why;
    h1resp_free(&p);
    return ev;
}

/* Every split of a good response ends it, its body whole. */
static void good_heads_every_split(void)
{
    const char *ok[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nX-A: a\r\nContent-Length: 5\r\n\r\nhe\rlo",   /* a CR in a body is the body's */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n\r\r\r\n3;a=b\r\nl\ro\r\n0\r\nX-T: t\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\rhel\r\r\n0\r\n\r\n",  /* CRs at a chunk's edges */
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        for (size_t step = 0; step < 8; step++) {
            size_t body;
            const char *error;
            int ev = outcome(ok[i], step, &body, &error);
            CHECKF(ev == UPSTREAM_END && body == 5, "response %zu, step %zu: event %d, body %zu, %s", i, step, ev, body,
                   error);
        }
    /* A body to the close, CRs and all: its end is the close's. */
    for (size_t step = 0; step < 8; step++) {
        struct upstream_response p;
        h1resp_init(&p, false, false, 65536);
        size_t body;
        int ev = feed(&p, "HTTP/1.1 200 OK\r\n\r\n\rhe\r\rlo\r", step, &body);
        if (ev == UPSTREAM_MORE)
            ev = h1resp_eof(&p);
        CHECKF(ev == UPSTREAM_END && body == 8, "to the close, step %zu: event %d, body %zu, %s", step, ev, body,
               p.error ? p.error : "");
        h1resp_free(&p);
    }
}

/* A CR not followed by LF, anywhere in a head (a 1xx's too), is refused however the
 * bytes are split - also when the CR ends one read and the next byte begins another. */
static void bare_cr_refused_every_split(void)
{
    const char *bad[] = {
        "HTTP/1.1 200 OK\rXTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: a\rContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\rX\r\nhello",
        "HTTP/1.1 100 Continue\rX\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\r\n\r\nhello",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        for (size_t step = 0; step < 8; step++) {
            size_t body;
            const char *error;
            int ev = outcome(bad[i], step, &body, &error);
            CHECKF(ev == UPSTREAM_ERROR && body == 0, "response %zu, step %zu: event %d, body %zu, '%s'", i, step, ev,
                   body, error);
        }
}

/* The same in the chunked framing, which llhttp alone takes in several places: a bare CR
 * in a chunk-size line, an extension, after a chunk's data, in the last chunk, in a
 * trailer or the end of the trailers - each an end of message that another parser
 * would place elsewhere, and the bytes behind it a response of the upstream's choosing.
 * The body before the bad byte may have gone on (it was the response's); the response
 * is refused, and never ends. */
static void bare_cr_in_chunks_refused_every_split(void)
{
    static const struct {
        const char *text;
        size_t body;               /* what goes on before the bad byte: the body's bytes before it */
    } bad[] = {
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\rX\r\nhello\r\n0\r\n\r\n", 0 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\rX0\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\rX\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\rX", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\rX\r\nhello\r\n0\r\n\r\n", 0 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a\rX\r\nhello\r\n0\r\n\r\n", 0 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0;a=\"b\rX\"\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0;a=b\rX\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: t\rX\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: t\r\n\rX", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T\rX: t\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\r\n0\r\n\r\n", 5 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\r\nhello\r\n0\r\n\r\n", 0 },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r"
          "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad", 5 },
    };
    size_t n = sizeof bad / sizeof *bad, let_through = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t step = 0; step < 12; step++) {
            size_t body;
            const char *error;
            int ev = outcome(bad[i].text, step, &body, &error);
            if (ev == UPSTREAM_ERROR && body <= bad[i].body)
                continue;
            printf("# response %zu, step %zu: event %d, body %zu, '%s'\n", i, step, ev, body, error);
            let_through++;
            break;                 /* one line for each response let through */
        }
    CHECKF(!let_through, "%zu of %zu responses not refused", let_through, n);
}

/* A chunk's data ends with CRLF, those two bytes and no others: llhttp alone skips
 * whichever two come, so "hello" LF "10" CRLF CRLF ends the body to it and begins a chunk
 * of 16 bytes to a parser that takes an LF alone for a line end. */
static void chunk_not_ended_by_crlf_refused_every_split(void)
{
    const char *bad[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXY0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n10\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n3\r\nllo\n\n0\r\n\r\n",
    };
    size_t n = sizeof bad / sizeof *bad, let_through = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t step = 0; step < 12; step++) {
            size_t body;
            const char *error;
            int ev = outcome(bad[i], step, &body, &error);
            if (ev == UPSTREAM_ERROR && body <= 5)
                continue;
            printf("# response %zu, step %zu: event %d, body %zu, '%s'\n", i, step, ev, body, error);
            let_through++;
            break;
        }
    CHECKF(!let_through, "%zu of %zu responses not refused", let_through, n);
}

/* A Content-Length among the trailers is not the head's: the response's length stays
 * unknown (chunked), and the end is the chunks'.  (Found by fuzz_upstream.) */
static void content_length_trailer_not_the_heads(void)
{
    const char *text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
                       "X-T: t\r\nContent-Length: 9\r\n\r\n";
    for (size_t step = 0; step < 8; step++) {
        struct upstream_response p;
        h1resp_init(&p, false, false, 65536);
        size_t body;
        int ev = feed(&p, text, step, &body);
        CHECKF(ev == UPSTREAM_END && body == 5 && p.length == -1, "step %zu: event %d, body %zu, length %lld, %s", step,
               ev, body, (long long)p.length, p.error ? p.error : "");
        h1resp_free(&p);
    }
}

/* LF alone as a chunk line's end: llhttp refuses it after a chunk size (and so a
 * response that uses it fails), takes it elsewhere; either way there is no CR for two
 * parsers to read differently.  Printed, so that a change of llhttp's shows. */
static void lf_alone_in_chunks(void)
{
    const char *text[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: t\n\r\n",
        "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n5\r\nhello\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof text / sizeof *text; i++) {
        size_t body;
        const char *error;
        int ev = outcome(text[i], 0, &body, &error);
        printf("# LF alone, response %zu: %s, body %zu %s\n", i, ev == UPSTREAM_END ? "taken" : "refused", body, error);
    }
}

int main(void)
{
    RUN(good_heads_every_split);
    RUN(bare_cr_refused_every_split);
    RUN(bare_cr_in_chunks_refused_every_split);
    RUN(chunk_not_ended_by_crlf_refused_every_split);
    RUN(content_length_trailer_not_the_heads);
    RUN(lf_alone_in_chunks);
    CHECK_DONE();
}
