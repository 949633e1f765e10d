/* The cleartext port's first protocol: its first bytes say which one follows.
 *
 * Anything that begins like the HTTP/2 preface ("PRI ", a method HTTP/1.1 reserves for
 * it) is HTTP/2's to judge once the 24 bytes are in: a bad preface then gets
 * GOAWAY(PROTOCOL_ERROR) from nghttp2 (RFC 9113 section 3.4).  Anything else is HTTP/1.1
 * (which may still ask to upgrade to h2c).  The bytes read so far wait in conn->in and
 * are handed to the chosen protocol whole. */
#include <string.h>

#include "core/conn.h"
#include "proto/h1.h"
#include "proto/detect.h"
#include "proto/h2.h"

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof preface - 1)
#define PRI_LEN 4

static int detect_start(struct conn *c)
{
    (void)c;
    return 0;
}

static int detect_feed(struct conn *c, const char *data, size_t len)
{
    if (!len)
        return -1;                    /* gone before saying anything */
    if (buf_append(&c->in, data, len))
        return -1;
    size_t n = c->in.len < PRI_LEN ? c->in.len : PRI_LEN;
    const struct conn_proto *p = &h1_proto;
    if (!memcmp(c->in.data, preface, n)) {
        if (c->in.len < PREFACE_LEN)
            return 0;                 /* so far so good */
        p = &h2_proto;
    }
    struct buf in = c->in;
    c->in = (struct buf){ 0 };
    int rc = conn_start_proto(c, p) ? -1 : c->proto->feed(c, in.data, in.len);
    buf_free(&in);
    return rc;
}

static int detect_send(struct conn *c)
{
    (void)c;
    return 0;
}

static bool always(const struct conn *c)
{
    (void)c;
    return true;
}

static bool never(const struct conn *c)
{
    (void)c;
    return false;
}

static bool detect_timeout(struct conn *c, int kind)
{
    (void)c, (void)kind;
    return true;                      /* nothing to say to a peer that said nothing */
}

static void detect_shutdown(struct conn *c) { conn_set_state(c, CONN_CLOSING); }

static bool detect_finished(const struct conn *c) { return c->peer_eof || c->state == CONN_CLOSING; }

const struct conn_proto detect_proto = {
    .name = "detect", .start = detect_start, .feed = detect_feed, .send = detect_send, .want_read = always,
    .want_write = never, .finished = detect_finished, .timeout = detect_timeout, .shutdown = detect_shutdown,
};
