/* A connection's lifecycle and its socket: creation at accept, the readiness watcher and
 * the one timer, reads and writes (plain or TLS), and teardown.
 *
 * The watcher always waits for readability - that is what wakes a parked connection -
 * and for writability only while output is stuck.  The single timer is set to the
 * nearest of three deadlines: first SETTINGS (preface_timeout), idle with no open stream
 * (idle_timeout), and output stuck (write_timeout); its callback records which one
 * passed and wakes the connection, and the serve loop acts on it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "h2park.h"
#include "scalloc.h"

enum { TIMEOUT_NONE, TIMEOUT_PREFACE, TIMEOUT_IDLE, TIMEOUT_WRITE, TIMEOUT_STALLED, TIMEOUT_FORCE };

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    conn_wake(w->data);
}

static ev_tstamp next_deadline(const struct conn *c, int *kind)
{
    ev_tstamp best = 0;
    *kind = TIMEOUT_NONE;
    if (!c->settings_seen) {
        best = c->accepted_at + cfg.preface_timeout;
        *kind = TIMEOUT_PREFACE;
    } else if (c->open_streams == 0 && !c->live_handlers && cfg.idle_timeout > 0) {
        best = c->idle_since + cfg.idle_timeout;
        *kind = TIMEOUT_IDLE;
    }
    if (c->out.len > c->out_off && c->write_blocked_since > 0) {
        ev_tstamp t = c->write_blocked_since + cfg.write_timeout;
        if (!best || t < best) {
            best = t;
            *kind = TIMEOUT_WRITE;
        }
    }
    return best;
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct conn *c = t->data;
    int kind;
    ev_tstamp when = next_deadline(c, &kind);
    if (!when)
        return;
    if (when > ev_now(loop) + 0.001) {     /* the state moved on: re-aim */
        conn_arm_timer(c);
        return;
    }
    c->timed_out = kind;
    conn_wake(c);
}

void conn_arm_timer(struct conn *c)
{
    int kind;
    ev_tstamp when = next_deadline(c, &kind);
    struct ev_loop *loop = c->w->loop;
    if (!when) {
        if (ev_is_active(&c->timer))
            ev_timer_stop(loop, &c->timer);
        return;
    }
    /* A timer that fires early is cheap (on_timer re-aims it); one that is re-armed on
     * every step is not, so only move it earlier. */
    if (ev_is_active(&c->timer)) {
        ev_tstamp at = ev_now(loop) + ev_timer_remaining(loop, &c->timer);
        if (at <= when + 0.001)
            return;
        ev_timer_stop(loop, &c->timer);
    }
    ev_timer_set(&c->timer, when - ev_now(loop) > 0 ? when - ev_now(loop) : 0.001, 0);
    ev_timer_start(loop, &c->timer);
}

struct conn *conn_new(struct worker *w, int fd, bool tls, const struct sockaddr *sa, socklen_t salen)
{
    struct conn *c = sc_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->w = w;
    c->fd = fd;
    c->tls = tls;
    c->proto = tls ? PROTO_H2 : PROTO_DETECT;
    c->accepted_at = c->idle_since = c->last_io = ev_now(w->loop);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        snprintf(c->peer, sizeof c->peer, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        snprintf(c->peer, sizeof c->peer, "[%s]:%u", host, port);
    }
    if (tls) {
        c->ssl = tls_new_ssl(fd);
        if (!c->ssl) {
            sc_free(c);
            return NULL;
        }
    }
    worker_conn_opened();
    ev_io_init(&c->io, on_io, fd, EV_READ);
    c->io.data = c;
    ev_io_start(w->loop, &c->io);
    ev_init(&c->timer, on_timer);
    c->timer.data = c;
    conn_arm_timer(c);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    counter_add(&w->n.conns, 1);
    counter_add(&w->n.conns_total, 1);
    counter_add(&w->n.parked_conns, 1);     /* no serve loop until the first bytes */
    return c;
}

void conn_watch_write(struct conn *c, bool want_write)
{
    if (c->io_write == want_write)
        return;
    c->io_write = want_write;
    ev_io_stop(c->w->loop, &c->io);
    ev_io_set(&c->io, c->fd, EV_READ | (want_write ? EV_WRITE : 0));
    ev_io_start(c->w->loop, &c->io);
}

/* Reads what is there into buf.  >0 bytes, 0 nothing now, -1 peer gone or error. */
ssize_t conn_read(struct conn *c, void *buf, size_t len)
{
    if (c->ssl) {
        ERR_clear_error();
        int n = SSL_read(c->ssl, buf, (int)len);
        if (n > 0) {
            c->last_io = ev_now(c->w->loop);
            return n;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return 0;
        c->peer_eof = true;
        return -1;
    }
    for (;;) {
        ssize_t n = read(c->fd, buf, len);
        if (n > 0) {
            c->last_io = ev_now(c->w->loop);
            return n;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        c->peer_eof = true;
        return -1;
    }
}

/* Writes conn->out.  0: all written (and the buffer freed), 1: the socket is full,
 * -1: the peer is gone. */
int conn_flush(struct conn *c)
{
    while (c->out_off < c->out.len) {
        size_t left = c->out.len - c->out_off;
        ssize_t n;
        if (c->ssl) {
            ERR_clear_error();
            int r = SSL_write(c->ssl, c->out.data + c->out_off, (int)(left > (1u << 30) ? 1u << 30 : left));
            if (r <= 0) {
                int e = SSL_get_error(c->ssl, r);
                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
                    goto blocked;
                return -1;
            }
            n = r;
        } else {
            n = write(c->fd, c->out.data + c->out_off, left);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    goto blocked;
                return -1;
            }
        }
        c->out_off += (size_t)n;
        c->write_blocked_since = 0;
        c->last_io = ev_now(c->w->loop);
    }
    buf_free(&c->out);
    c->out_off = 0;
    c->write_blocked_since = 0;
    return 0;
blocked:
    if (!c->write_blocked_since)
        c->write_blocked_since = ev_now(c->w->loop);
    return 1;
}

/* Called from the serve coroutine; the caller returns SERVE_CLOSED right after. */
void conn_close(struct conn *c)
{
    struct worker *w = c->w;
    /* Every handler still running learns that its stream is gone: the handler API then
     * fails at once instead of waiting, so one more turn ends each of them. */
    for (int round = 0; c->streams && round < 4; round++) {
        for (struct stream *s = c->streams; s; s = s->snext) {
            s->closed = true;
            s->cancelled = true;
            if (!s->handler)
                s->handler_done = true;
            stream_make_runnable(s);
        }
        conn_run_handlers(c);
    }
    while (c->streams) {
        struct stream *s = c->streams;
        if (s->handler) {
            log_msg(LOG_WARN, "%s: handler of stream %d ignored its cancellation; dropped", c->peer, s->id);
            coro_destroy(s->handler);
            s->handler = NULL;
            c->live_handlers--;
            counter_add(&w->n.handler_coroutines, -1);
        }
        s->handler_done = true;
        s->queued = false;
        stream_release_if_done(s);
    }
    c->runnable = c->runnable_tail = NULL;
    worker_forget_ready(w, c);
    if (c->h2)
        nghttp2_session_del(c->h2);
    /* Closing on our own words (GOAWAY, an error response) to a peer that may still be
     * sending: linger, or a reset could destroy those words before the peer reads them. */
    bool linger = c->closing && !c->peer_eof;
    if (c->ssl) {
        if (linger && c->handshake_done)
            SSL_shutdown(c->ssl);      /* close_notify, best effort */
        SSL_free(c->ssl);
    }
    ev_io_stop(w->loop, &c->io);
    ev_timer_stop(w->loop, &c->timer);
    buf_free(&c->out);
    buf_free(&c->in);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    counter_add(&w->n.conns, -1);
    int fd = c->fd;
    sc_free(c);
    if (linger) {
        linger_close(w, fd);
    } else {
        close(fd);
        worker_conn_closed(w);
    }
}

void conn_request_goaway(struct conn *c)
{
    c->goaway_pending = true;
    conn_wake(c);
}

void conn_force_close(struct conn *c)
{
    c->timed_out = TIMEOUT_FORCE;
    conn_wake(c);
}

/* A stream's deadline passed and the whole connection has moved nothing for as long:
 * the peer is gone in all but name. */
void conn_abort_stalled(struct conn *c)
{
    c->timed_out = TIMEOUT_STALLED;
}

/* A GOAWAY with code, then close once it is written (at once if not HTTP/2 yet). */
static bool goaway_then_close(struct conn *c, uint32_t code)
{
    if (c->h2)
        nghttp2_session_terminate_session(c->h2, code);
    c->closing = true;
    return !c->h2;
}

/* What the serve loop does about a passed deadline: true if the connection must close
 * now (after any GOAWAY it queued is written). */
bool conn_handle_timeout(struct conn *c)
{
    int kind = c->timed_out;
    c->timed_out = TIMEOUT_NONE;
    switch (kind) {
    case TIMEOUT_PREFACE:
        log_msg(LOG_DEBUG, "%s: no SETTINGS within %.0fs, closing", c->peer, cfg.preface_timeout);
        return goaway_then_close(c, NGHTTP2_SETTINGS_TIMEOUT);
    case TIMEOUT_IDLE:
        log_msg(LOG_DEBUG, "%s: idle for %.0fs, GOAWAY", c->peer, cfg.idle_timeout);
        return goaway_then_close(c, NGHTTP2_NO_ERROR);
    case TIMEOUT_WRITE:
        log_msg(LOG_DEBUG, "%s: peer stopped reading for %.0fs, closing", c->peer, cfg.write_timeout);
        return true;
    case TIMEOUT_STALLED:
        log_msg(LOG_DEBUG, "%s: no progress on any stream, GOAWAY", c->peer);
        return goaway_then_close(c, NGHTTP2_NO_ERROR);
    case TIMEOUT_FORCE:
        return true;
    default:
        return false;
    }
}
