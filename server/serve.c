/* The serve loop: the body of a connection's serve coroutine.
 *
 * One step reads what the socket (or OpenSSL) has, feeds nghttp2, runs the handlers that
 * became runnable, lets nghttp2 frame what they produced, and writes it, until nothing
 * moves.  Then, with nothing left to do, the coroutine parks (returns, freeing its
 * stack); with output stuck, or with parking off, it waits on the connection's watcher
 * by yielding to the worker loop.  All state lives in the connection, so a step never
 * depends on which coroutine ran the one before.
 *
 * A step's work is bounded, so one connection cannot keep its worker: at most
 * STEP_READS reads of input and STEP_ROUNDS rounds of handlers, then back to the event
 * loop, which serves every other ready connection before this one again.  Input left in
 * the socket wakes it again by itself (libev's watchers are level-triggered); work the
 * socket does not show - handlers still runnable, frames nghttp2 still has to write,
 * bytes OpenSSL decrypted and holds - puts the connection on its worker's ready list
 * (conn_mark_ready).  A TLS read takes a
 * whole record (its plaintext fits the 16 KiB buffer), so OpenSSL holds none back
 * between steps in practice. */
#include <errno.h>
#include <openssl/err.h>
#include <string.h>

#include "h2park.h"

#define STEP_READS 4
#define STEP_ROUNDS 8

enum step { STEP_CLOSE, STEP_IDLE, STEP_WAIT_READ, STEP_WAIT_WRITE };

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN (sizeof preface - 1)

int conn_h2_start(struct conn *c)
{
    if (session_create(c))
        return -1;
    c->proto = PROTO_H2;
    c->h2in.magic_left = PREFACE_LEN;
    session_submit_settings(c);
    return 0;
}

static int mem_recv(struct conn *c, const char *data, size_t len)
{
    ssize_t rv = nghttp2_session_mem_recv(c->h2, (const uint8_t *)data, len);
    if (rv < 0) {
        log_msg(LOG_DEBUG, "%s: %s", c->peer, nghttp2_strerror((int)rv));
        /* A bad preface or a frame nghttp2 cannot take: tell the peer, then close. */
        uint32_t code = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || c->flood
                            ? NGHTTP2_ENHANCE_YOUR_CALM
                        : rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC || c->stream_id_error ? NGHTTP2_PROTOCOL_ERROR
                                                                                   : NGHTTP2_INTERNAL_ERROR;
        nghttp2_session_terminate_session(c->h2, code);
        c->closing = true;
        return -1;
    }
    return 0;
}

/* nghttp2 takes the bytes as they come; alongside, the frame boundaries are followed
 * (the preface, then a 9-byte header and its payload, again and again), so that just
 * before nghttp2 meets a DATA frame - everything ahead of it processed - its stream can
 * be checked (session_check_data). */
int conn_feed_h2(struct conn *c, const char *data, size_t len)
{
    size_t fed = 0, pos = 0;
    while (pos < len) {
        size_t left = len - pos, k;
        if (c->h2in.magic_left) {
            k = left < c->h2in.magic_left ? left : c->h2in.magic_left;
            c->h2in.magic_left -= (uint8_t)k;
        } else if (c->h2in.payload_left) {
            k = left < c->h2in.payload_left ? left : c->h2in.payload_left;
            c->h2in.payload_left -= (uint32_t)k;
        } else {
            k = left < 9u - c->h2in.hdr_len ? left : 9u - c->h2in.hdr_len;
            memcpy(c->h2in.hdr + c->h2in.hdr_len, data + pos, k);
            c->h2in.hdr_len += (uint8_t)k;
            if (c->h2in.hdr_len == 9) {
                const uint8_t *h = c->h2in.hdr;
                c->h2in.hdr_len = 0;
                c->h2in.payload_left = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
                if (h[3] == NGHTTP2_DATA) {
                    if (pos > fed && mem_recv(c, data + fed, pos - fed))
                        return -1;
                    fed = pos;
                    session_check_data(c, (int32_t)(((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 |
                                                     (uint32_t)h[7] << 8 | h[8]) & 0x7fffffff));
                }
            }
        }
        pos += k;
    }
    return fed < len ? mem_recv(c, data + fed, len - fed) : 0;
}

/* Cleartext: the first bytes say whether this is h2c with prior knowledge (the
 * preface), HTTP/1.1 (perhaps asking to upgrade), or neither.  Anything that begins
 * like the preface ("PRI ", a method HTTP/1.1 reserves for it) is HTTP/2's to judge:
 * a bad preface gets GOAWAY(PROTOCOL_ERROR) from nghttp2 (RFC 9113 section 3.4). */
#define PRI_LEN 4
static int feed_detect(struct conn *c, const char *data, size_t len)
{
    if (buf_append(&c->in, data, len))
        return -1;
    size_t n = c->in.len < PREFACE_LEN ? c->in.len : PREFACE_LEN;
    if (!memcmp(c->in.data, preface, n < PRI_LEN ? n : PRI_LEN)) {
        if (c->in.len < PREFACE_LEN)
            return 0;                     /* so far so good */
        if (conn_h2_start(c))
            return -1;
        struct buf in = c->in;
        c->in = (struct buf){ 0 };
        int rc = conn_feed_h2(c, in.data, in.len);
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
        return conn_feed_h2(c, data, len);
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
    if (c->goaway_pending && !c->h2)
        return STEP_CLOSE;        /* shutting down, and no session to say GOAWAY on */
    if (c->tls && !c->handshake_done) {
        enum step s = handshake(c);
        if (s != STEP_IDLE)
            return s;
    }
    char *chunk = c->w->rbuf;
    int reads = STEP_READS;
    for (int round = 1;; round++) {
        bool moved = false;
        while (reads > 0 && !c->peer_eof && !c->closing) {
            ssize_t n = conn_read(c, chunk, sizeof c->w->rbuf);
            if (n <= 0)
                break;
            reads--;
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
        if (!c->runnable && !moved)
            break;
        if (round == STEP_ROUNDS || reads == 0) {
            /* Budget spent: other connections first.  Input still in the socket brings
             * this one back by itself; work it does not show needs the ready list. */
            if (c->runnable || (c->h2 && nghttp2_session_want_write(c->h2)) || (c->ssl && SSL_pending(c->ssl) > 0))
                conn_mark_ready(c);
            break;
        }
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
