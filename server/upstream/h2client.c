/* The HTTP/2 client of an upstream exchange (upstream.h's struct upstream_client): an
 * upstream spoken to in HTTP/2 - with prior knowledge (h2c, RFC 9113 3.3), or over TLS
 * once ALPN chose h2 (tls.c checks it) - with the client side of nghttp2
 * (nghttp2_session_client_new3), for gRPC and any HTTP/2 application server.  The
 * transport hides which: only :scheme differs.  The proxy's neutral request head becomes
 * HEADERS (the pseudo-headers, names lowered), its body DATA frames as the window lets
 * it go; the response's head and trailers are read into the exchange, its DATA straight
 * into the request's output.
 *
 * One request in flight per connection, as nginx's grpc_pass: the connection's session
 * carries one stream at a time, so an exchange is the connection's, and the pool, the
 * health and the balancing are the HTTP/1.1 path's unchanged.  Between exchanges the
 * connection is pooled and parked like an HTTP/1.1 one - its socket, struct upstream_conn
 * and the session (HPACK tables and settings live in it; a new session would be a new
 * connection) - with no coroutine and no read buffer; the pages of nghttp2's 16 KiB frame
 * buffer, which holds nothing between frames, are given back while it waits.  What the
 * server said meanwhile (SETTINGS, PING, WINDOW_UPDATE, GOAWAY) is read when the
 * connection is taken (h2up_idle_ok): a GOAWAY, a close or a protocol error sends it
 * away instead.
 *
 * Invariants, for every callback of nghttp2 (each is an input path: the server chooses
 * which run and when):
 * - nghttp2 runs only inside h2_step and h2up_idle_ok, on the handler's coroutine, and
 *   never waits there: the request body is taken with req_try_body (NGHTTP2_ERR_DEFERRED
 *   when none is there, nghttp2_session_resume_data once there is), a DATA piece stops
 *   nghttp2_session_mem_recv (NGHTTP2_ERR_PAUSE) and goes to the client outside it.
 * - Callbacks act only on the exchange's stream (x->id); anything else (PUSH_PROMISE is
 *   refused by SETTINGS_ENABLE_PUSH 0, so nghttp2 treats one as a connection error)
 *   leaves the exchange alone.  While no exchange runs (idle), x->id is 0.
 * - The response head is at most head_max bytes and REQ_RESPONSE_FIELDS_MAX fields
 *   (respond refuses more); trailers are bounded the same way.
 * - Memory per exchange: one read buffer of H2UP_READ bytes, freed when it empties; what
 *   nghttp2 queues to send is taken only while the transport holds less than H2UP_OUT_HIGH,
 *   so a server that stops reading stops the request body (and the client's window).
 * - A connection is reusable only after a stream that both sides ended, closed with
 *   NO_ERROR, with no GOAWAY, no session error and nothing left unsent. */
#define _GNU_SOURCE
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h2mem.h"
#include "scalloc.h"
#include "upstream/upstream.h"

#define H2UP_READ (16u << 10)
#define FIELDS_NV_MAX 160          /* the request's fields proxy_pass passes on, and its own */
#define H2UP_OUT_HIGH (64u << 10)

struct h2up {
    nghttp2_session *session;
    struct h2mem mem;              /* the session's memory: what goes back while pooled (h2mem.c) */
    /* The exchange in flight, or id 0. */
    struct upstream_exchange *ux;  /* its response's head goes into ux->resp, its body into ux->r */
    int32_t id;
    uint32_t close_code;           /* RST_STREAM's, or GOAWAY's for a stream it refused */
    struct buf rx;                 /* read from the server, not yet given to nghttp2 */
    size_t rx_off;
    const uint8_t *chunk;          /* a DATA piece nghttp2 paused on (in rx) */
    size_t chunk_len;
    struct buf trailers;           /* name\0value\0 pairs */
    uint32_t head_bytes, ntrailers;
    bool head_ready, head_passed, ended, closed, body_sent, deferred, client_gone, in_trailers, too_big;
    bool paused;                   /* nghttp2 stopped at a DATA piece: the frame's end is processed next call */
    bool goaway, broken;           /* the connection is not to be reused */
    char error[128];               /* why the exchange failed (copied to resp->error) */
};

/* ---- callbacks ---- */

static void failed(struct h2up *h, const char *fmt, const char *what)
{
    if (!h->error[0])
        snprintf(h->error, sizeof h->error, fmt, what);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    struct h2up *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != h->id || !h->id)
        return 0;
    /* A HEADERS frame after the final head is the trailer section. */
    h->in_trailers = h->head_ready;
    return 0;
}

/* name\0value\0 after what b holds. */
static int put_pair(struct buf *b, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl)
{
    if (buf_reserve(b, nl + vl + 2))
        return -1;
    char *d = b->data + b->len;
    memcpy(d, name, nl);
    d[nl] = 0;
    memcpy(d + nl + 1, value, vl);
    d[nl + 1 + vl] = 0;
    b->len += nl + vl + 2;
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)s, (void)flags;
    struct h2up *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != h->id || !h->id)
        return 0;
    struct upstream_response *p = &h->ux->resp;
    h->head_bytes += (uint32_t)(nl + vl + 32);
    if (h->head_bytes > p->head_max) {
        h->too_big = true;
        failed(h, "upstream sent too big a %s", h->in_trailers ? "trailer section" : "header");
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;   /* the stream is reset */
    }
    if (h->in_trailers) {
        if (name[0] == ':')
            return 0;              /* nghttp2 refuses pseudo-headers in trailers already */
        if (put_pair(&h->trailers, name, nl, value, vl))
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        h->ntrailers++;
        return 0;
    }
    if (nl == 7 && !memcmp(name, ":status", 7)) {
        /* nghttp2 has checked it is three digits (RFC 9113 8.3.2). */
        p->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
        return 0;
    }
    if (name[0] == ':')
        return 0;
    if (nl == 14 && !memcmp(name, "content-length", 14)) {
        int64_t n = 0;
        for (size_t i = 0; i < vl && n < (INT64_MAX - 9) / 10; i++)
            n = n * 10 + (value[i] - '0');   /* nghttp2 has checked the digits and the one value */
        p->length = n;
    }
    if (put_pair(&p->fields, name, nl, value, vl))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    p->nfields++;
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    struct h2up *h = ud;
    if (f->hd.type == NGHTTP2_GOAWAY) {
        /* The stream may still finish if the server took it; the connection is done. */
        h->goaway = true;
        if (h->id && f->goaway.last_stream_id < h->id)
            failed(h, "upstream sent GOAWAY (%s) before taking the request",
                   nghttp2_http2_strerror(f->goaway.error_code));
        return 0;
    }
    if (!h->id || f->hd.stream_id != h->id)
        return 0;
    bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (f->hd.type == NGHTTP2_HEADERS && !h->in_trailers && !h->head_ready) {
        struct upstream_response *p = &h->ux->resp;
        if (p->status < 200) {       /* 1xx: dropped, the real head follows (nghttp2 checks it does) */
            p->fields.len = 0;
            p->nfields = 0;
            p->length = -1;
            p->status = 0;
            h->head_bytes = 0;
            return 0;
        }
        h->head_ready = p->head_done = true;
        p->complete = p->head_ends = end;   /* a head that ends the stream: no body (gRPC's trailers-only) */
    }
    if (end && (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA))
        h->ended = true;
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)s, (void)flags;
    struct h2up *h = ud;
    if (id != h->id || !h->id || !len)
        return 0;
    h->chunk = data;
    h->chunk_len = len;
    h->paused = true;
    return NGHTTP2_ERR_PAUSE;        /* passed on to the client outside nghttp2 (h2_step) */
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)s;
    struct h2up *h = ud;
    if (id != h->id || !h->id)
        return 0;
    h->closed = true;
    h->close_code = code;
    if (code != NGHTTP2_NO_ERROR || !h->ended) {
        h->broken = true;
        if (code == NGHTTP2_REFUSED_STREAM && h->goaway)
            failed(h, "upstream sent GOAWAY before taking the request%s", "");
        else
            failed(h, "upstream reset the stream (%s)", nghttp2_http2_strerror(code));
    }
    return 0;
}

static int on_invalid_frame(nghttp2_session *s, const nghttp2_frame *f, int lib_error, void *ud)
{
    (void)s, (void)f;
    struct h2up *h = ud;
    h->broken = true;
    failed(h, "upstream sent an invalid HTTP/2 frame: %s", nghttp2_strerror(lib_error));
    return 0;
}

static nghttp2_session_callbacks *cbs;
static pthread_once_t cbs_once = PTHREAD_ONCE_INIT;
static void make_callbacks(void)
{
    if (nghttp2_session_callbacks_new(&cbs))
        return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, on_invalid_frame);
}

/* The request body, as the stream's window lets it go: straight from the request into
 * nghttp2's frame, never waiting. */
static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)s, (void)id, (void)src;
    struct h2up *h = ud;
    ssize_t n = req_try_body(h->ux->r, buf, len);
    if (n == REQ_AGAIN) {
        h->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n < 0) {
        h->client_gone = true;
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;   /* the stream is reset */
    }
    if (n == 0) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        h->body_sent = true;
    }
    return n;
}

/* ---- the connection ---- */

static int h2up_open(struct upstream_conn *uc, uint32_t head_max)
{
    pthread_once(&cbs_once, make_callbacks);
    struct h2up *h = sc_calloc(1, sizeof *h);
    if (!h || !cbs) {
        sc_free(h);
        return -1;
    }
    nghttp2_mem mem = h2mem_allocator(&h->mem);
    if (nghttp2_session_client_new3(&h->session, cbs, h, NULL, &mem)) {
        sc_free(h);
        return -1;
    }
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0 },   /* the server opens none */
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, head_max },   /* enforced in on_header */
    };
    if (nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0])) {
        nghttp2_session_del(h->session);
        sc_free(h);
        return -1;
    }
    uc->h2 = h;
    return 0;
}

void h2up_free(struct upstream_conn *uc)
{
    struct h2up *h = uc->h2;
    if (!h)
        return;
    nghttp2_session_del(h->session);
    buf_free(&h->rx);
    buf_free(&h->trailers);
    sc_free(h);
    uc->h2 = NULL;
}

/* What nghttp2 has to send, into the transport's queue while it holds little; then out.
 * It returns with nghttp2 drained (or its body deferred) or with bytes the socket did not
 * take, never with frames left in nghttp2 and an empty queue: the caller then waits for
 * the upstream alone, and a server that has opened its window wide and waits for the body
 * (gRPC's do) would wait for ever. */
static int send_some(struct h2up *h, struct transport *t)
{
    for (;;) {
        bool drained = false;
        while (transport_pending(t) < H2UP_OUT_HIGH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(h->session, &data);
            if (n < 0) {
                h->broken = true;
                failed(h, "HTTP/2 session failed: %s", nghttp2_strerror((int)n));
                return -1;
            }
            if (!n) {
                drained = true;
                break;
            }
            if (buf_append(&t->out, (const char *)data, (size_t)n))
                return -1;
        }
        uint64_t moved;
        if (transport_pending(t) && transport_flush(t, &moved) < 0)
            return -1;
        if (drained || transport_pending(t))
            return 0;
    }
}

bool h2up_idle_ok(struct upstream_conn *uc)
{
    struct h2up *h = uc->h2;
    char b[512];
    for (;;) {
        ssize_t n = transport_read(&uc->t, b, sizeof b);
        if (n < 0)
            return false;           /* closed, or reset */
        if (!n)
            break;
        if (nghttp2_session_mem_recv(h->session, (const uint8_t *)b, (size_t)n) != n)
            return false;
    }
    if (h->goaway || h->broken || !nghttp2_session_want_read(h->session))
        return false;
    return send_some(h, &uc->t) == 0;   /* PING and SETTINGS acknowledged now */
}

void h2up_idle(struct upstream_conn *uc)
{
    struct h2up *h = uc->h2;
    if (!h)
        return;
    h2mem_trim(&h->mem);
}

/* ---- one exchange ---- */

static void exchange_begin(struct h2up *h, struct upstream_exchange *ux)
{
    h->ux = ux;
    h->id = 0;
    h->rx_off = h->rx.len = 0;
    h->trailers.len = 0;
    h->chunk = NULL;
    h->head_bytes = h->ntrailers = 0;
    h->head_ready = h->head_passed = h->ended = h->closed = h->body_sent = h->deferred = h->paused = false;
    h->client_gone = h->in_trailers = h->too_big = false;
    h->error[0] = 0;
    h->close_code = 0;
}

#define NV(n, v, vl) ((nghttp2_nv){ (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NONE })

/* The neutral head as HTTP/2's: the pseudo-headers, the fields, the body's length, and
 * te: trailers (the one TE HTTP/2 allows, RFC 9113 8.2.2) when the client takes them.
 * nghttp2 copies what it is given, lowering the names as it does (the proxy's own come
 * capitalised, as HTTP/1.1 writes them): the array goes at once. */
static int h2_submit(struct upstream_exchange *ux, const struct upstream_request *rq)
{
    struct h2up *h = ux->uc->h2;
    exchange_begin(h, ux);
    h1resp_free(&ux->resp);
    h1resp_init(&ux->resp, rq->head, false, rq->head_max);
    ux->rx.len = ux->rx_off = 0;
    ux->request_sent = false;
    ux->send_failed = 0;
    bool body = rq->length > 0 || rq->length == UPSTREAM_BODY_STREAM;
    ux->body_open = body;
    ux->body_started |= body;      /* nghttp2 takes the body as the window opens: never sent twice */
    ux->chunked = false;
    nghttp2_nv *nv = sc_malloc(sizeof *nv * (rq->nfields + 6));
    if (!nv)
        return -1;
    char text[24];
    const char *scheme = ux->uc->t.ssl ? "https" : "http";
    size_t n = 0;
    nv[n++] = NV(":method", rq->method, strlen(rq->method));
    nv[n++] = NV(":scheme", scheme, strlen(scheme));
    nv[n++] = NV(":authority", rq->authority, strlen(rq->authority));
    nv[n++] = NV(":path", rq->target, strlen(rq->target));
    for (uint32_t i = 0; i < rq->nfields; i++)
        nv[n++] = (nghttp2_nv){ (uint8_t *)rq->fields[i].name, (uint8_t *)rq->fields[i].value, rq->fields[i].nl,
                                rq->fields[i].vl, NGHTTP2_NV_FLAG_NONE };
    if (rq->length >= 0)
        nv[n++] = NV("content-length", text, u64_dec(text, (uint64_t)rq->length));
    if (rq->trailers)
        nv[n++] = NV("te", "trailers", 8);
    h->body_sent = !body;
    nghttp2_data_provider prd = { .read_callback = body_read };
    int32_t id = nghttp2_submit_request(h->session, NULL, nv, n, body ? &prd : NULL, NULL);
    sc_free(nv);
    if (id <= 0) {
        failed(h, "HTTP/2 request not submitted: %s", nghttp2_strerror(id));
        return -1;
    }
    h->id = id;
    return 0;
}

static const struct buf *h2_trailers(const struct upstream_exchange *ux, uint32_t *n)
{
    *n = ux->uc->h2->ntrailers;
    return &ux->uc->h2->trailers;
}

static bool h2_reusable(const struct upstream_exchange *ux)
{
    const struct upstream_conn *uc = ux->uc;
    const struct h2up *h = uc->h2;
    return h->closed && h->ended && h->body_sent && h->close_code == NGHTTP2_NO_ERROR && !h->goaway && !h->broken &&
           h->rx_off == h->rx.len && nghttp2_session_want_read(h->session) && !transport_pending(&uc->t);
}

static void h2_end(struct upstream_exchange *ux)
{
    struct h2up *h = ux->uc->h2;
    if (!h)
        return;
    if (h->id && !h->closed) {
        /* The response ended (or failed) while the request still went up: the stream is
         * given up, and the connection with it. */
        nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, h->id, NGHTTP2_CANCEL);
        h->broken = true;
    }
    h->id = 0;
    h->ux = NULL;
    h->chunk = NULL;
    buf_free(&h->rx);
    h->rx_off = 0;
    buf_free(&h->trailers);
}

/* The cause goes into the response record, which outlives the connection (closed, and
 * this struct freed, before proxy_pass logs it). */
static void cause_to(struct h2up *h)
{
    h1resp_fail(&h->ux->resp, h->error, NULL);
}

static PARKED_APART int h2_step(struct upstream_exchange *ux, upstream_head_fn *head, int *events,
                                enum upstream_failure *why)
{
    struct upstream_conn *uc = ux->uc;
    struct h2up *h = uc->h2;
    struct transport *t = &uc->t;
    *events = 0;
    for (;;) {
        if (h->head_ready && !h->head_passed) {
            h->head_passed = true;
            if (head(ux, why))
                return UPSTREAM_ERROR;
            continue;
        }
        if (h->chunk) {
            const uint8_t *chunk = h->chunk;
            h->chunk = NULL;
            if (req_write(ux->r, chunk, h->chunk_len)) {
                *why = UF_NONE;    /* the client went away: the body is unfinished */
                return UPSTREAM_ERROR;
            }
            continue;
        }
        if (h->client_gone) {
            *why = UF_NONE;
            return UPSTREAM_ERROR;
        }
        if (h->ended && h->head_passed) {
            send_some(h, t);       /* WINDOW_UPDATE and the like, best effort */
            ux->request_sent = true;
            return UPSTREAM_END;
        }
        if (h->error[0]) {
            cause_to(h);
            *why = UF_INVALID;     /* 502, the cause in h->error */
            return UPSTREAM_ERROR;
        }
        if (h->deferred) {
            h->deferred = false;
            nghttp2_session_resume_data(h->session, h->id);
        }
        if (send_some(h, t)) {
            if (!h->error[0])
                failed(h, "%s", errno == ECONNRESET ? "upstream reset the connection"
                                                    : "upstream closed while the request was sent");
            cause_to(h);
            *why = errno == ECONNRESET ? UF_RESET : UF_SEND;
            h->broken = true;
            return UPSTREAM_ERROR;
        }
        if (h->client_gone)
            continue;
        if (h->rx_off < h->rx.len || h->paused) {
            h->paused = false;
            ssize_t n = nghttp2_session_mem_recv(h->session, (const uint8_t *)h->rx.data + h->rx_off,
                                                 h->rx.len - h->rx_off);
            if (n < 0) {
                h->broken = true;
                failed(h, "upstream HTTP/2 protocol error: %s", nghttp2_strerror((int)n));
                send_some(h, t);     /* nghttp2's GOAWAY, best effort */
                cause_to(h);
                *why = UF_INVALID;
                return UPSTREAM_ERROR;
            }
            h->rx_off += (size_t)n;
            continue;
        }
        if (!h->chunk) {
            h->rx.len = h->rx_off = 0;
        }
        if (buf_reserve(&h->rx, H2UP_READ)) {
            *why = UF_INVALID;
            return UPSTREAM_ERROR;
        }
        ssize_t n = transport_read(t, h->rx.data + h->rx.len, h->rx.cap - h->rx.len);
        if (n > 0) {
            h->rx.len += (size_t)n;
            continue;
        }
        if (n < 0) {
            int e = errno;
            h->broken = true;
            failed(h, "%s", e == ECONNRESET ? "upstream reset the connection"
                            : h->head_passed ? "upstream prematurely closed the connection while sending the body"
                                             : "upstream prematurely closed the connection");
            cause_to(h);
            *why = e == ECONNRESET ? UF_RESET : UF_CLOSED;
            return UPSTREAM_ERROR;
        }
        break;
    }
    buf_free(&h->rx);                /* a waiting exchange holds no read buffer */
    h->rx_off = 0;
    bool pending = transport_pending(t) > 0;
    *events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (h->deferred && !pending ? REQ_BODY : 0);
    return UPSTREAM_MORE;
}

static int h2_open(struct upstream_conn *uc, uint32_t head_max) { return uc->h2 ? 0 : h2up_open(uc, head_max); }

const struct upstream_client upstream_h2_client = {
    .version = "2.0",
    .h2 = true,
    .open = h2_open,
    .submit = h2_submit,
    .step = h2_step,
    .trailers = h2_trailers,
    .reusable = h2_reusable,
    .end = h2_end,
    .tunnel = NULL,                  /* RFC 8441's CONNECT upstream is not spoken */
};
