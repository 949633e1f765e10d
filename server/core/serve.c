/* The serve loop: the body of a connection's serve coroutine.
 *
 * One step reads the PROXY header if the listener wants one (proxyproto.c), finishes a TLS
 * handshake if one is due, reads what the socket (or OpenSSL) has and hands it to the
 * protocol, runs the handlers that became runnable, lets the protocol put their output
 * into conn->out, and writes it, until nothing moves.  Then,
 * with nothing left to do, the coroutine parks (returns, freeing its stack); with output
 * stuck, or with parking off, it waits on the connection's watcher by yielding to the
 * worker loop.  All state lives in the connection, so a step never depends on which
 * coroutine ran the one before.
 *
 * A step's work is bounded, so one connection cannot keep its worker: at most
 * STEP_READS reads of input and STEP_ROUNDS rounds of handlers, then back to the event
 * loop, which serves every other ready connection before this one again.  Input left in
 * the socket wakes it again by itself (libev's watchers are level-triggered); work the
 * socket does not show - handlers still runnable, output the protocol still has to
 * produce, bytes OpenSSL decrypted and holds - puts the connection on its worker's ready
 * list (conn_mark_ready).  A TLS read takes a whole record (its plaintext fits the
 * 16 KiB buffer), so OpenSSL holds none back between steps in practice. */
#include <errno.h>
#include <openssl/err.h>
#include <string.h>

#include "core/conn.h"

#define STEP_READS 4
#define STEP_ROUNDS 8

enum step { STEP_CLOSE, STEP_IDLE, STEP_WAIT_READ, STEP_WAIT_WRITE };

static enum step handshake(struct conn *c)
{
    switch (transport_handshake(&c->sock)) {
    case HANDSHAKE_DONE: {
        c->tls_config_held = false;    /* the server-name callback is done with it */
        tls_config_release(c->sock.ssl);
        counter_add(&c->w->n.handshakes[SSL_session_reused(c->sock.ssl) ? HS_RESUMED : HS_FULL], 1);
        c->since = ev_now(c->w->loop);  /* preface_timeout counts from here */
        const unsigned char *alpn = NULL;
        unsigned len = 0;
        SSL_get0_alpn_selected(c->sock.ssl, &alpn, &len);
        conn_set_state(c, CONN_OPEN);
        const struct conn_proto *p = conn_protocols.after_tls(alpn, len);
        if (!p || conn_start_proto(c, p))
            return STEP_CLOSE;
        return STEP_IDLE;
    }
    case HANDSHAKE_WANT_READ:
        return STEP_WAIT_READ;
    case HANDSHAKE_WANT_WRITE:
        return STEP_WAIT_WRITE;
    default: {
        /* A refused client, logged with what it lacked (no common protocol, version,
         * cipher); a peer that just went away is not worth a line. */
        counter_add(&c->w->n.handshakes[HS_FAILED], 1);
        unsigned long e = ERR_peek_error();
        if (e)
            log_msg(LOG_INFO, "%s: refused: TLS handshake: %s", conn_peer(c), ERR_reason_error_string(e));
        ERR_clear_error();
        return STEP_CLOSE;
    }
    }
}

/* What the serve loop does about a passed deadline: true to close now.  The protocol
 * says its last words (GOAWAY, 408) and then closes once they are written. */
static bool handle_timeout(struct conn *c)
{
    int kind = c->timed_out;
    c->timed_out = TIMEOUT_NONE;
    c->close_reason = kind == TIMEOUT_IDLE ? CLOSED_IDLE : CLOSED_TIMEOUT;
    switch (kind) {
    case TIMEOUT_WRITE:
        log_msg(LOG_DEBUG, "%s: peer stopped reading for %.0fs, closing", conn_peer(c), c->w->cfg->write_timeout);
        return true;
    case TIMEOUT_FORCE:
        return true;
    case TIMEOUT_NONE:
        return false;
    default:
        if (c->state == CONN_HANDSHAKE)
            counter_add(&c->w->n.handshakes[HS_TIMED_OUT], 1);
        if (c->state != CONN_OPEN || !c->proto)
            return true;       /* mid-handshake: nothing to say */
        return c->proto->timeout(c, kind);
    }
}

static bool wants_input(const struct conn *c)
{
    return !c->peer_eof && c->state == CONN_OPEN && c->proto->want_read(c);
}

/* Stopping, a connection is asked to end at a request boundary - but only once the
 * input it has sent is in, so that the requests already on their way are served (and
 * an HTTP/2 GOAWAY counts them).  One not heard from yet, or still before its protocol
 * (PROXY header, TLS handshake), was most likely accepted just as its first request was
 * sent: a restart must not drop that request, so it gets SHUTDOWN_GRACE to arrive (never
 * longer than its head's timeout) and is then closed like any silent connection. */
#define SHUTDOWN_GRACE 1.0

static bool heard_and_open(const struct conn *c) { return c->state == CONN_OPEN && c->heard; }

static void shutdown_grace(struct conn *c)
{
    ev_tstamp due = ev_now(c->w->loop) + SHUTDOWN_GRACE - conn_head_timeout(c);
    if (!heard_and_open(c) && (c->since > due || !c->head_due)) {
        c->since = due;
        c->head_due = true;
    }
}

static enum step step(struct conn *c)
{
    c->nothing_to_write = false;
    if (c->timed_out && handle_timeout(c))
        return STEP_CLOSE;
    if (c->shutdown_asked)
        shutdown_grace(c);
    if (c->state == CONN_PROXY) {
        int r = proxy_stage(c);
        if (r <= 0)
            return r < 0 ? STEP_CLOSE : STEP_WAIT_READ;
    }
    if (c->state == CONN_HANDSHAKE) {
        enum step s = handshake(c);
        if (s != STEP_IDLE)
            return s;
    }
    char *chunk = c->w->rbuf;
    int reads = STEP_READS;
    /* A step that a handler or a timer woke, not the socket, after the last read drained
     * it: no read (it would only say EAGAIN, a system call per proxied request, whose
     * upstream's answer wakes the step).  The watcher, level-triggered and watching for
     * input whenever the protocol wants some, says when there is more. */
    bool drained = c->input_drained && !transport_holds_input(&c->sock);
    /* A parked connection woken by one request has its protocol's state cold in the CPU's
     * caches (at 1000 connections with one request each, every time): fetched now, it
     * arrives while the read's system call runs instead of one miss after another once
     * the protocol starts on the bytes. */
    if (!drained && c->state == CONN_OPEN && c->proto->warm)
        c->proto->warm(c);
    for (int round = 1;; round++) {
        bool moved = false;
        while (reads > 0 && !drained && wants_input(c)) {
            ssize_t n = conn_read(c, chunk, sizeof c->w->rbuf);
            if (n == 0) {
                drained = c->input_drained = true;   /* not again this step: a large response's rounds each tried */
                break;
            }
            reads--;
            moved = true;
            /* A read that took all the socket had saves the one that would only say
             * EAGAIN (a system call per request, with one request per wake-up).  Anything
             * arriving later shows as readiness. */
            if (transport_drained(&c->sock, n, sizeof c->w->rbuf))
                drained = c->input_drained = true;
            /* len 0: the peer's end; the protocol decides what is left to do. */
            if (c->proto->feed(c, chunk, n > 0 ? (size_t)n : 0) < 0) {
                conn_set_state(c, CONN_CLOSING);
                break;
            }
        }
        if (c->shutdown_asked && heard_and_open(c)) {
            c->shutdown_asked = false;
            c->proto->shutdown(c);
        }
        if (c->runnable)
            conn_runtime.run(c);
        size_t before = conn_out_pending(c);
        if (c->proto->send(c) < 0)
            return STEP_CLOSE;
        size_t pending = conn_out_pending(c);
        if (pending != before || pending)
            moved = true;         /* produced output, or has output to write now */
        int f = conn_flush(c);
        if (f < 0)
            return STEP_CLOSE;
        if (f > 0)
            return STEP_WAIT_WRITE;
        if (!conn_runnable(c) && !moved)
            break;
        /* All the input read and all the output written, and nothing left to run or to
         * produce: another round would only find that out again (a small request's step
         * is then one round, not two). */
        if (drained && !conn_runnable(c) && !c->proto->want_write(c)) {
            c->nothing_to_write = true;     /* conn_may_park need not ask again */
            break;
        }
        if (round == STEP_ROUNDS || reads == 0) {
            /* Budget spent: other connections first.  Input still in the socket brings
             * this one back by itself; work it does not show needs the ready list. */
            if (conn_runnable(c) || c->proto->want_write(c) || transport_holds_input(&c->sock))
                conn_mark_ready(c);
            break;
        }
    }
    if (c->proto->finished(c))
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
            /* A deadline already named its reason; else the peer left, or this side
             * said its last words (an error, a shutdown), or the socket failed. */
            if (c->close_reason == CLOSED_PEER && !c->timed_out)
                c->close_reason = c->peer_eof ? CLOSED_PEER : c->state == CONN_CLOSING ? CLOSED_GOAWAY : CLOSED_ERROR;
            conn_close(c);
            return SERVE_CLOSED;
        }
        bool read = s == STEP_WAIT_READ || (c->state < CONN_OPEN ? s != STEP_WAIT_WRITE : wants_input(c));
        conn_watch(c, read, s == STEP_WAIT_WRITE);
        if (c->deadlines_due && c->requests)
            conn_runtime.arm_deadlines(c);
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
