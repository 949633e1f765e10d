/* The HTTP/1.1 client of an upstream exchange (upstream.h's struct upstream_client): the
 * neutral request head written as HTTP/1.1 text, the request body framed as the head said
 * (Content-Length, or the chunked coding), the response read through h1resp.c's parser,
 * and after a 101 the tunnel.
 *
 * One exchange at a time on a connection, both ways at once: an upstream may answer while
 * the body still comes (an echo, an early 413) and would stop reading it once its own
 * output is stuck, so step sends what it can and reads what there is in one pass.  When
 * the server stops taking the request (send_failed), what it said before is still read:
 * its answer, not the failed send, is what the client gets.
 *
 * Memory: the head goes out of the transport's own buffer (written there once, in one
 * allocation); one piece of body (BODY_PIECE) at a time goes up; one read buffer of
 * UPSTREAM_READ (ux->rx, which the runtime frees when the handler parks with it empty),
 * and the rest of a body of known length is read straight into the request's output
 * (req_write_room), never more than is left of it, so nothing past the response is taken
 * from the socket.  Writing to the client waits for it (req_write): a slow client slows
 * the upstream.
 *
 * The tunnel (after a 101, WebSocket): bytes both ways as they come with the same bounds,
 * its read buffer freed when empty as the handler parks, so an idle tunnel waits holding
 * none; its silence is bounded by the read timeout; the client's close goes up as a
 * half-close and the server has the last word.  Its connection is never pooled. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "scalloc.h"
#include "upstream/upstream.h"

#define UPSTREAM_READ (16u << 10)
#define BODY_PIECE (16u << 10)

#define PUT(b, literal) buf_append(b, literal, sizeof(literal) - 1)
static int put(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }

/* The head as HTTP/1.1 text after what out holds, in one reservation: the request line,
 * Host, the fields as they are, then the framing and the connection's fate. */
static int put_head(struct buf *out, const struct upstream_request *rq)
{
    size_t ml = strlen(rq->method), tl = strlen(rq->target), al = strlen(rq->authority);
    size_t size = ml + tl + al + 96 + (rq->upgrade ? strlen(rq->upgrade) : 0);
    for (uint32_t i = 0; i < rq->nfields; i++)
        size += rq->fields[i].nl + rq->fields[i].vl + 4;
    int rc = buf_reserve(out, size) || buf_append(out, rq->method, ml) || PUT(out, " ") ||
             buf_append(out, rq->target, tl) || PUT(out, " HTTP/1.1\r\nHost: ") || buf_append(out, rq->authority, al) ||
             PUT(out, "\r\n");
    for (uint32_t i = 0; i < rq->nfields && !rc; i++) {
        const struct upstream_field *f = &rq->fields[i];
        rc = buf_append(out, f->name, f->nl) || PUT(out, ": ") || buf_append(out, f->value, f->vl) || PUT(out, "\r\n");
    }
    if (rq->length >= 0) {
        char text[24];
        rc = rc || PUT(out, "Content-Length: ") || buf_append(out, text, u64_dec(text, (uint64_t)rq->length)) ||
             PUT(out, "\r\n");
    } else if (rq->length == UPSTREAM_BODY_STREAM) {
        rc = rc || PUT(out, "Transfer-Encoding: chunked\r\n");
    }
    if (rq->upgrade)
        rc = rc || PUT(out, "Connection: upgrade\r\nUpgrade: ") || put(out, rq->upgrade) || PUT(out, "\r\n");
    else if (rq->close)
        rc = rc || PUT(out, "Connection: close\r\n");
    return rc || PUT(out, "\r\n");
}

static int h1_submit(struct upstream_exchange *ux, const struct upstream_request *rq)
{
    struct transport *t = &ux->uc->t;
    h1resp_free(&ux->resp);
    h1resp_init(&ux->resp, rq->head, rq->upgrade != NULL, rq->head_max);
    ux->rx.len = ux->rx_off = 0;
    ux->body_open = rq->length > 0 || rq->length == UPSTREAM_BODY_STREAM;   /* after a 101: the tunnel's */
    ux->chunked = rq->length == UPSTREAM_BODY_STREAM;
    ux->request_sent = false;      /* (body_started stays: a body taken once is gone) */
    ux->send_failed = 0;
    if (!t->out.len)
        t->out_off = 0;
    return put_head(&t->out, rq);
}

/* The rest of the response is body of a known length, none of it read yet: it can be
 * read where it goes, into the response's output, rather than through rx and a copy. */
static bool body_to_output(const struct upstream_exchange *ux)
{
    const struct upstream_response *p = &ux->resp;
    return p->head_done && !p->complete && !p->upgraded && !p->chunked && !p->head_request && p->length > 0 &&
           p->parser.content_length > 0;
}

/* Reads at most what is left of such a body (nothing past the response is ever taken
 * there) into the response's output, which llhttp then counts, and makes it output.
 * The bytes read (*room: how many were asked), 0 for none now, -1 for the upstream's
 * close or a failure to read (errno), -2 with *why for anything else. */
static ssize_t read_body_into_output(struct upstream_exchange *ux, struct transport *t, size_t *room,
                                     enum upstream_failure *why)
{
    uint64_t left = ux->resp.parser.content_length;
    char *dst = req_write_room(ux->r, left < REQUEST_OUTPUT_WIDE ? (size_t)left : REQUEST_OUTPUT_WIDE, room);
    if (!dst) {
        *why = UF_NONE;              /* the client went away: the body is unfinished */
        return -2;
    }
    ssize_t n = transport_read(t, dst, *room);
    if (n <= 0)
        return n;
    size_t used;
    int ev = h1resp_parse(&ux->resp, dst, (size_t)n, &used);
    if (ev != UPSTREAM_BODY || ux->resp.body != dst || ux->resp.body_len != (size_t)n || used != (size_t)n) {
        *why = UF_INVALID;           /* (llhttp takes a length-framed body as it comes) */
        return -2;
    }
    if (req_write_commit(ux->r, (size_t)n)) {
        *why = UF_NONE;
        return -2;
    }
    return n;
}

/* The request up, what can go without waiting: the head, then body as it arrives, framed.
 * Whether any byte moved; -1 with *why for the client gone or no memory. */
static int send_request(struct upstream_exchange *ux, struct transport *t, enum upstream_failure *why)
{
    bool sent = false;
    for (;;) {
        if (!ux->send_failed && transport_pending(t)) {
            uint64_t moved;
            int f = transport_flush(t, &moved);
            sent |= moved > 0;
            if (f < 0) {
                /* What the upstream said before it stopped reading is still read. */
                ux->err = (uint8_t)errno;
                ux->send_failed = errno == ECONNRESET ? UF_RESET : UF_SEND;
                ux->body_open = false;
                buf_free(&t->out);
                t->out_off = 0;
            } else if (f > 0) {
                break;
            }
        }
        if (ux->send_failed || !ux->body_open)
            break;
        if (buf_reserve(&t->out, BODY_PIECE + 16)) {
            *why = UF_SEND;
            return -1;
        }
        size_t at = t->out.len;
        ssize_t n = req_try_body(ux->r, t->out.data + at + (ux->chunked ? 8 : 0), BODY_PIECE);
        if (n == REQ_AGAIN)
            break;
        if (n < 0) {
            *why = UF_NONE;          /* the client is gone */
            return -1;
        }
        ux->body_started |= n > 0;
        if (n == 0) {
            ux->body_open = false;
            if (ux->chunked)
                buf_append(&t->out, "0\r\n\r\n", 5);
        } else if (ux->chunked) {
            char size[24];
            snprintf(size, sizeof size, "%06zx\r\n", (size_t)n);
            memcpy(t->out.data + at, size, 8);
            t->out.len = at + 8 + (size_t)n;
            buf_append(&t->out, "\r\n", 2);
        } else {
            t->out.len = at + (size_t)n;
        }
    }
    if (!ux->body_open && !ux->send_failed && !transport_pending(t))
        ux->request_sent = true;
    return sent;
}

/* The server closed (n < 0 from a read, errno 0) or failed: the end of a body read to the
 * close, or the failure and its cause. */
static int closed(struct upstream_exchange *ux, enum upstream_failure *why)
{
    int e = errno;
    if (!e && h1resp_eof(&ux->resp) == UPSTREAM_END)
        return UPSTREAM_END;
    *why = !ux->resp.head_done && ux->send_failed ? (enum upstream_failure)ux->send_failed
           : e == ECONNRESET                      ? UF_RESET
                                                  : UF_CLOSED;
    if (*why != ux->send_failed)
        ux->err = (uint8_t)e;        /* (else the send's, kept when it failed) */
    return UPSTREAM_ERROR;
}

static PARKED_APART int h1_step(struct upstream_exchange *ux, upstream_head_fn *head, int *events,
                                enum upstream_failure *why)
{
    struct request *r = ux->r;
    struct transport *t = &ux->uc->t;
    int sent = send_request(ux, t, why);
    if (sent < 0)
        return UPSTREAM_ERROR;
    /* Just sent, with nothing read and waiting: the answer cannot be here yet (a read
     * would say EAGAIN, a system call per request); readiness says when it is. */
    bool try_read = !(sent && ux->rx.len == 0 && !transport_holds_input(t));
    for (;;) {
        size_t used;
        int ev = h1resp_parse(&ux->resp, ux->rx.data + ux->rx_off, ux->rx.len - ux->rx_off, &used);
        ux->rx_off += (uint32_t)used;
        if (ev == UPSTREAM_ERROR) {
            *why = UF_INVALID;
            return UPSTREAM_ERROR;
        }
        if (ev == UPSTREAM_END)
            return ev;
        if (ev == UPSTREAM_HEAD) {
            if (head(ux, why))
                return UPSTREAM_ERROR;
            continue;
        }
        if (ev == UPSTREAM_BODY) {
            if (req_write(r, ux->resp.body, ux->resp.body_len)) {
                *why = UF_NONE;      /* the client went away: the body is unfinished */
                return UPSTREAM_ERROR;
            }
            continue;
        }
        if (ux->rx_off == ux->rx.len)
            ux->rx.len = ux->rx_off = 0;
        if (!try_read)
            break;
        ssize_t n;
        size_t room;
        if (!ux->rx.len && body_to_output(ux)) {
            n = read_body_into_output(ux, t, &room, why);
            if (n < -1)
                return UPSTREAM_ERROR;
            if (n > 0) {
                try_read = !transport_drained(t, n, room);
                continue;
            }
        } else {
            if (buf_reserve(&ux->rx, UPSTREAM_READ)) {
                *why = UF_INVALID;
                return UPSTREAM_ERROR;
            }
            room = ux->rx.cap - ux->rx.len;
            n = transport_read(t, ux->rx.data + ux->rx.len, room);
            if (n > 0) {
                ux->rx.len += (size_t)n;
                try_read = !transport_drained(t, n, room);   /* a short read took all there was */
                continue;
            }
        }
        if (n < 0)
            return closed(ux, why);
        break;                       /* nothing more now */
    }
    bool pending = !ux->send_failed && transport_pending(t);
    *events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (ux->body_open && !pending ? REQ_BODY : 0);
    return UPSTREAM_MORE;
}

/* The client's bytes up, as they come: 1 if some were queued, 0 if none now, -1 (*why)
 * on a failure; *client_open false once the client half-closed. */
static int tunnel_up(struct upstream_exchange *ux, struct transport *t, bool *client_open, enum upstream_failure *why)
{
    if (buf_reserve(&t->out, BODY_PIECE)) {
        *why = UF_SEND;
        return -1;
    }
    ssize_t n = req_try_body(ux->r, t->out.data, BODY_PIECE);
    if (n > 0) {
        t->out.len = (size_t)n;
        return 1;
    }
    if (n == 0) {
        *client_open = false;
        shutdown(t->fd, SHUT_WR);
    } else if (n != REQ_AGAIN) {
        *why = UF_NONE;
        return -1;
    }
    if (!t->out.len)
        buf_free(&t->out);
    return 0;
}

static PARKED_APART int h1_tunnel(struct upstream_exchange *ux, enum upstream_failure *why)
{
    struct request *r = ux->r;
    struct transport *t = &ux->uc->t;
    bool client_open = true;
    for (;;) {
        if (ux->rx_off < ux->rx.len) {
            if (req_write(r, ux->rx.data + ux->rx_off, ux->rx.len - ux->rx_off)) {
                *why = UF_NONE;
                return -1;
            }
            ux->rx.len = ux->rx_off = 0;
        }
        if (transport_pending(t)) {
            uint64_t moved;
            if (transport_flush(t, &moved) < 0) {
                ux->err = (uint8_t)errno;
                *why = errno == ECONNRESET ? UF_RESET : UF_SEND;
                return -1;
            }
        }
        if (client_open && !transport_pending(t)) {
            int up = tunnel_up(ux, t, &client_open, why);
            if (up < 0)
                return -1;
            if (up > 0)
                continue;
        }
        ux->rx.len = ux->rx_off = 0;      /* all of it went to the client above */
        if (buf_reserve(&ux->rx, UPSTREAM_READ)) {
            *why = UF_INVALID;
            return -1;
        }
        ssize_t n = transport_read(t, ux->rx.data, ux->rx.cap);
        if (n > 0) {
            ux->rx.len = (size_t)n;
            continue;
        }
        /* (An empty buffer goes if the handler parks.) */
        if (n < 0) {
            if (!errno)
                return 0;
            ux->err = (uint8_t)errno;
            *why = errno == ECONNRESET ? UF_RESET : UF_CLOSED;
            return -1;
        }
        bool pending = transport_pending(t);
        int events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (client_open && !pending ? REQ_BODY : 0);
        int w = req_wait_io(r, &ux->uc->watch, events, pending ? ux->pc->send_timeout : ux->pc->read_timeout);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : pending ? UF_SEND_TIMEOUT : UF_READ_TIMEOUT;
            return -1;
        }
    }
}

/* Reused only after a complete exchange both ways with nothing more on the wire: bytes
 * after the response's end are an upstream answering twice, and would be the next
 * client's response. */
static bool h1_reusable(const struct upstream_exchange *ux)
{
    return ux->resp.keep_alive && ux->request_sent && ux->rx_off == ux->rx.len;
}

static const struct buf *h1_trailers(const struct upstream_exchange *ux, uint32_t *n)
{
    (void)ux;
    *n = 0;
    return NULL;                     /* h1resp.c reads a chunked body's trailers and drops them */
}

static void h1_end(struct upstream_exchange *ux) { (void)ux; }

const struct upstream_client upstream_h1_client = {
    .version = "1.1",
    .h2 = false,
    .open = NULL,
    .submit = h1_submit,
    .step = h1_step,
    .trailers = h1_trailers,
    .reusable = h1_reusable,
    .end = h1_end,
    .tunnel = h1_tunnel,
};
