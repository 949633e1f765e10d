/* The serve loop: the body of a connection's serve coroutine.
 *
 * One step reads what the socket (or OpenSSL) has, feeds nghttp2, runs the handlers that
 * became runnable, lets nghttp2 frame what they produced, and writes it, until nothing
 * moves.  Then, with nothing left to do, the coroutine parks (returns, freeing its
 * stack); with output stuck, or with parking off, it waits on the connection's watcher
 * by yielding to the worker loop.  All state lives in the connection, so a step never
 * depends on which coroutine ran the one before. */
#include <errno.h>
#include <openssl/err.h>
#include <string.h>

#include "h2park.h"

#define READS_PER_STEP 16

enum step { STEP_CLOSE, STEP_IDLE, STEP_WAIT_READ, STEP_WAIT_WRITE };

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof preface - 1)

int conn_h2_start(struct conn *c)
{
    if (session_create(c))
        return -1;
    c->proto = PROTO_H2;
    session_submit_settings(c);
    return 0;
}

static int feed_h2(struct conn *c, const char *data, size_t len)
{
    ssize_t rv = nghttp2_session_mem_recv(c->h2, (const uint8_t *)data, len);
    if (rv < 0) {
        log_msg(LOG_DEBUG, "%s: %s", c->peer, nghttp2_strerror((int)rv));
        /* A bad preface or a frame nghttp2 cannot take: tell the peer, then close. */
        uint32_t code = rv == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM
                        : rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC || c->stream_id_error ? NGHTTP2_PROTOCOL_ERROR
                                                                                   : NGHTTP2_INTERNAL_ERROR;
        nghttp2_session_terminate_session(c->h2, code);
        c->closing = true;
        return -1;
    }
    return 0;
}

/* Cleartext: the first bytes say whether this is h2c with prior knowledge (the
 * preface), HTTP/1.1 (perhaps asking to upgrade), or neither. */
static int feed_detect(struct conn *c, const char *data, size_t len)
{
    if (buf_append(&c->in, data, len))
        return -1;
    size_t n = c->in.len < PREFACE_LEN ? c->in.len : PREFACE_LEN;
    if (!memcmp(c->in.data, preface, n)) {
        if (c->in.len < PREFACE_LEN)
            return 0;                     /* so far so good */
        if (conn_h2_start(c))
            return -1;
        struct buf in = c->in;
        c->in = (struct buf){ 0 };
        int rc = feed_h2(c, in.data, in.len);
        buf_free(&in);
        return rc;
    }
    c->proto = PROTO_H1;
    return h1_handle(c) < 0 ? -1 : 0;
}

static int feed(struct conn *c, const char *data, size_t len)
{
    switch (c->proto) {
    case PROTO_H2:
        return feed_h2(c, data, len);
    case PROTO_DETECT:
        return feed_detect(c, data, len);
    default:
        if (buf_append(&c->in, data, len))
            return -1;
        return h1_handle(c) < 0 ? -1 : 0;
    }
}

static enum step handshake(struct conn *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        c->handshake_done = true;
        if (conn_h2_start(c))
            return STEP_CLOSE;
        if (!tls_cipher_adequate(c->ssl)) {
            log_msg(LOG_INFO, "%s: %s with %s is not allowed for HTTP/2, INADEQUATE_SECURITY", c->peer,
                    SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl));
            nghttp2_session_terminate_session(c->h2, NGHTTP2_INADEQUATE_SECURITY);
            c->closing = true;
        }
        return STEP_IDLE;
    }
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return STEP_WAIT_READ;
    case SSL_ERROR_WANT_WRITE:
        return STEP_WAIT_WRITE;
    default:
        log_msg(LOG_DEBUG, "%s: TLS handshake failed", c->peer);
        return STEP_CLOSE;
    }
}

static enum step step(struct conn *c)
{
    if (c->timed_out && conn_handle_timeout(c))
        return STEP_CLOSE;
    if (c->tls && !c->handshake_done) {
        enum step s = handshake(c);
        if (s != STEP_IDLE)
            return s;
    }
    char *chunk = c->w->rbuf;
    for (;;) {
        bool moved = false;
        for (int i = 0; i < READS_PER_STEP && !c->peer_eof && !c->closing; i++) {
            ssize_t n = conn_read(c, chunk, sizeof c->w->rbuf);
            if (n <= 0)
                break;
            moved = true;
            if (feed(c, chunk, (size_t)n))
                break;
        }
        conn_run_handlers(c);
        if (c->goaway_pending && c->h2) {
            c->goaway_pending = false;
            nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                                  NGHTTP2_NO_ERROR, NULL, 0);
        }
        size_t before = c->out.len - c->out_off;
        if (c->h2) {
            int rv = nghttp2_session_send(c->h2);
            if (rv && rv != NGHTTP2_ERR_WOULDBLOCK) {
                log_msg(LOG_DEBUG, "%s: %s", c->peer, nghttp2_strerror(rv));
                return STEP_CLOSE;
            }
        }
        size_t pending = c->out.len - c->out_off;
        if (pending != before || pending)
            moved = true;         /* produced output, or has output to write now */
        int f = conn_flush(c);
        if (f < 0)
            return STEP_CLOSE;
        if (f > 0)
            return STEP_WAIT_WRITE;
        if (c->runnable)
            continue;
        if (!moved)
            break;
    }
    if (c->proto == PROTO_H2) {
        if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
            return STEP_CLOSE;
    } else if (c->closing) {
        return STEP_CLOSE;
    }
    if (c->peer_eof)
        return STEP_CLOSE;
    if (c->closing && c->h2 && !nghttp2_session_want_write(c->h2))
        return STEP_CLOSE;
    return STEP_IDLE;
}

void *serve_main(void *arg)
{
    struct conn *c = arg;
    c->in_serve = true;
    c->served_once = true;
    for (;;) {
        enum step s = step(c);
        if (s == STEP_CLOSE) {
            conn_close(c);
            return SERVE_CLOSED;
        }
        conn_watch_write(c, s == STEP_WAIT_WRITE);
        conn_arm_timer(c);
        if (s != STEP_WAIT_WRITE && conn_may_park(c)) {
            c->in_serve = false;
            return SERVE_PARKED;
        }
        c->in_serve = false;
        coro_yield(NULL);
        c->in_serve = true;
    }
}
