/* Streams and their handler coroutines, with the blocking-style handler API.
 *
 * A handler runs in a coroutine of its own and is resumed only by its connection's serve
 * loop (conn_run_handlers), never from inside an nghttp2 callback.  When it must wait -
 * for request body, for room in its output, for a timer - it records why and yields;
 * whatever ends the wait (a DATA frame, nghttp2 taking its output, the timer, the stream
 * closing) queues it as runnable and wakes the connection.  Waiting handlers hold their
 * stacks but not the serve loop's, so a connection with only waiting handlers parks.
 * Output is buffered per stream up to OUTB_MAX, so a handler can get ahead of the peer
 * by that much and no more.
 *
 * A stream that waits on its peer has a deadline, so no peer can pin a stream's memory
 * by going quiet: body_timeout while the handler has read all the body there is and the
 * request is not complete (the window is open, so the wait is the peer's), write_timeout
 * while response data is ready and does not go out (the peer's window is shut).  One
 * timer per stream serves both and h2_sleep; it is armed lazily (moved only earlier)
 * and re-aimed when it fires, so progress costs a timestamp, not a timer operation.
 * A stream is freed in one place, stream_release_if_done, which stops that timer
 * whether it is active or expired and waiting to run. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "h2park.h"
#include "scalloc.h"

#define OUTB_MAX STREAM_OUTPUT_MAX
#define MAX_RESPONSE_HEADERS 16

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents);

struct stream *stream_new(struct conn *c, int32_t id)
{
    struct stream *s = sc_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->c = c;
    s->id = id;
    s->file_fd = -1;
    s->content_length = -1;
    s->if_modified_since = -1;
    s->started = s->in_progress = s->out_progress = ev_now(c->w->loop);
    ev_init(&s->timer, on_timer);
    s->timer.data = s;
    s->snext = c->streams;
    if (c->streams)
        c->streams->sprev = s;
    c->streams = s;
    return s;
}

void stream_make_runnable(struct stream *s)
{
    if (s->queued || !s->handler)
        return;
    s->queued = true;
    s->next_runnable = NULL;
    struct conn *c = s->c;
    if (c->runnable_tail)
        c->runnable_tail->next_runnable = s;
    else
        c->runnable = s;
    c->runnable_tail = s;
}

void stream_release_if_done(struct stream *s)
{
    if (!s->closed || !s->handler_done || s->queued)
        return;
    struct conn *c = s->c;
    if (s->sprev)
        s->sprev->snext = s->snext;
    else
        c->streams = s->snext;
    if (s->snext)
        s->snext->sprev = s->sprev;
    if (s->file)
        open_file_release(s->file);
    else if (s->file_fd >= 0)
        close(s->file_fd);
    /* Unconditionally: a timer that expired but has not run yet is pending, not active,
     * and would run on freed memory. */
    ev_timer_stop(c->w->loop, &s->timer);
    buf_free(&s->hdr);
    buf_free(&s->body);
    buf_free(&s->outb);
    sc_free(s);
}

static void index_pseudo_headers(struct stream *s)
{
    for (size_t off = 0; off < s->hdr.len;) {
        char *name = s->hdr.data + off;
        char *value = name + strlen(name) + 1;
        off = (size_t)(value - s->hdr.data) + strlen(value) + 1;
        if (!strcmp(name, ":method"))
            s->method = value;
        else if (!strcmp(name, ":path"))
            s->path = value;
        else if (!strcmp(name, ":authority"))
            s->authority = value;
    }
    s->head = s->method && !strcmp(s->method, "HEAD");
}

static void *handler_main(void *arg)
{
    struct stream *s = arg;
    if (s->too_large) {
        static const char msg[] = "request header fields too large\n";
        h2_simple(s, 431, "text/plain", msg, sizeof msg - 1);
    } else {
        route_request(s);
    }
    return NULL;
}

void stream_start_handler(struct stream *s)
{
    struct conn *c = s->c;
    index_pseudo_headers(s);
    c->open_streams++;
    counter_add(&c->w->n.streams_total, 1);
    /* The cap that bounds what all connections together can pin (max_handlers). */
    if ((long)c->w->n.handler_coroutines >= config_max_handlers(&cfg)) {
        log_rate_limited(LOG_WARN, &c->w->refused_logged, "worker %d: max_handlers (%ld) reached: REFUSED_STREAM",
                         c->w->id, config_max_handlers(&cfg));
        s->handler_done = true;
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    s->handler = coro_create(handler_main, s, 0);
    if (!s->handler) {
        s->handler_done = true;
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    c->live_handlers++;
    counter_add(&c->w->n.handler_coroutines, 1);
    stream_make_runnable(s);
    stream_arm_timer(s);
}

static void handler_finished(struct stream *s)
{
    struct conn *c = s->c;
    s->handler = NULL;
    s->handler_done = true;
    c->live_handlers--;
    counter_add(&c->w->n.handler_coroutines, -1);
    if (!s->closed) {
        if (!s->responded) {
            static const char msg[] = "the handler gave no response\n";
            h2_simple(s, 500, "text/plain", msg, sizeof msg - 1);
        } else if (!s->out_eof && s->file_fd < 0) {
            h2_end(s);
        }
        stream_end_unread_request(s);
    }
}

void conn_run_handlers(struct conn *c)
{
    struct stream *s;
    while ((s = c->runnable)) {
        c->runnable = s->next_runnable;
        if (!c->runnable)
            c->runnable_tail = NULL;
        s->queued = false;
        if (s->handler && !coro_resume(s->handler, NULL))
            handler_finished(s);
        stream_release_if_done(s);
    }
}

/* Gives control back to the serve loop until something queues this stream again. */
static void wait_for(struct stream *s, enum stream_wait why)
{
    s->wait = (uint8_t)why;
    coro_yield(NULL);
    s->wait = WAIT_NONE;
}

ssize_t h2_read_body(struct stream *s, void *buf, size_t len)
{
    for (;;) {
        size_t avail = s->body.len - s->body_off;
        if (avail) {
            size_t n = avail < len ? avail : len;
            memcpy(buf, s->body.data + s->body_off, n);
            s->body_off += n;
            if (s->body_off == s->body.len) {
                buf_free(&s->body);
                s->body_off = 0;
                s->in_progress = ev_now(s->c->w->loop);   /* the peer's turn from here */
            }
            if (!s->closed)
                nghttp2_session_consume(s->c->h2, s->id, n);
            return (ssize_t)n;
        }
        if (s->body_eof)
            return 0;
        if (s->cancelled || s->closed)
            return -1;
        stream_arm_timer(s);
        wait_for(s, WAIT_BODY);
    }
}

static int submit(struct stream *s, int status, const struct h2_header *h, size_t n, bool body)
{
    if (s->responded || s->closed || s->cancelled)
        return -1;
    if (n > MAX_RESPONSE_HEADERS)
        n = MAX_RESPONSE_HEADERS;
    char status_text[8];
    snprintf(status_text, sizeof status_text, "%03d", status % 1000);
    nghttp2_nv nv[MAX_RESPONSE_HEADERS + 1];
    nv[0] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status_text, 7, 3, NGHTTP2_NV_FLAG_NONE };
    for (size_t i = 0; i < n; i++)
        nv[i + 1] = (nghttp2_nv){ (uint8_t *)h[i].name, (uint8_t *)h[i].value, strlen(h[i].name),
                                  strlen(h[i].value), NGHTTP2_NV_FLAG_NONE };
    nghttp2_data_provider provider = { .source.ptr = s, .read_callback = data_source_read };
    if (s->head)
        body = false;
    if (nghttp2_submit_response(s->c->h2, s->id, nv, n + 1, body ? &provider : NULL))
        return -1;
    s->responded = true;
    s->status = status;
    if (!body)
        s->out_eof = true;
    return 0;
}

int h2_respond(struct stream *s, int status, const struct h2_header *h, size_t n, bool body)
{
    return submit(s, status, h, n, body);
}

int h2_respond_file(struct stream *s, int status, const struct h2_header *h, size_t n, int fd, int64_t off, int64_t len)
{
    s->file_fd = fd;
    s->file_off = off;
    s->file_left = len;
    s->out_eof = true;
    if (submit(s, status, h, n, len > 0)) {
        if (!s->file)
            close(fd);
        s->file_fd = -1;
        return -1;
    }
    s->out_progress = ev_now(s->c->w->loop);
    stream_arm_timer(s);
    return 0;
}

static void resume_output(struct stream *s)
{
    if (s->deferred && !s->closed) {
        s->deferred = false;
        nghttp2_session_resume_data(s->c->h2, s->id);
    }
}

int h2_write(struct stream *s, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        if (s->closed || s->cancelled || !s->responded || s->out_eof)
            return -1;
        size_t pending = s->outb.len - s->outb_off;
        if (pending >= OUTB_MAX) {
            resume_output(s);
            wait_for(s, WAIT_WRITE);
            continue;
        }
        size_t n = OUTB_MAX - pending < len ? OUTB_MAX - pending : len;
        if (buf_append(&s->outb, p, n))
            return -1;
        if (!pending) {     /* data is ready again: the peer's turn from here */
            s->out_progress = ev_now(s->c->w->loop);
            stream_arm_timer(s);
        }
        p += n;
        len -= n;
    }
    resume_output(s);
    return 0;
}

int h2_end(struct stream *s)
{
    if (s->closed || !s->responded)
        return -1;
    s->out_eof = true;
    resume_output(s);
    return 0;
}

enum deadline { DEADLINE_NONE, DEADLINE_WAKE, DEADLINE_BODY, DEADLINE_WRITE };

static bool response_data_ready(const struct stream *s)
{
    return s->responded && !s->sent_all && (s->outb.len > s->outb_off || s->file_left > 0);
}

/* The nearest thing this stream's timer must catch, and which one. */
static ev_tstamp stream_deadline(const struct stream *s, enum deadline *kind)
{
    ev_tstamp best = 0;
    *kind = DEADLINE_NONE;
    if (s->wake_at) {
        best = s->wake_at;
        *kind = DEADLINE_WAKE;
    }
    if (s->closed)
        return best;
    if (!s->body_eof && s->handler && cfg.body_timeout > 0 && s->body.len == s->body_off) {
        ev_tstamp t = s->in_progress + cfg.body_timeout;
        if (!best || t < best)
            best = t, *kind = DEADLINE_BODY;
    }
    if (cfg.write_timeout > 0 && response_data_ready(s)) {
        ev_tstamp t = s->out_progress + cfg.write_timeout;
        if (!best || t < best)
            best = t, *kind = DEADLINE_WRITE;
    }
    return best;
}

void stream_arm_timer(struct stream *s)
{
    enum deadline kind;
    ev_tstamp when = stream_deadline(s, &kind);
    struct ev_loop *loop = s->c->w->loop;
    if (!when)
        return;         /* a timer still running finds nothing to do and stops */
    if (ev_is_active(&s->timer)) {
        if (ev_now(loop) + ev_timer_remaining(loop, &s->timer) <= when + 0.001)
            return;
        ev_timer_stop(loop, &s->timer);
    }
    ev_timer_set(&s->timer, when - ev_now(loop) > 0 ? when - ev_now(loop) : 0.001, 0);
    ev_timer_start(loop, &s->timer);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct stream *s = t->data;
    struct conn *c = s->c;
    ev_tstamp now = ev_now(loop);
    if (s->wake_at && s->wake_at <= now + 0.001) {
        s->wake_at = 0;
        stream_make_runnable(s);
    }
    enum deadline kind;
    ev_tstamp when = stream_deadline(s, &kind);
    if (when && when <= now + 0.001 && kind != DEADLINE_WAKE) {
        double limit = kind == DEADLINE_BODY ? cfg.body_timeout : cfg.write_timeout;
        log_msg(LOG_DEBUG, "%s: stream %d: %s for %.0fs, RST_STREAM(CANCEL)", c->peer, s->id,
                kind == DEADLINE_BODY ? "no request body" : "peer takes no response", limit);
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        if (now - c->last_io >= limit)
            conn_abort_stalled(c);
    } else {
        stream_arm_timer(s);
    }
    conn_wake(c);
}

void h2_sleep(struct stream *s, double seconds)
{
    if (s->cancelled || s->closed)
        return;
    s->wake_at = ev_now(s->c->w->loop) + seconds;
    stream_arm_timer(s);
    while (s->wake_at && !s->cancelled && !s->closed)
        wait_for(s, WAIT_TIMER);
    s->wake_at = 0;
}

void stream_end_unread_request(struct stream *s)
{
    if (s->sent_all && !s->handler && !s->body_eof && !s->closed)
        nghttp2_submit_rst_stream(s->c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
}

int h2_simple(struct stream *s, int status, const char *content_type, const void *body, size_t len)
{
    char length[24];
    snprintf(length, sizeof length, "%zu", len);
    struct h2_header h[] = { { "content-type", content_type }, { "content-length", length } };
    if (h2_respond(s, status, h, 2, len > 0))
        return -1;
    if (len && h2_write(s, body, len))
        return -1;
    return len ? h2_end(s) : 0;
}
