/* A connection's lifecycle: creation at accept, the readiness watcher and the one timer,
 * reads and writes through its transport (transport.c) with their bookkeeping, and
 * teardown.
 *
 * The watcher waits for readability while the protocol takes input - that is what
 * wakes a parked connection - and for writability only while output is stuck.  The
 * single timer is set to the nearest of four deadlines: a head that is due (a TLS
 * handshake: handshake_timeout; then the preface or first SETTINGS, an HTTP/1.1 request
 * head: preface_timeout), idle with no request
 * (idle_timeout), output stuck (write_timeout), and a forced close; its callback records
 * which one passed and wakes the connection, and the serve loop acts on it (through the
 * protocol, which knows what to say: GOAWAY, 408, or nothing). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/conn.h"
#include "scalloc.h"

struct conn_protocols conn_protocols;
struct conn_runtime conn_runtime;

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    struct conn *c = w->data;
    __builtin_prefetch(c->proto_state);     /* the protocol's state: the step's first look (serve.c) */
    if (revents & EV_READ)
        c->input_drained = false;
    /* A ClientHello waiting: the handshake's dear step, taken a bounded number at a time. */
    if (c->state == CONN_HANDSHAKE && (revents & EV_READ) && SSL_in_before(c->sock.ssl) && !worker_handshake_turn(c))
        return;
    conn_wake(c);
}

static ev_tstamp next_deadline(const struct conn *c, int *kind)
{
    ev_tstamp best = 0;
    *kind = TIMEOUT_NONE;
    if (c->head_due) {
        best = c->since + conn_head_timeout(c);
        *kind = TIMEOUT_HEAD;
    } else if (!(c->requests && conn_runtime.open(c)) && c->w->cfg->idle_timeout > 0) {
        best = c->since + c->w->cfg->idle_timeout;
        *kind = TIMEOUT_IDLE;
    }
    if (conn_out_pending(c) && c->write_blocked_since > 0) {
        ev_tstamp t = c->write_blocked_since + c->w->cfg->write_timeout;
        if (!best || t < best) {
            best = t;
            *kind = TIMEOUT_WRITE;
        }
    }
    return best;
}

/* A ClientHello that came in time but that the worker has not looked at yet: the loop
 * runs a passed deadline's timer before the readiness reported with it. */
static bool handshake_not_begun_but_due(const struct conn *c)
{
    char b;
    return c->state == CONN_HANDSHAKE && !c->hs_deadline_moved && SSL_in_before(c->sock.ssl) &&
           recv(c->sock.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct conn *c = t->data;
    int kind;
    ev_tstamp when = next_deadline(c, &kind);
    if (!when || c->hs_waiting)
        return;                            /* (waiting for its turn: re-armed when it comes) */
    if (when > ev_now(loop) + 0.001) {     /* the state moved on: re-aim */
        conn_arm_timer(c);
        return;
    }
    if (kind == TIMEOUT_HEAD && handshake_not_begun_but_due(c)) {
        c->hs_deadline_moved = true;       /* its turn counts from now: once */
        c->since = ev_now(loop);
        conn_arm_timer(c);
        return;
    }
    c->timed_out = (uint8_t)kind;
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

struct conn *conn_new(struct worker *w, int fd, unsigned flags, unsigned slot, const struct sockaddr *sa,
                      socklen_t salen)
{
    struct conn *c = sc_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->w = w;
    c->sock.fd = fd;
    c->tls = flags & CONN_TLS;
    c->listener = (uint8_t)slot;
    /* The PROXY header and the TLS handshake count against handshake_timeout from here
     * (a cleartext connection's header and first head against preface_timeout). */
    c->since = c->last_io = ev_now(w->loop);
    c->head_due = true;
    if (salen <= sizeof c->peer)
        memcpy(&c->peer, sa, salen);
    if (c->tls && !(c->sock.ssl = tls_new_ssl(w->cfg, slot, fd))) {
        sc_free(c);
        return NULL;
    }
    c->tls_config_held = c->sock.ssl != NULL;
    if (flags & CONN_PROXY_PROTOCOL)
        c->state = CONN_PROXY;
    else
        conn_begin(c);
    worker_conn_opened();
    ev_init(&c->io, on_io);
    c->io.data = c;
    conn_watch(c, true, false);
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

/* After the PROXY header, if any: a TLS handshake, or the cleartext protocol. */
void conn_begin(struct conn *c)
{
    if (c->sock.ssl) {
        conn_set_state(c, CONN_HANDSHAKE);
    } else {
        conn_set_state(c, CONN_OPEN);
        c->proto = conn_protocols.cleartext;
    }
}

/* The one place a connection's life changes: it only goes forward. */
void conn_set_state(struct conn *c, enum conn_state to)
{
    if (to < c->state) {
        log_msg(LOG_ERROR, "%s: connection state %d to %d", conn_peer(c), c->state, to);
        abort();
    }
    c->state = (uint8_t)to;
}

int conn_start_proto(struct conn *c, const struct conn_proto *p)
{
    c->proto = p;
    return p->start(c);
}

/* a's dotted quad at out (16 bytes: 15 and a NUL): a proxied request names its client
 * in X-Forwarded-For and Forwarded, and inet_ntop formats with sprintf. */
static size_t ipv4_text(const struct in_addr *a, char *out)
{
    const uint8_t *b = (const uint8_t *)&a->s_addr;
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        n += u64_dec(out + n, b[i]);
        out[n++] = i < 3 ? '.' : 0;
    }
    return n - 1;
}

void sockaddr_text(const struct sockaddr *sa, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET && cap >= 22) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        size_t n = ipv4_text(&in->sin_addr, out);
        out[n++] = ':';
        out[n + u64_dec(out + n, ntohs(in->sin_port))] = 0;
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(out, cap, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(out, cap, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(out, cap, "?");
    }
}

/* The text of the last peer each is asked about, per thread: an access log asks for it
 * on every request, and inet_ntop formats with sprintf.  A peer is compared whole
 * (family, address, port), so a cached text is always its own. */
struct peer_text {
    struct sockaddr_in6 key;       /* the largest of the families kept */
    char text[64];
};

static bool peer_cached(struct peer_text *t, const struct conn *c)
{
    size_t len = c->peer.sa.sa_family == AF_INET ? sizeof c->peer.in : sizeof c->peer.in6;
    if (t->key.sin6_family && !memcmp(&t->key, &c->peer, len))
        return true;
    memset(&t->key, 0, sizeof t->key);
    memcpy(&t->key, &c->peer, len);
    return false;
}

const char *conn_peer(const struct conn *c)
{
    static __thread struct peer_text t;
    if (!peer_cached(&t, c))
        sockaddr_text(&c->peer.sa, t.text, sizeof t.text);
    return t.text;
}

const char *conn_peer_address(const struct conn *c)
{
    static __thread struct peer_text t;
    if (c->peer.sa.sa_family == AF_INET) {
        ipv4_text(&c->peer.in.sin_addr, t.text);   /* cheaper than the cache's compare */
        t.key.sin6_family = 0;
        return t.text;
    }
    if (peer_cached(&t, c))
        return t.text;
    if (c->peer.sa.sa_family == AF_INET6)
        inet_ntop(AF_INET6, &c->peer.in6.sin6_addr, t.text, sizeof t.text);
    else
        snprintf(t.text, sizeof t.text, "-");
    return t.text;
}

void conn_watch(struct conn *c, bool read, bool write)
{
    if (c->io_read == read && c->io_write == write && ev_is_active(&c->io))
        return;
    c->io_read = read;
    c->io_write = write;
    ev_io_stop(c->w->loop, &c->io);
    if (!read && !write)
        return;
    ev_io_set(&c->io, c->sock.fd, (read ? EV_READ : 0) | (write ? EV_WRITE : 0));
    ev_io_start(c->w->loop, &c->io);
}

ssize_t conn_read(struct conn *c, void *buf, size_t len)
{
    ssize_t n = transport_read(&c->sock, buf, len);
    if (n > 0) {
        c->last_io = ev_now(c->w->loop);
        counter_add(&c->w->n.bytes_in, n);
        c->heard = true;
    } else if (n < 0) {
        c->peer_eof = true;
    }
    return n;
}

int conn_flush(struct conn *c)
{
    uint64_t moved;
    int r = transport_flush(&c->sock, &moved);
    if (moved) {
        c->write_blocked_since = 0;
        c->last_io = ev_now(c->w->loop);
        counter_add(&c->w->n.bytes_out, (int64_t)moved);
    }
    if (r == 0)
        c->write_blocked_since = 0;
    else if (r > 0 && !c->write_blocked_since)
        c->write_blocked_since = ev_now(c->w->loop);
    return r;
}

/* Called from the serve coroutine; the caller returns SERVE_CLOSED right after. */
void conn_close(struct conn *c)
{
    struct worker *w = c->w;
    transport_file_done(&c->sock);
    if (c->requests)
        conn_runtime.cancel_all(c);
    worker_forget_ready(w, c);
    worker_forget_handshake(w, c);
    if (c->proto && c->proto->destroy)
        c->proto->destroy(c);
    /* Closing on our own words (GOAWAY, an error response) to a peer that may still be
     * sending: linger, or a reset could destroy those words before the peer reads them. */
    bool linger = c->state == CONN_CLOSING && !c->peer_eof;
    if (c->sock.ssl && c->tls_config_held)
        tls_config_release(c->sock.ssl);
    transport_release(&c->sock, linger);
    ev_io_stop(w->loop, &c->io);
    ev_timer_stop(w->loop, &c->timer);
    buf_free(&c->in);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->client_counted)
        connlimit_release(c);
    counter_add(&w->n.conns, -1);
    counter_add(&w->n.closed[c->close_reason], 1);
    int fd = c->sock.fd;
    sc_free(c);
    if (linger) {
        linger_close(w, fd);
    } else {
        close(fd);
        worker_conn_closed(w);
    }
}

void conn_request_shutdown(struct conn *c)
{
    c->shutdown_asked = true;
    conn_wake(c);
}

void conn_close_soon(struct conn *c) { c->timed_out = TIMEOUT_FORCE; }

void conn_force_close(struct conn *c)
{
    conn_close_soon(c);
    conn_wake(c);
}

/* A request's deadline passed and the whole connection has moved nothing for as long:
 * the peer is gone in all but name. */
void conn_abort_stalled(struct conn *c)
{
    c->timed_out = TIMEOUT_STALLED;
}

/* Every connection, parked ones included, pays for one of these: keep it in the 320-byte class. */
_Static_assert(sizeof(struct conn) <= 320, "struct conn outgrew its size class");
