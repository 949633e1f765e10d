/* Active health checks (health_check in an upstream section): every server of such a
 * group is probed every interval - connected to (and over TLS handshaken with, verified as
 * its requests are), and with a path asked for it over HTTP/1.1, 2xx or 3xx passing - and
 * left out of the balancing after `fails` failures in a row, until `passes` passes in a
 * row bring it back.  nginx Plus's health_check and haproxy's `check`, in one process.
 *
 * One thread of its own probes for the whole process (so a server sees one probe per
 * interval whatever the number of workers), on a libev loop: every probe is a socket and
 * a few hundred bytes, run side by side, each bounded by its timeout.  Its bytes go
 * through struct transport (core/transport.h), plain or TLS, as every other connection's:
 * the handshake, the request queued and flushed, the response read - one way of moving
 * bytes, not a second loop of send/recv and SSL_write/SSL_read beside it.  Its configuration is
 * the running one, a reference it holds (upstream_health_use, from the main thread), read
 * only.  What it finds is published per server index as relaxed atomics, with the
 * fingerprint of the server list they are for: a worker whose list has another
 * fingerprint (before it took a reload) ignores them, and a reload that changes the list
 * starts every server anew, as up.
 *
 * Every byte a server sends back is input: only the response head is read, by llhttp
 * (h1resp.c), at most CHECK_HEAD_MAX bytes of it; anything else, a close, a reset or
 * silence past the timeout is a failure, named in the log when it changes the state. */
#define _GNU_SOURCE
#include <errno.h>
#include <ev.h>
#include <stddef.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "upstream/upstream.h"

#define CHECK_HEAD_MAX 8192

enum phase { IDLE, CONNECTING, HANDSHAKING, SENDING, READING };

struct probe {
    ev_timer every;                /* the next probe */
    ev_timer deadline;             /* this one's timeout */
    ev_io io;
    const struct upstream_server_conf *sc;
    const struct upstream_group *g;
    struct transport t;            /* the socket (-1: none), TLS over it, the check's request queued */
    uint8_t phase;                 /* enum phase */
    struct upstream_response resp;
    uint32_t fails, passes;        /* in a row */
    bool down;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct config *wanted;      /* the newest configuration, for the thread to take */
static bool stop_wanted, started;
static pthread_t thread;
static struct ev_loop *loop;
static ev_async wake;

/* The thread's own. */
static struct config *cfg;
static struct probe probes[MAX_UPSTREAM_TOTAL];

/* Published: written by the thread, read by anyone. */
static uint64_t published_fingerprint;
static uint8_t published_down[MAX_UPSTREAM_TOTAL];
static uint64_t published_checks[MAX_UPSTREAM_TOTAL][2];   /* passed, failed */

static void store8(uint8_t *p, uint8_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static void add64(uint64_t *p) { __atomic_fetch_add(p, 1, __ATOMIC_RELAXED); }

bool upstream_health_down(uint64_t fingerprint, uint16_t index)
{
    return index < MAX_UPSTREAM_TOTAL && __atomic_load_n(&published_fingerprint, __ATOMIC_RELAXED) == fingerprint &&
           __atomic_load_n(&published_down[index], __ATOMIC_RELAXED);
}

void upstream_health_stats(uint64_t fingerprint, struct upstream_stats *out, int n)
{
    if (__atomic_load_n(&published_fingerprint, __ATOMIC_RELAXED) != fingerprint)
        return;
    for (int i = 0; i < n && i < MAX_UPSTREAM_TOTAL; i++) {
        out[i].checks[0] = __atomic_load_n(&published_checks[i][0], __ATOMIC_RELAXED);
        out[i].checks[1] = __atomic_load_n(&published_checks[i][1], __ATOMIC_RELAXED);
        out[i].checked_down = __atomic_load_n(&published_down[i], __ATOMIC_RELAXED);
    }
}

/* ---- one probe ---- */

static void end_probe(struct probe *p)
{
    ev_io_stop(loop, &p->io);
    ev_timer_stop(loop, &p->deadline);
    bool tls = p->t.ssl != NULL;
    transport_release(&p->t, false);
    if (tls)
        ERR_clear_error();
    if (p->t.fd >= 0)
        close(p->t.fd);
    p->t.fd = -1;
    if (p->phase == READING || p->phase == SENDING)
        h1resp_free(&p->resp);
    p->phase = IDLE;
}

static void finish(struct probe *p, bool passed, const char *why)
{
    end_probe(p);
    const struct health_check *h = p->g->check;
    add64(&published_checks[p->sc->index][passed ? 0 : 1]);
    if (passed) {
        p->fails = 0;
        if (p->down && ++p->passes >= h->passes) {
            p->down = false;
            store8(&published_down[p->sc->index], 0);
            log_msg(LOG_WARN, "upstream %s: health check passed %u time%s: back in", p->sc->text, p->passes,
                    p->passes == 1 ? "" : "s");
        }
        return;
    }
    p->passes = 0;
    if (!p->down && ++p->fails >= h->fails) {
        p->down = true;
        store8(&published_down[p->sc->index], 1);
        log_msg(LOG_WARN, "upstream %s: health check failed %u time%s (%s): left out", p->sc->text, p->fails,
                p->fails == 1 ? "" : "s", why);
    }
}

static void want(struct probe *p, int events)
{
    ev_io_stop(loop, &p->io);
    ev_io_set(&p->io, p->t.fd, events);
    ev_io_start(loop, &p->io);
}

static void start_request(struct probe *p)
{
    const struct health_check *h = p->g->check;
    if (!h->path) {
        finish(p, true, NULL);
        return;
    }
    char request[512];
    int n = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: h2park health check\r\nConnection: close\r\n\r\n",
                     h->path, h->host ? h->host : p->sc->addr.ss_family == AF_UNIX ? "localhost" : p->sc->text);
    if (n < 0 || (size_t)n >= sizeof request) {
        finish(p, false, "request too long");
        return;
    }
    if (buf_append(&p->t.out, request, (size_t)n)) {
        finish(p, false, "no memory for the request");
        return;
    }
    h1resp_init(&p->resp, false, false, CHECK_HEAD_MAX);
    p->phase = SENDING;
    want(p, EV_WRITE);
}

static void step(struct probe *p)
{
    switch (p->phase) {
    case CONNECTING: {
        int e = 0;
        socklen_t el = sizeof e;
        getsockopt(p->t.fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e) {
            char why[160];
            snprintf(why, sizeof why, "connect: %s", strerror(e));
            finish(p, false, why);
            return;
        }
        if (!p->g->check_tls) {
            start_request(p);
            return;
        }
        if (!(p->t.ssl = upstream_tls_client(p->g->check_tls, p->t.fd))) {
            finish(p, false, "cannot start TLS");
            return;
        }
        p->phase = HANDSHAKING;
    }
    /* fall through */
    case HANDSHAKING: {
        enum handshake h = transport_handshake(&p->t);
        /* What the batching BIO still holds goes first (a full socket). */
        int sent = h == HANDSHAKE_DONE || h == HANDSHAKE_FAILED ? 1 : tls_send_sealed(p->t.ssl);
        if (h == HANDSHAKE_FAILED || sent < 0) {
            char why[400];
            finish(p, false, upstream_tls_failure(p->g->check_tls, p->t.ssl, why, sizeof why));
        } else if (h == HANDSHAKE_DONE) {
            start_request(p);
        } else {
            want(p, h == HANDSHAKE_WANT_WRITE || !sent ? EV_WRITE : EV_READ);
        }
        return;
    }
    case SENDING: {
        uint64_t moved;
        int f = transport_flush(&p->t, &moved);
        if (f < 0) {
            finish(p, false, "the server closed while the check was sent");
            return;
        }
        if (f > 0) {
            want(p, EV_WRITE);
            return;
        }
        p->phase = READING;
        want(p, EV_READ);
    }
    /* fall through */
    case READING:
        for (;;) {
            char b[2048];
            ssize_t n = transport_read(&p->t, b, sizeof b);
            if (n == 0)
                return;
            if (n < 0) {
                finish(p, false, errno ? "the server reset the connection" : "the server closed without a response");
                return;
            }
            size_t off = 0;
            while (off < (size_t)n) {
                size_t used = 0;
                int r = h1resp_parse(&p->resp, b + off, (size_t)n - off, &used);
                off += used;
                if (r == UPSTREAM_ERROR) {
                    char why[200];
                    snprintf(why, sizeof why, "invalid response: %s", p->resp.error ? p->resp.error : "?");
                    finish(p, false, why);
                    return;
                }
                if (r == UPSTREAM_HEAD && !p->resp.informational) {
                    int status = p->resp.status;
                    char why[64];
                    snprintf(why, sizeof why, "status %d", status);
                    finish(p, status >= 200 && status < 400, why);
                    return;
                }
                if (r == UPSTREAM_MORE && !used)
                    break;
            }
        }
    default:
        return;
    }
}

static void on_io(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l, (void)revents;
    step((struct probe *)((char *)w - offsetof(struct probe, io)));
}

static void on_deadline(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l, (void)revents;
    struct probe *p = (struct probe *)((char *)t - offsetof(struct probe, deadline));
    static const char *const what[] = { [CONNECTING] = "connect timed out", [HANDSHAKING] = "TLS handshake timed out",
                                        [SENDING] = "timed out sending the check", [READING] = "no response in time" };
    finish(p, false, p->phase <= READING && what[p->phase] ? what[p->phase] : "timed out");
}

static void on_every(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l, (void)revents;
    struct probe *p = (struct probe *)((char *)t - offsetof(struct probe, every));
    if (p->phase != IDLE)
        return;                    /* the last one is still out (a timeout longer than the interval) */
    const struct upstream_server_conf *sc = p->sc;
    p->t.fd = socket(sc->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->t.fd < 0) {
        log_msg(LOG_ERROR, "upstream %s: health check: socket: %s", sc->text, strerror(errno));
        return;
    }
    if (sc->addr.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(p->t.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    p->phase = CONNECTING;
    ev_timer_set(&p->deadline, p->g->check->timeout, 0);
    ev_timer_start(loop, &p->deadline);
    if (connect(p->t.fd, (const struct sockaddr *)&sc->addr, sc->addrlen) < 0 && errno != EINPROGRESS &&
        errno != EAGAIN) {
        char why[160];
        snprintf(why, sizeof why, "connect: %s", strerror(errno));
        finish(p, false, why);
        return;
    }
    ev_io_init(&p->io, on_io, p->t.fd, EV_WRITE);
    ev_io_start(loop, &p->io);
}

/* ---- the configuration ---- */

static void take(struct config *next)
{
    uint64_t was = cfg ? upstream_fingerprint(cfg) : 0, now = upstream_fingerprint(next);
    for (int i = 0; i < MAX_UPSTREAM_TOTAL; i++) {
        end_probe(&probes[i]);
        ev_timer_stop(loop, &probes[i].every);
        probes[i].g = NULL;
    }
    if (was != now) {
        for (int i = 0; i < MAX_UPSTREAM_TOTAL; i++) {
            probes[i].fails = probes[i].passes = 0;
            probes[i].down = false;
            store8(&published_down[i], 0);
            __atomic_store_n(&published_checks[i][0], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&published_checks[i][1], 0, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&published_fingerprint, now, __ATOMIC_RELAXED);
    }
    for (uint32_t gi = 0; gi < next->nupstreams; gi++) {
        const struct upstream_group *g = &next->upstreams[gi];
        for (uint16_t s = 0; s < g->nservers; s++) {
            struct probe *p = &probes[g->servers[s].index];
            p->g = g;
            p->sc = &g->servers[s];
            if (!g->check)
                continue;
            /* Spread over the interval, so that many servers are not probed at once. */
            ev_timer_set(&p->every, g->check->interval * (0.05 + 0.9 * s / (g->nservers + 1)), g->check->interval);
            ev_timer_start(loop, &p->every);
        }
    }
    for (int i = 0; i < MAX_UPSTREAM_TOTAL; i++)
        if ((!probes[i].g || !probes[i].g->check) && probes[i].down) {
            probes[i].down = false;  /* a check taken away leaves the server to passive health */
            probes[i].fails = probes[i].passes = 0;
            store8(&published_down[i], 0);
        }
    if (cfg)
        config_unref(cfg);
    cfg = next;
}

static void on_wake(struct ev_loop *l, ev_async *a, int revents)
{
    (void)a, (void)revents;
    pthread_mutex_lock(&lock);
    struct config *next = wanted;
    wanted = NULL;
    bool stop = stop_wanted;
    pthread_mutex_unlock(&lock);
    if (next)
        take(next);
    if (stop)
        ev_break(l, EVBREAK_ALL);
}

static void *health_main(void *arg)
{
    (void)arg;
    ev_run(loop, 0);
    for (int i = 0; i < MAX_UPSTREAM_TOTAL; i++)
        end_probe(&probes[i]);
    if (cfg)
        config_unref(cfg);
    cfg = NULL;
    return NULL;
}

static bool has_checks(const struct config *c)
{
    for (uint32_t i = 0; i < c->nupstreams; i++)
        if (c->upstreams[i].check)
            return true;
    return false;
}

void upstream_health_use(struct config *c)
{
    if (!started && !has_checks(c))
        return;                    /* no thread until a configuration asks for checks */
    if (!started) {
        loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
        if (!loop) {
            log_msg(LOG_ERROR, "health checks: cannot make an event loop; servers are not checked");
            return;
        }
        for (int i = 0; i < MAX_UPSTREAM_TOTAL; i++) {
            probes[i].t.fd = -1;
            ev_init(&probes[i].every, on_every);
            ev_init(&probes[i].deadline, on_deadline);
        }
        ev_async_init(&wake, on_wake);
        ev_async_start(loop, &wake);
        if (pthread_create(&thread, NULL, health_main, NULL)) {
            log_msg(LOG_ERROR, "health checks: cannot start their thread; servers are not checked");
            ev_loop_destroy(loop);
            loop = NULL;
            return;
        }
        started = true;
    }
    config_ref(c);
    pthread_mutex_lock(&lock);
    struct config *old = wanted;
    wanted = c;
    pthread_mutex_unlock(&lock);
    if (old)
        config_unref(old);
    ev_async_send(loop, &wake);
}

void upstream_health_stop(void)
{
    if (!started)
        return;
    pthread_mutex_lock(&lock);
    stop_wanted = true;
    struct config *old = wanted;
    wanted = NULL;
    pthread_mutex_unlock(&lock);
    if (old)
        config_unref(old);
    ev_async_send(loop, &wake);
    pthread_join(thread, NULL);
    ev_loop_destroy(loop);
    started = false;
}
