/* Requests and their handler coroutines: the runtime behind request.h, protocol-neutral.
 *
 * A handler runs in a coroutine of its own and is resumed only by its connection's serve
 * loop (conn_runtime.run), never from inside a protocol callback.  When it must wait -
 * for request body, for room in its output, for a timer - it records why and yields;
 * whatever ends the wait (body arriving, the front end taking output, the timer, the
 * exchange closing) queues it as runnable and wakes the connection.  Waiting handlers
 * hold their stacks but not the serve loop's, so a connection with only waiting handlers
 * parks.  Output is buffered per request up to REQUEST_OUTPUT_MAX, so a handler can get
 * ahead of the peer by that much and no more.
 *
 * A request that waits on its peer has a deadline, so no peer can pin a request's memory
 * by going quiet: body_timeout while the handler has read all the body there is and the
 * request is not complete (for HTTP/2 the window is then open, so the wait is the
 * peer's) - or, the response sent in full, while the front end waits for the rest of a
 * body to drop it - write_timeout while response data is ready and does not go out.  One
 * timer per request serves both and req_sleep; it is armed lazily (moved only earlier)
 * and re-aimed when it fires, so progress costs a timestamp, not a timer operation.  A
 * new response's write deadline is armed only as the serve step that began it ends, when
 * a small response has all gone out and needs none.
 *
 * A rate-limited response (req_limit_rate: limit_rate) is metered where its body leaves
 * the runtime - request_out_allowed, take, give and file, what every front end takes a
 * body through - so static files, a proxy's req_write and any other handler's output are
 * limited alike, over HTTP/1.1 and for each HTTP/2 stream alone (a stream held back is
 * deferred; the connection's other streams go on).  The meter (rate.c) lives in the
 * request's extra, allocated with room for it for such a request only.  While the limit
 * holds the rest back, the front end has nothing to write, so the connection parks; the
 * request's one timer, aimed at when the next burst may go (DEADLINE_RATE), wakes it.  A
 * handler writing ahead of the limit waits in req_write until its output has drained to
 * one burst, not at every burst: it waits as long as the output takes to drain, long
 * enough at a slow rate to park like any other wait.
 *
 * The request's life is enum req_state (see runtime.h), changed only by set_state; a
 * request is freed in one place, release, which stops its timer whether it is active or
 * expired and waiting to run.  A connection's struct request_set exists from its first
 * request on, kept between requests (a request costs no allocation for it), until the
 * connection goes or a tick finds it empty (park.c): an idle connection pays a pointer. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "fieldcopy.h"
#include "host.h"
#include "httpdate.h"
#include "runtime/encode.h"
#include "runtime/runtime.h"
#include "scalloc.h"

#define OUTB_MAX REQUEST_OUTPUT_MAX
/* A wide request's share: what its output and its connection's output buffer may hold
 * beyond REQUEST_OUTPUT_MAX each (h1 hands the output whole to the connection and fills a
 * new one; an HTTP/2 stream fills the connection's buffer up to REQUEST_OUTPUT_WIDE). */
#define WIDE_EXTRA (2 * (REQUEST_OUTPUT_WIDE - REQUEST_OUTPUT_MAX))
#define MAX_FIELDS REQ_RESPONSE_FIELDS_MAX
#define MAX_LOCATION_FIELDS 30 /* ... and its location adds (the front ends take 100 in all) */

static request_handler app_handler;
void (*request_log_hook)(const struct request *r);

void request_set_handler(request_handler h) { app_handler = h; }
void request_set_logger(void (*log)(const struct request *r)) { request_log_hook = log; }

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents);
static void on_fd_ready(struct ev_loop *loop, ev_io *io, int revents);

int request_init(struct request *r, struct conn *c, const struct request_ops *ops, enum req_protocol protocol)
{
    if (!c->requests && !(c->requests = sc_calloc(1, sizeof *c->requests)))
        return -1;
    struct request_set *rs = c->requests;
    r->c = c;
    r->ops = ops;
    r->hold = worker_hold_config(c->w);
    r->cfg = r->hold->cfg;
    r->protocol = (uint8_t)protocol;
    r->state = REQ_RECEIVING;
    r->src.fd = -1;
    r->content_length = -1;
    r->out_length = BODY_NONE;
    r->started = r->in_progress = r->out_progress = ev_now(c->w->loop);
    ev_init(&r->timer, on_timer);
    r->timer.data = r;
    r->next = rs->all;
    if (rs->all)
        rs->all->prev = r;
    rs->all = r;
    return 0;
}

/* Which known field a name is, or -1: by length first, so most names cost one switch
 * and one comparison of a length the compiler knows (done inline, without a call). */
static inline __attribute__((always_inline)) int known_field(const char *name, size_t len)
{
#define IS(lit, k) if (!memcmp(name, lit, sizeof lit - 1)) return k
    switch (len) {
    case 4: IS("host", KF_HOST); break;
    case 5: IS(":path", KF_PATH); IS("range", KF_RANGE); break;
    case 7: IS(":method", KF_METHOD); IS("referer", KF_REFERER); IS("upgrade", KF_UPGRADE); break;
    case 8: IS("if-match", KF_IF_MATCH); IS("if-range", KF_IF_RANGE); break;
    case 9: IS(":protocol", KF_PROTOCOL); break;
    case 10: IS(":authority", KF_AUTHORITY); IS("user-agent", KF_USER_AGENT); IS("connection", KF_CONNECTION); break;
    case 13: IS("if-none-match", KF_IF_NONE_MATCH); break;
    case 14: IS("content-length", KF_CONTENT_LENGTH); IS("http2-settings", KF_HTTP2_SETTINGS); break;
    case 15: IS("accept-encoding", KF_ACCEPT_ENCODING); break;
    case 17: IS("if-modified-since", KF_IF_MODIFIED_SINCE); break;
    case 19: IS("if-unmodified-since", KF_IF_UNMODIFIED_SINCE); break;
    }
#undef IS
    return -1;
}

/* Room for a typical head at once: a request's fields then cost one allocation. */
#define HEAD_RESERVE 512

void request_set_store(struct request *r, char *mem, size_t cap)
{
    r->store_off = (uint16_t)(mem - (char *)r);
    r->store_cap = (uint16_t)cap;
    r->store_used = 0;
}

static char *store(const struct request *r) { return (char *)(uintptr_t)r + r->store_off; }

static bool in_store(const struct request *r, const struct buf *b)
{
    return b->data && r->store_cap && b->data >= store(r) && b->data < store(r) + r->store_cap;
}

/* buf_reserve for the head and the response fields: the first reservation takes the
 * rest of the store if it is enough (else first bytes of the heap), and one that
 * outgrows the store moves the buffer to the heap. */
static int reserve(struct request *r, struct buf *b, size_t need, size_t first)
{
    if (b->cap - b->len >= need)
        return 0;
    if (!b->data) {
        size_t left = r->store_cap - r->store_used;
        if (need <= left) {
            b->data = store(r) + r->store_used;
            b->cap = left;
            r->store_used = r->store_cap;
            return 0;
        }
        return buf_reserve(b, need > first ? need : first);
    }
    if (!in_store(r, b))
        return buf_reserve(b, need);
    struct buf moved = { 0 };
    if (buf_reserve(&moved, b->len + (need > first ? need : first)))
        return -1;
    memcpy(moved.data, b->data, b->len);
    moved.len = b->len;
    *b = moved;
    return 0;
}

static void free_buf(const struct request *r, struct buf *b)
{
    if (!in_store(r, b))
        buf_free(b);
    *b = (struct buf){ 0 };
}

bool request_add_header(struct request *r, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (r->too_large || r->state != REQ_RECEIVING)
        return false;
    /* RFC 9113 section 6.5.2 counts each field as name + value + 32; HTTP/1.1 the same. */
    r->header_bytes += (uint32_t)(nlen + vlen + 32);
    size_t need = nlen + vlen + 2;
    if (r->header_bytes > r->cfg->max_header_list_size ||
        (r->hdr.cap - r->hdr.len < need && reserve(r, &r->hdr, need, HEAD_RESERVE))) {
        r->too_large = true;
        return false;
    }
    char *p = r->hdr.data + r->hdr.len;
    field_copy(p, name, nlen);
    p[nlen] = 0;
    field_copy(p + nlen + 1, value, vlen);
    p[nlen + 1 + vlen] = 0;
    int k = known_field(name, nlen);
    if (k >= 0 && !r->known[k])
        r->known[k] = (uint32_t)(r->hdr.len + nlen + 1) + 1;
    r->hdr.len += need;
    r->nfields++;
    return true;
}

/* A compressed response's state, where a body source would be: r->src.arg, marked by
 * src.fd == SRC_COMPRESSING (no file, no src.mem) - a response either sends a file as it is
 * or compresses, never both - so that no request that does not compress carries a pointer
 * for it, and telling one from the other costs the one compare. */
#define SRC_COMPRESSING (-2)
struct compressing {
    struct encoder *enc;
    struct buf stage;             /* req_write_room's room, compressed at req_write_commit */
    bool flush_each;              /* text/event-stream: every write a flush point */
};

static inline struct compressing *compressing(const struct request *r)
{
    return __builtin_expect(r->src.fd == SRC_COMPRESSING, 0) ? r->src.arg : NULL;
}

static void compressing_free(struct compressing *cp)
{
    encoder_free(cp->enc);
    buf_free(&cp->stage);
    sc_free(cp);
}

const char *req_content_coding(const struct request *r)
{
    struct compressing *cp = compressing(r);
    return cp ? coding_name[encoder_coding(cp->enc)] : NULL;
}

static void release(struct request *r)
{
    struct conn *c = r->c;
    struct request_set *rs = c->requests;
    if (r->prev)
        r->prev->next = r->next;
    else
        rs->all = r->next;
    if (r->next)
        r->next->prev = r->prev;
    /* Unconditionally: a timer that expired but has not run yet is pending, not active,
     * and would run on freed memory. */
    if (ev_is_active(&r->timer) || ev_is_pending(&r->timer))
        ev_timer_stop(c->w->loop, &r->timer);
    if (r->extra) {
        if (r->extra->at_release)
            r->extra->at_release(r);
        ev_io *w = r->extra->waiting_on;
        if (w && (ev_is_active(w) || ev_is_pending(w)))
            ev_io_stop(c->w->loop, w);
        buf_free(&r->extra->trailers);
        sc_free(r->extra->upstream.error);
        sc_free(r->extra->set_fields);
        sc_free(r->extra);
    }
    if (r->src.release)
        r->src.release(r->src.arg);
    else if (compressing(r))
        compressing_free(r->src.arg);
    free_buf(r, &r->hdr);
    free_buf(r, &r->resp);
    buf_free(&r->body);
    buf_free(&r->outb);
    if (r->wide_out)
        counter_add(&c->w->n.wide_output_bytes, -(int64_t)WIDE_EXTRA);
    worker_release_config(c->w, r->hold);
    r->ops->release(r);
}

/* The one place a request's life changes; a transition not in the diagram is a bug. */
static void set_state(struct request *r, enum req_state to)
{
    static const uint8_t allowed[] = {
        [REQ_RECEIVING] = 1u << REQ_HANDLING | 1u << REQ_DONE,
        [REQ_HANDLING] = 1u << REQ_DRAINING | 1u << REQ_ORPHANED,
        [REQ_DRAINING] = 1u << REQ_DONE,
        [REQ_ORPHANED] = 1u << REQ_DONE,
        [REQ_DONE] = 0,
    };
    if (!(allowed[r->state] & 1u << to)) {
        log_msg(LOG_ERROR, "request: state %d to %d", r->state, to);
        abort();
    }
    r->state = to;
    if (to == REQ_DONE && !r->queued)
        release(r);
}

static void make_runnable(struct request *r)
{
    if (r->queued || !r->handler)
        return;
    r->queued = true;
    r->next_runnable = NULL;
    struct request_set *rs = r->c->requests;
    if (rs->runnable_tail)
        rs->runnable_tail->next_runnable = r;
    else
        rs->runnable = r;
    rs->runnable_tail = r;
    r->c->runnable = true;
}

static const char *known(const struct request *r, enum known_field k)
{
    return r->known[k] ? r->hdr.data + r->known[k] - 1 : NULL;
}

/* A field req_set_field set: its entry's value ('+' or '-' first), or NULL if it set none. */
static const char *set_field(const struct request *r, const char *name)
{
    for (const char *p = r->extra->set_fields; *p;) {
        const char *v = p + strlen(p) + 1;
        if (!strcmp(p, name))
            return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}
#define SET_FIELDS(r) ((r)->extra && (r)->extra->set_fields)

static const char *field(const struct request *r, const char *name)
{
    const char *set = SET_FIELDS(r) ? set_field(r, name) : NULL;
    if (set)
        return set[0] == '+' ? set + 1 : NULL;
    size_t len = strlen(name);
    int k = known_field(name, len);
    if (k >= 0)
        return known(r, (enum known_field)k);
    for (size_t off = 0; off < r->hdr.len;) {
        const char *n = r->hdr.data + off, *v = n + strlen(n) + 1;
        if (!strcmp(n, name))
            return v;
        off = (size_t)(v - r->hdr.data) + strlen(v) + 1;
    }
    return NULL;
}

static void *handler_main(void *arg)
{
    struct request *r = arg;
    if (r->too_large) {
        static const char msg[] = "request header fields too large\n";
        req_simple(r, 431, "text/plain", msg, sizeof msg - 1);
    } else if (!r->method || !r->target) {
        static const char msg[] = "bad request\n";
        req_simple(r, 400, "text/plain", msg, sizeof msg - 1);
    } else if (strchr(r->target, '#')) {
        /* A fragment is the client's own (RFC 9112 3.2, RFC 9113 8.3.1): a target that
         * carries one would be judged by its part before '#' and passed on whole. */
        static const char msg[] = "bad request: a request target has no fragment ('#')\n";
        req_simple(r, 400, "text/plain", msg, sizeof msg - 1);
    } else if (r->content_length >= 0 && r->method[0] == 'C' && !strcmp(r->method, "CONNECT")) {
        /* An HTTP/2 extended CONNECT (RFC 8441): what follows its head is the tunnel's,
         * and a CONNECT has no content (RFC 9110 9.3.6) - a length would make the first
         * bytes a body to one reader and the tunnel's to another. */
        static const char msg[] = "bad request: a CONNECT request has no content\n";
        req_simple(r, 400, "text/plain", msg, sizeof msg - 1);
    } else {
        app_handler(r);
    }
    return NULL;
}

int request_start(struct request *r)
{
    struct conn *c = r->c;
    /* The head is complete.  In the store: what it left there is the response fields'
     * (a field added later moves the head to the heap, as growing it would anyway).  On
     * the heap: its fields in an object of their size, not in the room HEAD_RESERVE left
     * for more - a waiting request keeps them for as long as it waits.  Now or never:
     * from here on the handler holds pointers into them. */
    if (in_store(r, &r->hdr)) {
        r->hdr.cap = r->hdr.len;
        size_t used = (size_t)(r->hdr.data - store(r)) + ((r->hdr.len + 7) & ~(size_t)7);
        r->store_used = (uint16_t)(used < r->store_cap ? used : r->store_cap);
    } else {
        buf_fit(&r->hdr);
    }
    r->method = known(r, KF_METHOD);
    r->target = known(r, KF_PATH);
    const char *m = r->method;
    r->head = m && m[0] == 'H' && m[1] == 'E' && m[2] == 'A' && m[3] == 'D' && !m[4];
    r->authority = known(r, KF_AUTHORITY);
    if (!r->authority)
        r->authority = known(r, KF_HOST);
    const char *cl = known(r, KF_CONTENT_LENGTH);
    uint64_t n;
    if (cl && !u64_parse(cl, strlen(cl), INT64_MAX, &n))
        r->content_length = (int64_t)n;    /* the front ends refuse a bad one; digits only */
    counter_add(&c->w->n.streams_total, 1);
    /* The cap that bounds what all connections together can pin (max_handlers). */
    if ((long)c->w->n.handler_coroutines >= config_max_handlers(r->cfg)) {
        log_rate_limited(LOG_WARN, &c->w->refused_logged, "worker %d: max_handlers (%ld) reached: refusing requests",
                         c->w->id, config_max_handlers(r->cfg));
        return -1;
    }
    r->handler = coro_create(handler_main, r, 0);
    if (!r->handler)
        return -1;
    c->requests->open++;
    c->requests->live++;
    counter_add(&c->w->n.handler_coroutines, 1);
    set_state(r, REQ_HANDLING);
    make_runnable(r);
    request_arm_timer(r);
    return 0;
}

static void handler_finished(struct request *r)
{
    struct conn *c = r->c;
    r->handler = NULL;
    c->requests->live--;
    counter_add(&c->w->n.handler_coroutines, -1);
    if (r->state == REQ_ORPHANED) {
        set_state(r, REQ_DONE);
        return;
    }
    if (!r->responded) {
        static const char msg[] = "the handler gave no response\n";
        req_simple(r, 500, "text/plain", msg, sizeof msg - 1);
    } else if (!r->out_eof && !r->aborted) {
        req_end(r);
    }
    /* Body it did not read nobody will: dropped now, and the front end told it is taken
     * (HTTP/2 reopens the window), so it pins no memory and holds no client back while
     * the rest of the exchange runs its course (its deadline applies). */
    size_t unread = r->body.len - r->body_off;
    if (unread) {
        buf_free(&r->body);
        r->body_off = 0;
        r->ops->consumed(r, unread);
    }
    set_state(r, REQ_DRAINING);
}

void request_closed(struct request *r)
{
    struct conn *c = r->c;
    if (r->state == REQ_DONE || r->state == REQ_ORPHANED)
        return;
    /* A request that ends unanswered is logged with the status nginx logs for its cause,
     * never sent (there is no one to send it to): 408 when its body stopped coming
     * (on_timer), 503 when the daemon stopping cut it, 400 when its client left halfway
     * through its body, 499 when its client gave up waiting for the answer. */
    bool unanswered = r->state == REQ_HANDLING && !r->responded;
    if (unanswered && !r->status)
        r->status = c->w->shutting_down ? 503 : !r->body_eof && !r->tunnel ? 400 : REQ_CLIENT_CLOSED;
    if ((r->responded || unanswered) && request_log_hook) {
        r->ended = ev_time();       /* not ev_now: the loop's clock stands still within an iteration */
        request_log_hook(r);
    }
    if (r->state != REQ_RECEIVING && c->requests->open && --c->requests->open == 0 && !c->head_due)
        c->since = ev_now(c->w->loop);
    if (r->state == REQ_HANDLING) {
        set_state(r, REQ_ORPHANED);
        make_runnable(r);           /* its next call fails, and it returns */
    } else {
        set_state(r, REQ_DONE);
    }
}

void request_refused(struct request *r, int status, uint64_t body_bytes)
{
    r->status = status;
    r->bytes_sent = body_bytes;
    r->responded = r->out_eof = r->sent_all = true;   /* what request_closed logs */
    request_closed(r);
}

/* conn_runtime.run. */
static void run_handlers(struct conn *c)
{
    struct request_set *rs = c->requests;
    struct request *r;
    while ((r = rs->runnable)) {
        rs->runnable = r->next_runnable;
        if (!rs->runnable)
            rs->runnable_tail = NULL;
        r->queued = false;
        if (!r->handler) {
            if (r->state == REQ_DONE)
                release(r);         /* closed while it was queued */
            continue;
        }
        if (r->parked)
            request_unpark(r);
        if (!coro_resume(r->handler, NULL))
            handler_finished(r);
        else if (r->cfg->park_handlers_at_once && r->wait != WAIT_NONE && !r->queued)
            request_park(r);
    }
    c->runnable = false;
}

/* Gives control back to the serve loop until something queues this request again. */
static void wait_for(struct request *r, enum req_wait why)
{
    r->wait = (uint8_t)why;
    r->waited_ticks = 0;
    coro_yield(NULL);
    r->wait = WAIT_NONE;
}

static bool gone(const struct request *r) { return r->state != REQ_HANDLING; }

int request_body(struct request *r, const char *data, size_t len)
{
    if (gone(r) || !r->handler)
        return 0;                   /* nobody will read it: dropped */
    r->body_seen += len;
    if (r->body_max && r->body_seen > r->body_max) {
        if (!r->body_over) {
            r->body_over = true;    /* its reader fails, and the application says 413 */
            buf_free(&r->body);
            r->body_off = 0;
            make_runnable(r);
        }
        return 0;
    }
    if (buf_append(&r->body, data, len))
        return -1;
    r->in_progress = ev_now(r->c->w->loop);
    if (r->wait == WAIT_BODY || (r->wait == WAIT_FD && (r->extra->fd_events & REQ_BODY)))
        make_runnable(r);
    return 0;
}

void request_body_end(struct request *r)
{
    r->body_eof = true;
    if (r->wait == WAIT_BODY || (r->wait == WAIT_FD && (r->extra->fd_events & REQ_BODY)))
        make_runnable(r);
}

static bool body_ready(const struct request *r) { return r->body.len > r->body_off || r->body_eof; }

ssize_t req_try_body(struct request *r, void *buf, size_t len)
{
    if (!body_ready(r) && !gone(r)) {
        if (!r->body_asked) {
            r->ops->body_wanted(r);
            r->body_asked = true;
        }
        return REQ_AGAIN;
    }
    return req_read_body(r, buf, len);
}

ssize_t req_read_body(struct request *r, void *buf, size_t len)
{
    bool asked = r->body_asked;
    for (;;) {
        size_t avail = r->body.len - r->body_off;
        if (avail) {
            size_t n = avail < len ? avail : len;
            memcpy(buf, r->body.data + r->body_off, n);
            r->body_off += (uint32_t)n;
            if (r->body_off == r->body.len) {
                buf_free(&r->body);
                r->body_off = 0;
                r->in_progress = ev_now(r->c->w->loop);   /* the peer's turn from here */
            }
            if (!gone(r))
                r->ops->consumed(r, n);
            return (ssize_t)n;
        }
        if (r->body_over)
            return -1;
        if (r->body_eof)
            return 0;
        if (gone(r))
            return -1;
        if (!asked) {
            r->ops->body_wanted(r);
            asked = r->body_asked = true;
        }
        request_arm_timer(r);
        wait_for(r, WAIT_BODY);
    }
}

/* One response field into p, as request_resp_field reads it; the name in lower case
 * (HTTP/2 requires it, HTTP/1.1 does not care). */
static char *put_field(char *p, const char *name, uint32_t nl, const char *value, uint32_t vl)
{
    memcpy(p, &nl, 4);
    memcpy(p + 4, &vl, 4);
    p += 8;
    field_copy_lower(p, name, nl);
    p[nl] = 0;
    p += nl + 1;
    field_copy(p, value, vl);
    p[vl] = 0;
    return p + vl + 1;
}

struct req_fields {
    size_t len;
    uint32_t n;
    char data[];
};

/* The fields every response starts with: Date (RFC 9110 6.6.1: a server with a clock
 * must send it) and, unless turned off, Server - laid out once a second per thread. */
static const char *lead_fields(bool server, size_t *len, uint32_t *n)
{
    static __thread char block[2 * RESP_FIELD_OVERHEAD + 4 + HTTP_DATE_LEN + 6 + 6];
    static __thread size_t block_len;
    static __thread time_t block_time;
    static __thread bool block_server;
    time_t now = time(NULL);
    if (now != block_time || block_server != server) {
        char *p = put_field(block, "date", 4, http_date_now(), HTTP_DATE_LEN);
        if (server)
            p = put_field(p, "server", 6, "h2park", 6);
        block_len = (size_t)(p - block);
        block_time = now;
        block_server = server;
    }
    *len = block_len;
    *n = 1 + block_server;
    return block;
}

struct req_fields *req_fields_new(const struct header *h, size_t n)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += RESP_FIELD_OVERHEAD + strlen(h[i].name) + strlen(h[i].value);
    struct req_fields *f = sc_malloc(sizeof *f + need);
    if (!f)
        return NULL;
    char *p = f->data;
    for (size_t i = 0; i < n; i++)
        p = put_field(p, h[i].name, (uint32_t)strlen(h[i].name), h[i].value, (uint32_t)strlen(h[i].value));
    f->len = need;
    f->n = (uint32_t)n;
    return f;
}

void req_fields_free(struct req_fields *f) { sc_free(f); }

/* The fields loc adds to an answer of this status: their bytes as laid out (out NULL),
 * or their count, put at *out. */
static __attribute__((noinline)) size_t added_fields(const struct location *loc, int status, char **out)
{
    bool success = (status >= 200 && status <= 206) || status == 301 || status == 302 || status == 303 ||
                   status == 304 || status == 307 || status == 308;
    size_t n = loc->nheaders < MAX_LOCATION_FIELDS ? loc->nheaders : MAX_LOCATION_FIELDS, bytes = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        const struct added_header *a = &loc->headers[i];
        if (!a->always && !success)
            continue;
        bytes += RESP_FIELD_OVERHEAD + (size_t)a->name_len + a->value_len;
        count++;
        if (out)
            *out = put_field(*out, a->name, a->name_len, a->value, a->value_len);
    }
    return out ? count : bytes;
}

static int respond_compressing(struct request *r, int status, const struct req_fields *pre, const struct header *h,
                               size_t n, int64_t length);

static int respond_as_is(struct request *r, int status, const struct req_fields *pre, const struct header *h, size_t n,
                         int64_t length);

static inline int respond(struct request *r, int status, const struct req_fields *pre, const struct header *h, size_t n,
                          int64_t length)
{
    if (__builtin_expect(r->loc && r->loc->compress, 0) && status != 101 && !r->responded && !gone(r))
        return respond_compressing(r, status, pre, h, n, length);
    return respond_as_is(r, status, pre, h, n, length);
}

static int respond_as_is(struct request *r, int status, const struct req_fields *pre, const struct header *h, size_t n,
                         int64_t length)
{
    if (r->responded || gone(r))
        return -1;
    /* 101 only where the front end can hand the connection over; the tunnel's body is
     * the client's bytes from here on, its end the client's close.  Over HTTP/1.1 they
     * follow the head (nothing may have come as a body); an HTTP/2 stream's DATA are them
     * already, and its client is told 200 (RFC 8441 section 5). */
    if (status == 101) {
        bool h1 = r->protocol == REQ_HTTP1;
        if (!r->upgrade_offered || length != BODY_STREAM || (h1 && r->body.len > r->body_off))
            return -1;
        r->tunnel = true;
        r->rate_limited = false;    /* a tunnel's bytes are not a body to limit, as in nginx */
        if (h1)
            r->body_eof = false;
        else
            status = 200;
    }
    /* The fields go into one buffer sized at once, with their lengths, so no front end
     * measures them again. */
    size_t lead_len;
    uint32_t lead_n;
    const char *lead = lead_fields(r->cfg->server_header, &lead_len, &lead_n);
    size_t need = lead_len + (pre ? pre->len : 0);
    uint32_t len[2 * MAX_FIELDS];
    size_t most = MAX_FIELDS - (pre && pre->n < MAX_FIELDS ? pre->n : 0);
    if (n > most)
        n = most;
    for (size_t i = 0; i < n; i++) {
        len[2 * i] = (uint32_t)strlen(h[i].name);
        len[2 * i + 1] = (uint32_t)strlen(h[i].value);
        need += RESP_FIELD_OVERHEAD + (size_t)len[2 * i] + len[2 * i + 1];
    }
    /* The location's own fields, as nginx's add_header: on success and redirects, or
     * with "always" on every status (most locations add none: nothing more to do). */
    const struct location *loc = r->loc;
    size_t nextra = loc ? loc->nheaders : 0;
    if (nextra)
        need += added_fields(loc, status, NULL);
    if (reserve(r, &r->resp, need, 0))
        return -1;
    size_t was = r->resp.len;
    uint16_t was_fields = r->nresp;
    char *p = r->resp.data + r->resp.len;
    memcpy(p, lead, lead_len);
    p += lead_len;
    if (pre) {
        memcpy(p, pre->data, pre->len);
        p += pre->len;
    }
    for (size_t i = 0; i < n; i++)
        p = put_field(p, h[i].name, len[2 * i], h[i].value, len[2 * i + 1]);
    uint32_t added = 0;
    if (nextra)
        added = (uint32_t)added_fields(loc, status, &p);
    r->resp.len = (size_t)(p - r->resp.data);
    r->nresp = (uint16_t)(r->nresp + n + lead_n + (pre ? pre->n : 0) + added);
    r->status = status;
    r->out_length = length;
    r->responded = true;
    if (length == BODY_NONE || length == 0 || r->head)
        r->out_eof = true;
    r->out_progress = ev_now(r->c->w->loop);
    if (r->ops->respond(r)) {
        r->responded = false;
        if (r->tunnel)
            r->tunnel = false, r->body_eof = true;
        r->resp.len = was;          /* a handler that tries again starts from the same fields */
        r->nresp = was_fields;
        return -1;
    }
    /* The write deadline is armed as the serve step ends (conn_runtime.arm_deadlines), and
     * only if the response has not all gone by then - most small ones have, and cost no
     * timer at all. */
    r->c->deadlines_due = true;
    return 0;
}

int req_respond(struct request *r, int status, const struct header *h, size_t n, int64_t length)
{
    return respond(r, status, NULL, h, n, length);
}

/* A response in a location that compresses: its fields as compress.c makes them, and, if it
 * is compressed, its compressor in r->src (a file's source, set there by the caller, moves
 * out: req_respond_file_with compresses it from its pages).  Apart from respond, which
 * every response goes through: its arrays live only while it runs. */
static __attribute__((noinline)) int respond_compressing(struct request *r, int status, const struct req_fields *pre,
                                                         const struct header *h, size_t n, int64_t length)
{
    struct header all[REQ_RESPONSE_FIELDS_MAX];
    size_t m = 0;
    if (pre)
        for (size_t off = 0; m < REQ_RESPONSE_FIELDS_MAX;) {
            struct resp_field f;
            struct request fake = { .resp = { (char *)(uintptr_t)pre->data, pre->len, pre->len } };
            if (!request_resp_field(&fake, &off, &f))
                break;
            all[m++] = (struct header){ f.name, f.value };
        }
    for (size_t i = 0; i < n && m < REQ_RESPONSE_FIELDS_MAX; i++)
        all[m++] = h[i];
    struct compress_out out;
    struct worker_counters *wn = &r->c->w->n;
    bool over = wn->compress_state_bytes >= r->loc->compress->memory;
    if (compress_fields(r, status, all, m, length, over, &out))
        return respond_as_is(r, status, pre, h, n, length);
    if (out.skipped)
        counter_add(&wn->compress_skipped, 1);
    if (out.coding == CODING_IDENTITY)
        return respond_as_is(r, status, NULL, out.h, out.n, length);
    struct compressing *cp = sc_calloc(1, sizeof *cp);
    if (!cp || !(cp->enc = encoder_new((enum coding)out.coding, out.level, length, wn, r->loc->compress->memory))) {
        sc_free(cp);
        return respond_as_is(r, status, pre, h, n, length);     /* without memory: as it is */
    }
    cp->flush_each = out.flush_each;
    struct body_source file = r->src;
    int64_t off = r->file_off, left = r->file_left;
    r->src = (struct body_source){ .fd = SRC_COMPRESSING, .arg = cp };
    r->file_left = 0;
    if (respond_as_is(r, status, NULL, out.h, out.n, BODY_STREAM)) {
        r->src = file;
        r->file_off = off, r->file_left = left;
        compressing_free(cp);
        return -1;
    }
    if (!r->head)
        counter_add(&r->c->w->n.compressed_responses[out.coding], 1);
    return 0;
}

static int compress_file(struct request *r, struct compressing *cp, const struct body_source *src, int64_t off,
                         int64_t len);

/* req_respond_file_with in a location that compresses: if the response is compressed, the
 * file is the compressor's input, sent from its pages, then let go. */
static __attribute__((noinline)) int respond_file_compressing(struct request *r, int status,
                                                              const struct req_fields *pre, const struct header *h,
                                                              size_t n, const struct body_source *src, int64_t off,
                                                              int64_t len)
{
    int rc = respond_compressing(r, status, pre, h, n, len);
    struct compressing *cp = compressing(r);
    if (rc || !cp)
        return rc;
    if (!r->head)
        rc = compress_file(r, cp, src, off, len);
    if (src->release)
        src->release(src->arg);
    return rc || r->head ? rc : req_end(r);
}

int req_respond_file_with(struct request *r, int status, const struct req_fields *pre, const struct header *h,
                          size_t n, const struct body_source *src, int64_t off, int64_t len)
{
    r->src = *src;
    r->file_off = off;
    r->file_left = r->head ? 0 : len;
    if (__builtin_expect(r->loc && r->loc->compress, 0) && !r->responded && r->state == REQ_HANDLING)
        return respond_file_compressing(r, status, pre, h, n, src, off, len);
    return respond_as_is(r, status, pre, h, n, len);
}

int req_respond_file(struct request *r, int status, const struct header *h, size_t n, const struct body_source *src,
                     int64_t off, int64_t len)
{
    return req_respond_file_with(r, status, NULL, h, n, src, off, len);
}

/* Wide output: a handler writing a large body (more than REQUEST_OUTPUT_MAX at once) may
 * get ahead by REQUEST_OUTPUT_WIDE instead, while its worker's budget for the difference
 * lasts; the request holds its share until it is freed.  The proxy reads an upstream into
 * this buffer: at 64 KiB a 1 MiB response took sixteen rounds of upstream read, client
 * write and the wake-ups of both peers, at 256 KiB four, and the proxy's CPU per proxied
 * 1 MiB fell by 17-28% over TLS and 38-45% over h2c and HTTP/1.1 (loadtest/proxy --cpu
 * --files 1m.bin --baseline).  The budget keeps
 * what max_handlers assumes a handler holds (config_handler_worst_bytes) true but for a
 * bounded sum per worker, however many clients stop reading large responses. */
static size_t out_cap(struct request *r, size_t want)
{
    uint64_t *held = &r->c->w->n.wide_output_bytes;
    if (!r->wide_out && want > OUTB_MAX && *held + WIDE_EXTRA <= REQUEST_OUTPUT_WIDE_BUDGET) {
        counter_add(held, WIDE_EXTRA);
        r->wide_out = true;
    }
    return r->wide_out ? REQUEST_OUTPUT_WIDE : OUTB_MAX;
}

/* Waits while the output holds its cap (or more): 0 when there is room, -1 if the exchange
 * is gone or the response over. */
static int out_wait(struct request *r, size_t want)
{
    for (;;) {
        if (gone(r) || !r->responded || r->out_eof)
            return -1;
        if (r->outb.len - r->outb_off < out_cap(r, want))
            return 0;
        r->ops->output_ready(r);
        wait_for(r, WAIT_WRITE);
    }
}

static void out_added(struct request *r, size_t n);

/* The compressor's input in pieces of this much: what one piece adds to the output over
 * its cap (a piece's compressed size, at most about the piece) bounds the overshoot. */
#define COMPRESS_PIECE 16384

/* One piece through the compressor into the output, without waiting. */
static int compress_piece(struct request *r, struct compressing *cp, const void *in, size_t len, enum encode_op op)
{
    if (r->outb_off && r->outb.len == r->outb_off) {
        r->outb.len = r->outb_off = 0;
    } else if (r->outb_off) {
        memmove(r->outb.data, r->outb.data + r->outb_off, r->outb.len - r->outb_off);
        r->outb.len -= r->outb_off;
        r->outb_off = 0;
    }
    size_t before = r->outb.len;
    int rc = encoder_put(cp->enc, in, len, op, &r->outb);
    size_t grown = r->outb.len - before;
    r->outb.len = before;
    if (grown)
        out_added(r, grown);
    struct worker_counters *n = &r->c->w->n;
    enum coding c = encoder_coding(cp->enc);
    counter_add(&n->compress_in_bytes[c], len);
    counter_add(&n->compress_out_bytes[c], grown);
    return rc;
}

/* data through the compressor, waiting for room before each piece (the caller's data stays
 * where it is meanwhile); then op's flush or end. */
static int compress_write(struct request *r, struct compressing *cp, const char *p, size_t len, enum encode_op op)
{
    do {
        if (out_wait(r, len ? len : 1))
            return -1;
        size_t n = len < COMPRESS_PIECE ? len : COMPRESS_PIECE;
        if (compress_piece(r, cp, p, n, n == len ? op : ENC_CONTINUE)) {
            req_abort(r);           /* a compressed stream that breaks cannot be sent whole */
            return -1;
        }
        p += n;
        len -= n;
    } while (len);
    r->ops->output_ready(r);
    return 0;
}

/* A file's bytes off..off+len through the compressor, a page run at a time: each read
 * into the per-thread block (below) right before it is compressed, with no wait between. */
static _Thread_local _Alignas(4096) char compress_bounce[COMPRESS_PIECE];
static int compress_file(struct request *r, struct compressing *cp, const struct body_source *src, int64_t off,
                         int64_t len)
{
    while (len > 0) {
        size_t n = len < COMPRESS_PIECE ? (size_t)len : COMPRESS_PIECE;
        if (out_wait(r, n))
            return -1;
        const char *in = src->mem ? (const char *)src->mem + off : compress_bounce;
        if (!src->mem) {
            ssize_t k = pread(src->fd, compress_bounce, n, off);
            if (k <= 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                log_msg(LOG_WARN, "%s: file for %s ended early", conn_peer(r->c), r->target ? r->target : "?");
                req_abort(r);
                return -1;
            }
            n = (size_t)k;
        }
        if (compress_piece(r, cp, in, n, ENC_CONTINUE)) {
            req_abort(r);
            return -1;
        }
        off += (int64_t)n;
        len -= (int64_t)n;
        r->ops->output_ready(r);
    }
    return 0;
}

int req_flush_point(struct request *r)
{
    struct compressing *cp = compressing(r);
    if (!cp || gone(r) || !r->responded || r->out_eof)
        return 0;
    return compress_write(r, cp, NULL, 0, ENC_FLUSH);
}

char *req_write_room(struct request *r, size_t want, size_t *room)
{
    struct compressing *cp = compressing(r);
    if (__builtin_expect(cp != NULL, 0)) {
        /* Room in the compressor's input, never more than a piece: req_write_commit
         * compresses it into the output. */
        if (!want || out_wait(r, want))
            return NULL;
        size_t n = want < COMPRESS_PIECE ? want : COMPRESS_PIECE;
        cp->stage.len = 0;
        if (buf_reserve(&cp->stage, n))
            return NULL;
        *room = n;
        return cp->stage.data;
    }
    for (;;) {
        if (gone(r) || !r->responded || r->out_eof || !want)
            return NULL;
        size_t pending = r->outb.len - r->outb_off, cap = out_cap(r, want);
        if (pending >= cap) {
            r->ops->output_ready(r);
            wait_for(r, WAIT_WRITE);
            continue;
        }
        size_t n = cap - pending < want ? cap - pending : want;
        /* What the front end took is room again: a stream topped up as fast as it is
         * taken never empties, and the buffer would otherwise grow with all it carried. */
        if (r->outb_off && r->outb.len + n > r->outb.cap) {
            memmove(r->outb.data, r->outb.data + r->outb_off, pending);
            r->outb.len = pending;
            r->outb_off = 0;
        }
        if (buf_reserve(&r->outb, n))
            return NULL;
        *room = n;
        return r->outb.data + r->outb.len;
    }
}

/* n more bytes of output, written where req_write_room said. */
static void out_added(struct request *r, size_t n)
{
    bool was_empty = r->outb.len == r->outb_off;
    if (was_empty) {                    /* data is ready again: the peer's turn from here */
        r->out_progress = ev_now(r->c->w->loop);
        request_arm_timer(r);
    }
    r->outb.len += n;
    /* Output after an empty spell that the limit may hold back: only the timer, aimed now
     * that there is output, would ever let it go (the front end parks without writing). */
    if (__builtin_expect(r->rate_limited, 0) && was_empty)
        request_arm_timer(r);
}

int req_write_commit(struct request *r, size_t n)
{
    struct compressing *cp = compressing(r);
    if (__builtin_expect(cp != NULL, 0)) {
        if (gone(r) || !r->responded || r->out_eof || n > cp->stage.cap)
            return -1;
        return n ? compress_write(r, cp, cp->stage.data, n, cp->flush_each ? ENC_FLUSH : ENC_CONTINUE) : 0;
    }
    if (gone(r) || !r->responded || r->out_eof || n > r->outb.cap - r->outb.len)
        return -1;
    if (n) {
        out_added(r, n);
        r->ops->output_ready(r);
    }
    return 0;
}

int req_write(struct request *r, const void *data, size_t len)
{
    struct compressing *cp = compressing(r);
    if (__builtin_expect(cp != NULL, 0))
        return len ? compress_write(r, cp, data, len, cp->flush_each ? ENC_FLUSH : ENC_CONTINUE) : 0;
    const char *p = data;
    while (len) {
        size_t n;
        char *dst = req_write_room(r, len, &n);
        if (!dst)
            return -1;
        memcpy(dst, p, n);
        out_added(r, n);
        p += n;
        len -= n;
    }
    r->ops->output_ready(r);
    return 0;
}

/* The compressed stream's end, never waited for (the serve loop ends a handler's response
 * too): what the library kept back and its trailer, a few KiB past the cap.  Apart from
 * req_end, which every response goes through. */
static __attribute__((noinline, cold)) int end_compressed(struct request *r, struct compressing *cp)
{
    if (!r->out_eof && !r->head && compress_piece(r, cp, NULL, 0, ENC_FINISH)) {
        req_abort(r);
        return -1;
    }
    return 0;
}

int req_end(struct request *r)
{
    if (gone(r) || !r->responded)
        return -1;
    struct compressing *cp = compressing(r);
    if (__builtin_expect(cp != NULL, 0) && end_compressed(r, cp))
        return -1;
    r->out_eof = true;
    r->ops->output_ready(r);
    return 0;
}

static struct request_extra *extra(struct request *r);

int req_end_with_trailers(struct request *r, const struct header *h, size_t n)
{
    if (gone(r) || !r->responded || r->out_eof)
        return -1;
    struct request_extra *e = n ? extra(r) : NULL;
    if (n && !e)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(h[i].name), vl = strlen(h[i].value);
        if (buf_reserve(&e->trailers, nl + vl + 2))
            return -1;
        char *d = e->trailers.data + e->trailers.len;
        for (size_t k = 0; k < nl; k++)
            d[k] = (char)(h[i].name[k] >= 'A' && h[i].name[k] <= 'Z' ? h[i].name[k] + 32 : h[i].name[k]);
        d[nl] = 0;
        memcpy(d + nl + 1, h[i].value, vl + 1);
        e->trailers.len += nl + vl + 2;
    }
    return req_end(r);
}

bool request_trailer(const struct request *r, size_t *off, struct header *f)
{
    if (!r->extra || *off >= r->extra->trailers.len)
        return false;
    f->name = r->extra->trailers.data + *off;
    f->value = f->name + strlen(f->name) + 1;
    *off = (size_t)(f->value - r->extra->trailers.data) + strlen(f->value) + 1;
    return true;
}

void req_abort(struct request *r)
{
    if (r->aborted || gone(r))
        return;
    r->aborted = true;
    r->ops->cancel(r);
    conn_mark_ready(r->c);          /* the serve loop acts on it at its next turn */
}

int req_simple(struct request *r, int status, const char *content_type, const void *body, size_t len)
{
    struct header h[] = { { "content-type", content_type } };
    if (req_respond(r, status, h, 1, (int64_t)len))
        return -1;
    if (len && !r->head && req_write(r, body, len))
        return -1;
    return len && !r->head ? req_end(r) : 0;
}

/* ---- the response body, for the front ends ---- */

size_t request_out_avail(const struct request *r)
{
    if (r->src.fd >= 0 || r->src.mem)
        return (size_t)r->file_left;
    return r->outb.len - r->outb_off;
}

size_t request_rate_allows(const struct request *r, size_t avail)
{
    return rate_allows(r->extra->rate, ev_now(r->c->w->loop), avail);
}

/* n bytes of a rate-limited response went: the timer is aimed at the next burst. */
static void rate_taken(struct request *r, size_t n)
{
    rate_took(r->extra->rate, ev_now(r->c->w->loop), n);
    request_arm_timer(r);
}

/* A handler waiting for room in its output runs again: at once, or under a rate limit once
 * the output is down to one burst (what the limit takes is as slow as the limit). */
static void output_taken(struct request *r)
{
    if (r->wait == WAIT_WRITE &&
        (!r->rate_limited || r->outb.len - r->outb_off <= rate_slice(r->extra->rate)))
        make_runnable(r);
}

/* A read lands where the kernel's copy is fast (copy.h): straight into dst, or, when dst
 * lies just after the file position modulo 4096 (an HTTP/2 payload, 9 bytes after its
 * frame header, over page-aligned file data), through a per-thread block placed half a
 * page away from both, then one user-space copy that is fast too. */
#define FILE_BOUNCE 16384
static _Thread_local _Alignas(4096) char file_bounce[FILE_BOUNCE + 4096];

static int file_read(struct request *r, char *dst, size_t n)
{
    for (size_t done = 0; done < n;) {
        size_t want = n - done;
        int64_t pos = r->file_off + (int64_t)done;
        char *to = dst + done;
        bool bounce = want >= COPY_PIECE && copy_near_behind(to, (const void *)(uintptr_t)pos);
        if (bounce) {
            to = file_bounce + (((uintptr_t)dst + done + 2048) & 4095);
            if (want > FILE_BOUNCE)
                want = FILE_BOUNCE;
        }
        ssize_t k = pread(r->src.fd, to, want, pos);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            log_msg(LOG_WARN, "%s: file for %s ended early", conn_peer(r->c), r->target ? r->target : "?");
            return -1;
        }
        if (bounce)
            memcpy(dst + done, to, (size_t)k);
        done += (size_t)k;
    }
    return 0;
}

int request_out_take(struct request *r, char *dst, size_t n)
{
    if (r->src.mem) {
        copy_apart(dst, (const char *)r->src.mem + r->file_off, n);
    } else if (r->src.fd >= 0) {
        if (file_read(r, dst, n))
            return -1;
    } else {
        copy_apart(dst, r->outb.data + r->outb_off, n);
        r->outb_off += (uint32_t)n;
        if (r->outb_off == r->outb.len) {
            buf_free(&r->outb);
            r->outb_off = 0;
        }
        output_taken(r);
    }
    if (r->src.fd >= 0 || r->src.mem) {
        r->file_off += (int64_t)n;
        r->file_left -= (int64_t)n;
    }
    r->bytes_sent += n;
    r->out_progress = ev_now(r->c->w->loop);
    if (r->rate_limited)
        rate_taken(r, n);
    return 0;
}

size_t request_out_give(struct request *r, struct buf *out, uint32_t *out_off)
{
    if (r->src.fd >= 0 || r->src.mem || out->len || r->outb.len == r->outb_off)
        return 0;
    size_t n = r->outb.len - r->outb_off;
    if (r->rate_limited && request_rate_allows(r, n) < n)
        return 0;
    buf_free(out);
    *out = r->outb;
    *out_off = r->outb_off;
    r->outb = (struct buf){ 0 };
    r->outb_off = 0;
    output_taken(r);
    r->bytes_sent += n;
    r->out_progress = ev_now(r->c->w->loop);
    if (r->rate_limited)
        rate_taken(r, n);
    return n;
}

bool request_out_finished(const struct request *r) { return r->out_eof && !r->aborted && request_out_avail(r) == 0; }

bool request_out_file(struct request *r, struct conn *c)
{
    if (r->src.fd < 0 || r->src.mem || r->file_left <= 0 || !r->src.hold)
        return false;
    uint64_t n = (uint64_t)r->file_left;
    if (r->rate_limited && !(n = request_rate_allows(r, (size_t)n)))
        return false;
    if (transport_file(&c->sock, r->src.fd, r->file_off, n, r->src.release, r->src.arg))
        return false;
    r->src.hold(r->src.arg);
    r->bytes_sent += n;
    r->file_off += (int64_t)n;
    r->file_left -= (int64_t)n;
    r->out_progress = ev_now(r->c->w->loop);
    if (r->rate_limited)
        rate_taken(r, (size_t)n);
    return true;
}

void request_sent_all(struct request *r) { r->sent_all = true; }

void request_shrink(struct request *r)
{
    /* (The head's fields stay where they are: the handler may hold pointers into them;
     * request_start gave them their size.)  The response's fields go once the front end
     * has packed them into bytes. */
    if (r->head_out)
        free_buf(r, &r->resp);
    /* Output waiting for the peer: what is unsent, not what went out before it. */
    if (r->outb_off) {
        memmove(r->outb.data, r->outb.data + r->outb_off, r->outb.len - r->outb_off);
        r->outb.len -= r->outb_off;
        r->outb_off = 0;
        buf_fit(&r->outb);
    }
    if (r->body.len == r->body_off)
        buf_free(&r->body), r->body_off = 0;
    if (r->extra && r->extra->park_frees && !r->extra->park_frees->len)
        buf_free(r->extra->park_frees);
    struct compressing *cp = compressing(r);
    if (cp)
        buf_free(&cp->stage);       /* empty between a room and its commit */
}

/* ---- deadlines and sleeping ---- */

static void arm_deadlines(struct conn *c)
{
    c->deadlines_due = false;
    for (struct request *r = c->requests->all; r; r = r->next)
        if (r->responded && !r->sent_all)
            request_arm_timer(r);
}

enum deadline { DEADLINE_NONE, DEADLINE_WAKE, DEADLINE_BODY, DEADLINE_WRITE, DEADLINE_RATE };

/* The nearest thing this request's timer must catch, and which one. */
static ev_tstamp deadline(const struct request *r, enum deadline *kind)
{
    ev_tstamp best = 0;
    *kind = DEADLINE_NONE;
    if (r->wake_at) {
        best = r->wake_at;
        *kind = DEADLINE_WAKE;
    }
    if (r->state != REQ_HANDLING && r->state != REQ_DRAINING)
        return best;
    /* Body is awaited by a handler, or by a front end that answered in full and drops
     * what still comes (HTTP/2 until the client ends its stream). */
    const struct config *cfg = r->cfg;
    if (!r->body_eof && !r->tunnel && (r->handler || r->sent_all) && cfg->body_timeout > 0 && r->body.len == r->body_off) {
        ev_tstamp t = r->in_progress + cfg->body_timeout;
        if (!best || t < best)
            best = t, *kind = DEADLINE_BODY;
    }
    size_t ready;
    if (r->responded && !r->sent_all && (ready = request_out_avail(r)) > 0) {
        if (cfg->write_timeout > 0) {
            ev_tstamp t = r->out_progress + cfg->write_timeout;
            if (!best || t < best)
                best = t, *kind = DEADLINE_WRITE;
        }
        /* Output a rate limit holds back: when its next burst may go. */
        if (__builtin_expect(r->rate_limited, 0)) {
            ev_tstamp now = ev_now(r->c->w->loop), t = rate_due(r->extra->rate, now, ready);
            if (t > now && (!best || t < best))
                best = t, *kind = DEADLINE_RATE;
        }
    }
    return best;
}

void request_arm_timer(struct request *r)
{
    enum deadline kind;
    ev_tstamp when = deadline(r, &kind);
    struct ev_loop *loop = r->c->w->loop;
    if (!when)
        return;         /* a timer still running finds nothing to do and stops */
    if (ev_is_active(&r->timer)) {
        if (ev_now(loop) + ev_timer_remaining(loop, &r->timer) <= when + 0.001)
            return;
        ev_timer_stop(loop, &r->timer);
    }
    ev_timer_set(&r->timer, when - ev_now(loop) > 0 ? when - ev_now(loop) : 0.001, 0);
    ev_timer_start(loop, &r->timer);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct request *r = t->data;
    struct conn *c = r->c;
    ev_tstamp now = ev_now(loop);
    if (r->wake_at && r->wake_at <= now + 0.001) {
        r->wake_at = 0;
        make_runnable(r);
    }
    enum deadline kind;
    ev_tstamp when = deadline(r, &kind);
    if (when && when <= now + 0.001 && (kind == DEADLINE_BODY || kind == DEADLINE_WRITE)) {
        double limit = kind == DEADLINE_BODY ? r->cfg->body_timeout : r->cfg->write_timeout;
        log_msg(LOG_DEBUG, "%s: %s %s: %s for %.0fs, cancelled", conn_peer(c), r->method ? r->method : "-",
                r->target ? r->target : "-", kind == DEADLINE_BODY ? "no request body" : "peer takes no response",
                limit);
        if (kind == DEADLINE_BODY && !r->responded)
            r->status = 408;        /* request_closed logs it so, as nginx's client_body_timeout */
        r->ops->cancel(r);
        if (now - c->last_io >= limit)
            conn_abort_stalled(c);
    } else {
        request_arm_timer(r);
    }
    /* A burst the rate held back may go: an HTTP/2 stream deferred for it resumes. */
    if (r->rate_limited)
        r->ops->output_ready(r);
    /* Last, and the only wake-up: the serve loop it runs may close c and release r
     * (cancel only marks, or HTTP/1.1's would free both under this function). */
    conn_wake(c);
}

void req_sleep(struct request *r, double seconds)
{
    if (gone(r))
        return;
    r->wake_at = ev_now(r->c->w->loop) + seconds;
    request_arm_timer(r);
    while (r->wake_at && !gone(r))
        wait_for(r, WAIT_TIMER);
    r->wake_at = 0;
}

/* Readiness of the descriptor a handler waits on: it runs again, and the watcher stops
 * (a wait is one-shot, so an fd nobody waits on wakes nothing).  The watcher and what it
 * found are in the request's extra, so a parked handler's stack is never touched.  The
 * connection runs once the loop has delivered all it found ready (the worker's ready
 * list): the upstream answers of several of an HTTP/2 connection's streams then go out
 * in one step and one write, not a step and a write each. */
static void on_fd_ready(struct ev_loop *loop, ev_io *io, int revents)
{
    struct request *r = io->data;
    ev_io_stop(loop, io);
    r->extra->fd_events = (uint8_t)((revents & EV_READ ? REQ_READABLE : 0) | (revents & EV_WRITE ? REQ_WRITABLE : 0));
    r->wake_at = 0;
    make_runnable(r);
    conn_mark_ready(r->c);
}

static struct request_extra *extra(struct request *r);

/* req_wait_fd (w NULL: the request's own watcher, set to fd) and req_wait_io. */
static int wait_on(struct request *r, ev_io *w, int fd, int events, double timeout)
{
    if (gone(r))
        return -1;
    if ((events & REQ_BODY) && body_ready(r))
        return REQ_BODY;
    struct request_extra *e = extra(r);
    if (!e)
        return -1;
    struct ev_loop *loop = r->c->w->loop;
    int io = (events & REQ_READABLE ? EV_READ : 0) | (events & REQ_WRITABLE ? EV_WRITE : 0);
    if (!w) {
        w = &e->fd_wait;
        if (io)
            ev_io_set(w, fd, io);      /* a descriptor the loop may not know */
    }
    if (io) {
        w->data = r;
        ev_set_cb(w, on_fd_ready);
        ev_io_modify(w, io);           /* the same descriptor: nothing to tell the kernel */
        ev_io_start(loop, w);
    }
    e->waiting_on = w;
    e->fd_events = (uint8_t)(events & REQ_BODY);
    r->wake_at = ev_now(loop) + (timeout > 0 ? timeout : 1e9);
    request_arm_timer(r);
    int ready = 0;
    for (;;) {
        wait_for(r, WAIT_FD);
        if (gone(r))
            break;
        if (io && !ev_is_active(w))
            ready |= e->fd_events & (REQ_READABLE | REQ_WRITABLE);
        if ((events & REQ_BODY) && body_ready(r))
            ready |= REQ_BODY;
        if (ready || !r->wake_at)
            break;
    }
    ev_io_stop(loop, w);
    e->waiting_on = NULL;
    e->fd_events = 0;
    r->wake_at = 0;
    return gone(r) ? -1 : ready;
}

int req_wait_fd(struct request *r, int fd, int events, double timeout) { return wait_on(r, NULL, fd, events, timeout); }
int req_wait_io(struct request *r, ev_io *w, int events, double timeout) { return wait_on(r, w, -1, events, timeout); }

/* ---- what a handler may ask ---- */

const char *req_method(const struct request *r) { return r->method; }
const char *req_target(const struct request *r) { return r->target; }
const char *req_authority(const struct request *r) { return r->authority ? r->authority : ""; }
int req_host_length(const struct request *r) { return r->host_checked ? r->host_len : host_length(r->authority); }
const char *req_protocol(const struct request *r)
{
    static const char *const names[] = { [REQ_HTTP1] = "http/1.1", [REQ_H2] = "h2", [REQ_H2C] = "h2c" };
    return names[r->protocol];
}
const char *req_peer(const struct request *r)
{
    if (!r->client_set)
        return conn_peer(r->c);
    static __thread char text[64];
    sockaddr_text(&r->extra->client.sa, text, sizeof text);
    return text;
}

const char *req_peer_address(const struct request *r)
{
    if (!r->client_set)
        return conn_peer_address(r->c);
    static __thread char text[INET6_ADDRSTRLEN];
    const struct request_extra *e = r->extra;
    const void *a = e->client.sa.sa_family == AF_INET ? (const void *)&e->client.in.sin_addr
                                                      : (const void *)&e->client.in6.sin6_addr;
    if (!inet_ntop(e->client.sa.sa_family, a, text, sizeof text))
        snprintf(text, sizeof text, "-");
    return text;
}

const struct sockaddr *req_client(const struct request *r) { return r->client_set ? &r->extra->client.sa : &r->c->peer.sa; }
const struct sockaddr *req_peer_sockaddr(const struct request *r) { return &r->c->peer.sa; }

int req_set_client(struct request *r, const struct sockaddr *sa)
{
    size_t n = sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
    if (!n)
        return 0;
    struct request_extra *e = extra(r);
    if (!e)
        return -1;
    memcpy(&e->client, sa, n);
    r->client_set = true;
    return 0;
}

bool req_is_tls(const struct request *r) { return r->c->tls; }
unsigned req_listener(const struct request *r) { return r->c->listener; }
const char *req_tls_server_name(const struct request *r) { return r->c->sock.ssl ? tls_server_name(r->c->sock.ssl) : NULL; }
bool req_tls_certificate_covers(const struct request *r, const char *host, size_t len)
{
    return r->c->sock.ssl && tls_certificate_covers(r->c->sock.ssl, host, len);
}
const struct config *req_config(const struct request *r) { return r->cfg; }
const struct location *req_location(const struct request *r) { return r->loc; }
void req_set_location(struct request *r, const struct location *loc) { r->loc = loc; }

int req_limit_body(struct request *r, uint64_t max)
{
    r->body_max = max;
    if (max && r->content_length >= 0 && (uint64_t)r->content_length > max)
        return -1;
    if (max && r->body_seen > max) {
        r->body_over = true;        /* it came before the limit was known */
        buf_free(&r->body);
        r->body_off = 0;
        return -1;
    }
    return 0;
}

bool req_body_too_large(const struct request *r) { return r->body_over; }

void req_reset(struct request *r)
{
    if (!gone(r))
        r->ops->cancel(r);         /* the serve loop runs after this handler's turn */
}
bool req_is_head(const struct request *r) { return r->head; }
int64_t req_content_length(const struct request *r) { return r->content_length; }
double req_now(const struct request *r) { return ev_now(r->c->w->loop); }
double req_started(const struct request *r) { return r->started; }
double req_duration(const struct request *r) { return r->ended > r->started ? r->ended - r->started : 0; }
int req_status(const struct request *r) { return r->status; }
uint64_t req_bytes_sent(const struct request *r) { return r->bytes_sent; }

const char *req_header(const struct request *r, const char *name) { return field(r, name); }
const char *req_known(const struct request *r, enum known_field k) { return k < KF_COUNT ? known(r, k) : NULL; }
const char *req_scheme(const struct request *r) { return r->c->sock.ssl ? "https" : "http"; }
const char *req_upgrade(const struct request *r)
{
    return !r->upgrade_offered ? NULL : r->protocol == REQ_HTTP1 ? known(r, KF_UPGRADE) : known(r, KF_PROTOCOL);
}
bool req_body_empty(const struct request *r) { return r->body_eof && r->body.len == 0 && r->body_off == 0 && r->content_length <= 0; }

size_t req_headers(const struct request *r, struct header *out, size_t cap)
{
    size_t n = 0;
    bool set = SET_FIELDS(r);
    for (size_t off = 0; off < r->hdr.len && n < cap;) {
        const char *name = r->hdr.data + off, *v = name + strlen(name) + 1;
        off = (size_t)(v - r->hdr.data) + strlen(v) + 1;
        if (!set || !set_field(r, name))
            out[n++] = (struct header){ name, v };
    }
    for (const char *p = set ? r->extra->set_fields : ""; *p && n < cap;) {
        const char *v = p + strlen(p) + 1;
        if (v[0] == '+')
            out[n++] = (struct header){ p, v + 1 };
        p = v + strlen(v) + 1;
    }
    return n;
}

int req_set_field(struct request *r, const char *name, const char *value)
{
    struct request_extra *e = extra(r);
    if (!e)
        return -1;
    size_t old = 0;                /* the entries before the terminating empty name */
    if (e->set_fields) {
        const char *p = e->set_fields;
        while (*p) {
            p += strlen(p) + 1;
            p += strlen(p) + 1;
        }
        old = (size_t)(p - e->set_fields);
    }
    size_t nl = strlen(name), vl = value ? strlen(value) : 0;
    char *f = sc_malloc(old + nl + 1 + 1 + vl + 1 + 1);
    if (!f)
        return -1;
    if (old)
        memcpy(f, e->set_fields, old);
    char *p = f + old;
    memcpy(p, name, nl + 1);
    p += nl + 1;
    *p++ = value ? '+' : '-';
    if (vl)
        memcpy(p, value, vl);
    p[vl] = 0;
    p[vl + 1] = 0;
    sc_free(e->set_fields);
    e->set_fields = f;
    return 0;
}

static struct request_extra *extra(struct request *r)
{
    if (!r->extra && (r->extra = sc_calloc(1, sizeof *r->extra))) {
        ev_init(&r->extra->fd_wait, on_fd_ready);
        r->extra->fd_wait.data = r;
    }
    return r->extra;
}

/* The meter goes in the extra's tail, which only a rate-limited request's extra has: one
 * made already (a trusted proxy's client) moves to a bigger one, before any wait can have
 * a watcher of it registered. */
int req_limit_rate(struct request *r, uint64_t rate, uint64_t after)
{
    if (!rate || r->responded || gone(r))
        return 0;
    if (!r->rate_limited) {
        struct request_extra *old = r->extra, *e = sc_calloc(1, sizeof *e + sizeof e->rate[0]);
        if (!e)
            return -1;
        if (old) {
            memcpy(e, old, sizeof *e);
            sc_free(old);
        } else {
            ev_init(&e->fd_wait, on_fd_ready);
        }
        e->fd_wait.data = r;
        r->extra = e;
        r->rate_limited = true;
    }
    rate_start(r->extra->rate, rate, after, ev_now(r->c->w->loop));
    return 0;
}

void req_park_frees(struct request *r, struct buf *b)
{
    struct request_extra *e = b || r->extra ? extra(r) : NULL;
    if (e)
        e->park_frees = b;
}

struct req_upstream *req_upstream(struct request *r)
{
    struct request_extra *e = extra(r);
    if (!e)
        return NULL;
    if (!e->has_upstream) {
        e->has_upstream = true;
        e->upstream.connect_time = e->upstream.header_time = e->upstream.response_time = -1;
    }
    return &e->upstream;
}

const struct req_upstream *req_upstream_info(const struct request *r)
{
    return r->extra && r->extra->has_upstream ? &r->extra->upstream : NULL;
}

void req_set_refused_by(struct request *r, const char *rule)
{
    struct request_extra *e = extra(r);
    if (e)
        e->refused_by = rule;
}

const char *req_refused_by(const struct request *r) { return r->extra ? r->extra->refused_by : NULL; }

int req_at_release(struct request *r, void (*fn)(struct request *r))
{
    struct request_extra *e = extra(r);
    if (!e)
        return -1;
    e->at_release = fn;
    return 0;
}

bool http_list_has(const char *list, const char *token)
{
    size_t tl = strlen(token);
    for (const char *s = list; s && *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        const char *e = s;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - s) == tl && !strncasecmp(s, token, tl))
            return true;
        s = e;
    }
    return false;
}

size_t req_header_count(const struct request *r) { return r->nfields; }

size_t req_header_values(const struct request *r, const char *name, const char **out, size_t max)
{
    const char *set = SET_FIELDS(r) ? set_field(r, name) : NULL;
    if (set) {
        if (set[0] == '-' || !max)
            return 0;
        out[0] = set + 1;
        return 1;
    }
    size_t n = 0;
    for (size_t off = 0; off < r->hdr.len && max;) {
        const char *f = r->hdr.data + off, *v = f + strlen(f) + 1;
        off = (size_t)(v - r->hdr.data) + strlen(v) + 1;
        if (strcmp(f, name))
            continue;
        if (n == max)
            memmove(out, out + 1, (max - 1) * sizeof *out), n--;
        out[n++] = v;
    }
    return n;
}

struct header req_header_at(const struct request *r, size_t i)
{
    size_t off = 0;
    for (; off < r->hdr.len; i--) {
        const char *n = r->hdr.data + off, *v = n + strlen(n) + 1;
        size_t vl = strlen(v);
        if (!i)
            return (struct header){ n, v };
        off = (size_t)(v - r->hdr.data) + vl + 1;
    }
    return (struct header){ NULL, NULL };
}

/* The connection is going: every request is closed, each handler still running learns
 * it at its next call (one more turn ends most), and one that does not is dropped; then
 * the set goes. */
static void cancel_all(struct conn *c)
{
    for (int round = 0; c->requests->all && round < 4; round++) {
        for (struct request *r = c->requests->all, *next; r; r = next) {
            next = r->next;
            request_closed(r);
        }
        run_handlers(c);
    }
    struct request *r;
    while ((r = c->requests->all)) {
        if (r->handler) {
            log_msg(LOG_WARN, "%s: handler of %s ignored its cancellation; dropped", conn_peer(c),
                    r->target ? r->target : "-");
            if (r->parked)
                request_drop_parked(r);
            else
                coro_destroy(r->handler);
            r->handler = NULL;
            c->requests->live--;
            counter_add(&c->w->n.handler_coroutines, -1);
        }
        r->queued = false;
        if (r->state == REQ_ORPHANED)
            set_state(r, REQ_DONE);
        else
            release(r);
    }
    request_set_free(c);
}

void request_set_free(struct conn *c)
{
    sc_free(c->requests);
    c->requests = NULL;
    c->runnable = false;
}

static bool any_open(const struct conn *c) { return c->requests->open || c->requests->live; }
const struct conn_runtime request_runtime = {
    .run = run_handlers, .open = any_open, .tick = request_park_waiting,
    .arm_deadlines = arm_deadlines, .cancel_all = cancel_all,
};
