/* Streams and their handler coroutines, with the blocking-style handler API.
 *
 * A handler runs in a coroutine of its own and is resumed only by its connection's serve
 * loop (conn_run_handlers), never from inside an nghttp2 callback.  When it must wait -
 * for request body, for room in its output, for a timer - it records why and yields;
 * whatever ends the wait (a DATA frame, nghttp2 taking its output, the timer, the stream
 * closing) queues it as runnable and wakes the connection.  Waiting handlers hold their
 * stacks but not the serve loop's, so a connection with only waiting handlers parks.
 * Output is buffered per stream up to OUTB_MAX, so a handler can get ahead of the peer
 * by that much and no more. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "h2park.h"
#include "scalloc.h"

#define OUTB_MAX (64u << 10)
#define MAX_RESPONSE_HEADERS 16

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
    s->started = ev_now(c->w->loop);
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
    if (ev_is_active(&s->sleep))
        ev_timer_stop(c->w->loop, &s->sleep);
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
    s->handler = coro_create(handler_main, s, 0);
    if (!s->handler) {
        s->handler_done = true;
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    c->live_handlers++;
    counter_add(&c->w->n.handler_coroutines, 1);
    stream_make_runnable(s);
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
            }
            if (!s->closed)
                nghttp2_session_consume(s->c->h2, s->id, n);
            return (ssize_t)n;
        }
        if (s->body_eof)
            return 0;
        if (s->cancelled || s->closed)
            return -1;
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

static void sleep_done(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct stream *s = t->data;
    stream_make_runnable(s);
    conn_wake(s->c);
}

void h2_sleep(struct stream *s, double seconds)
{
    if (s->cancelled || s->closed)
        return;
    ev_timer_init(&s->sleep, sleep_done, seconds, 0);
    s->sleep.data = s;
    ev_timer_start(s->c->w->loop, &s->sleep);
    while (ev_is_active(&s->sleep) && !s->cancelled && !s->closed)
        wait_for(s, WAIT_TIMER);
    if (ev_is_active(&s->sleep))
        ev_timer_stop(s->c->w->loop, &s->sleep);
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
