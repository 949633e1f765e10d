/* One worker's view of the upstream servers (upstream.h): balancing, passive health,
 * the keep-alive pool, connecting and sending.
 *
 * Balancing is nginx's: smooth weighted round robin (each pick adds every candidate's
 * weight to its score, takes the highest and lowers it by the total, so weights 5,1,1
 * give a a b a c a a rather than a a a a a b c), and least_conn picks among the servers
 * with the fewest connections in use for their weight, by the same round robin.  A
 * server that fails max_fails times within fail_timeout is left out for fail_timeout,
 * then tried again; a group of one server is never left out (there is nothing else to
 * try), as in nginx.  Backup servers take requests only when no primary can.
 *
 * The state is thread-local, one block per worker, registered once so /metrics can sum
 * the counters of every worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "counters.h"
#include "log.h"
#include "scalloc.h"
#include "upstream/upstream.h"

struct server_state {
    struct upstream_conn *idle;
    uint32_t nidle, active;
    uint32_t fails;
    int32_t score;                 /* smooth weighted round robin */
    double fail_since, down_until;
    SSL_SESSION *session;          /* the last one the server gave, to resume with */
    SSL_CTX *session_ctx;          /* ... made under this context (a reference held) */
    struct upstream_stats n;
};

struct upstreams {
    struct upstreams *next;        /* in the registry */
    uint64_t fingerprint;          /* of the server list this state is for */
    uint32_t epoch;
    const struct config *cfg;      /* the worker's: whose server list s is for */
    struct ev_loop *loop;          /* the worker's: the pool's watchers */
    struct server_state s[MAX_UPSTREAM_TOTAL];
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct upstreams *registry;
static __thread struct upstreams *mine;

static void set(uint64_t *c, uint64_t v) { __atomic_store_n(c, v, __ATOMIC_RELAXED); }

uint64_t upstream_fingerprint(const struct config *c)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)c->nupstream_servers;
    for (uint32_t i = 0; i < c->nupstream_servers; i++) {
        const struct upstream_server_conf *sc = &c->upstream_servers[i];
        for (const unsigned char *p = (const unsigned char *)sc->text; *p; p++)
            h = (h ^ *p) * 1099511628211ull;
        for (const unsigned char *p = (const unsigned char *)sc->group; *p; p++)
            h = (h ^ *p) * 1099511628211ull;
        h = (h ^ (sc->tls ? 's' : '/')) * 1099511628211ull;
    }
    return h;
}

static void forget_session(struct server_state *st)
{
    SSL_SESSION_free(st->session);
    SSL_CTX_free(st->session_ctx);
    st->session = NULL;
    st->session_ctx = NULL;
}

static void conn_close_now(struct upstream_conn *uc)
{
    if (mine)
        ev_io_stop(mine->loop, &uc->watch);
    h2up_free(uc);
    transport_release(&uc->t, true);   /* over TLS a close_notify first, best effort */
    close(uc->t.fd);
    sc_free(uc);
}

/* The worker's state: NULL until a configuration of the worker has upstream servers. */
static struct upstreams *state(void) { return mine; }

void upstream_configure(const struct config *c, struct ev_loop *loop)
{
    if (!mine) {
        if (!c->nupstream_servers || !(mine = sc_calloc(1, sizeof *mine)))
            return;
        mine->cfg = c;
        mine->loop = loop;
        mine->fingerprint = upstream_fingerprint(c);
        pthread_mutex_lock(&registry_lock);
        mine->next = registry;
        registry = mine;
        pthread_mutex_unlock(&registry_lock);
        return;
    }
    mine->cfg = c;
    uint64_t f = upstream_fingerprint(c);
    if (mine->fingerprint == f)
        return;
    for (int i = 0; i < MAX_UPSTREAM_TOTAL; i++) {
        struct server_state *s = &mine->s[i];
        while (s->idle) {
            struct upstream_conn *uc = s->idle;
            s->idle = uc->next;
            conn_close_now(uc);
        }
        forget_session(s);
        s->nidle = s->active = s->fails = 0;
        s->score = 0;
        s->fail_since = s->down_until = 0;
        uint64_t *n = (uint64_t *)&s->n;
        for (size_t k = 0; k < sizeof s->n / sizeof *n; k++)
            set(&n[k], 0);
    }
    mine->epoch++;                 /* connections in use now are closed when they end */
    __atomic_store_n(&mine->fingerprint, f, __ATOMIC_RELAXED);
}

/* Whether sc, of the configuration a request began under, is the server the worker's
 * state has at its index: not so for a request that began before a reload changed the
 * servers, which then neither takes a pooled connection (it could be another server's)
 * nor pools or counts its own. */
static bool current(const struct upstreams *u, const struct upstream_server_conf *sc)
{
    const struct config *c = u->cfg;
    return sc->index < c->nupstream_servers && !strcmp(c->upstream_servers[sc->index].text, sc->text) &&
           !strcmp(c->upstream_servers[sc->index].group, sc->group) && c->upstream_servers[sc->index].tls == sc->tls;
}

/* ---- choosing a server ---- */

static bool usable(const struct upstreams *u, const struct server_state *st, const struct upstream_server_conf *sc,
                   double now, bool *busy)
{
    if (st->down_until > now || upstream_health_down(u->fingerprint, sc->index))
        return false;
    if (sc->max_conns && st->active >= sc->max_conns) {
        *busy = true;
        return false;
    }
    return true;
}

static int pick_among(struct upstreams *u, const struct upstream_group *g, double now, uint32_t tried, bool backup,
                      bool *busy)
{
    /* least_conn: only the servers with the fewest connections for their weight compete. */
    double least = 1e300;
    if (g->balance == BALANCE_LEAST_CONN)
        for (int i = 0; i < g->nservers; i++) {
            const struct upstream_server_conf *sc = &g->servers[i];
            const struct server_state *st = &u->s[sc->index];
            if (sc->backup == backup && !(tried & 1u << i) && usable(u, st, sc, now, busy) &&
                (double)st->active / sc->weight < least)
                least = (double)st->active / sc->weight;
        }
    int best = -1;
    int32_t total = 0;
    for (int i = 0; i < g->nservers; i++) {
        const struct upstream_server_conf *sc = &g->servers[i];
        struct server_state *st = &u->s[sc->index];
        if (sc->backup != backup || (tried & 1u << i) || !usable(u, st, sc, now, busy))
            continue;
        if (g->balance == BALANCE_LEAST_CONN && (double)st->active / sc->weight > least)
            continue;
        st->score += (int32_t)sc->weight;
        total += (int32_t)sc->weight;
        if (best < 0 || st->score > u->s[g->servers[best].index].score)
            best = i;
    }
    if (best >= 0)
        u->s[g->servers[best].index].score -= total;
    return best;
}

int upstream_pick(const struct upstream_group *g, double now, uint32_t tried, enum upstream_failure *why)
{
    struct upstreams *u = state();
    if (!u) {
        *why = UF_BUSY;
        return -1;
    }
    bool busy = false;
    int s = pick_among(u, g, now, tried, false, &busy);
    if (s < 0)
        s = pick_among(u, g, now, tried, true, &busy);
    if (s < 0)
        *why = busy ? UF_BUSY : UF_NOLIVE;
    return s;
}

/* ---- health ---- */

static bool counts_against(enum upstream_failure f) { return f != UF_NONE && f != UF_NOLIVE && f != UF_BUSY; }

void upstream_failed(const struct upstream_group *g, const struct upstream_server_conf *sc, enum upstream_failure f,
                     double now)
{
    struct upstreams *u = state();
    if (!u || !sc || !current(u, sc))
        return;
    struct server_state *st = &u->s[sc->index];
    counter_add(&st->n.failures[f], 1);
    if (!counts_against(f) || !sc->max_fails || g->nservers == 1)
        return;
    if (now - st->fail_since > sc->fail_timeout) {
        st->fail_since = now;
        st->fails = 0;
    }
    if (++st->fails >= sc->max_fails && st->down_until <= now) {
        st->down_until = now + sc->fail_timeout;
        set(&st->n.down, 1);
        log_msg(LOG_WARN, "upstream %s: %u failure%s (%s): left out for %.0fs", sc->text, st->fails,
                st->fails == 1 ? "" : "s", upstream_failure_text[f], sc->fail_timeout);
    }
}

void upstream_responded(const struct upstream_server_conf *sc, int status)
{
    struct upstreams *u = state();
    if (!u || !sc || !current(u, sc))
        return;
    struct server_state *st = &u->s[sc->index];
    counter_add(&st->n.requests, 1);
    if (status >= 100 && status < 600)
        counter_add(&st->n.responses[status / 100 - 1], 1);
    st->fails = 0;
    if (st->n.down) {
        st->down_until = 0;
        set(&st->n.down, 0);
    }
}

/* ---- the pool ---- */

/* Still open, and with nothing to say: a server that closed (0) or sent bytes nobody
 * asked for is not reused - they would be read as the next request's response.  Over
 * TLS any record counts (a close_notify, or data), and so do bytes OpenSSL holds. */
static bool quiet(const struct transport *t)
{
    if (t->ssl && SSL_has_pending(t->ssl))
        return false;
    char b;
    ssize_t n = recv(t->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* uc was made for tls (its context), or is cleartext as wanted. */
static bool made_for(const struct upstream_conn *uc, const struct upstream_tls *tls)
{
    return tls ? uc->t.ssl && SSL_get_SSL_CTX(uc->t.ssl) == tls->ctx : !uc->t.ssl;
}

static void unlink_idle(struct server_state *st, struct upstream_conn *uc)
{
    if (uc->prev)
        uc->prev->next = uc->next;
    else
        st->idle = uc->next;
    if (uc->next)
        uc->next->prev = uc->prev;
    uc->next = uc->prev = NULL;
    st->nidle--;
    set(&st->n.idle, st->nidle);
    ev_io_stop(mine->loop, &uc->watch);
}

/* A pooled HTTP/1.1 connection's socket became readable: the server closed it, or said
 * something nobody asked for. */
static void on_idle_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop, (void)revents;
    struct upstream_conn *uc = w->data;
    unlink_idle(&mine->s[uc->server], uc);
    conn_close_now(uc);
}

struct upstream_conn *upstream_take(const struct upstream_server_conf *sc, const struct upstream_tls *tls, double now,
                                    bool h2, bool check)
{
    struct upstreams *u = state();
    if (!u || !current(u, sc))
        return NULL;
    struct server_state *st = &u->s[sc->index];
    for (struct upstream_conn *uc = st->idle, *next; uc; uc = next) {
        next = uc->next;
        if (!made_for(uc, tls) || (uc->h2 != NULL) != h2)
            continue;              /* another location's settings (or a reload's), or protocol */
        /* What the watcher knows: an event it has not been told yet (the socket became
         * readable before this turn's wait returned) is as good as one it handled; one
         * pooled in this very turn - the next request of a pipelining client, another
         * stream of the same turn - the loop has not looked at yet, and the socket is asked. */
        bool seen = ev_is_pending(&uc->watch), looked = uc->pooled_turn != ev_iteration(u->loop);
        unlink_idle(st, uc);
        bool ok = h2 ? h2up_idle_ok(uc)
                     : !seen && !(uc->t.ssl && SSL_has_pending(uc->t.ssl)) && ((looked && !check) || quiet(&uc->t));
        if (now - uc->idle_since <= sc->keepalive_timeout && ok) {
            st->active++;
            set(&st->n.active, st->active);
            return uc;
        }
        conn_close_now(uc);
    }
    return NULL;
}

struct upstream_conn *upstream_connect(struct request *r, const struct upstream_server_conf *sc,
                                       const struct upstream_tls *tls, double timeout, enum upstream_failure *why,
                                       char **detail)
{
    double deadline = req_now(r) + timeout;
    struct upstreams *u = state();
    *why = UF_CONNECT;
    *detail = NULL;
    if (!u)
        return NULL;
    int fd = socket(sc->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *detail = upstream_call_failed("socket", errno);
        return NULL;
    }
    if (sc->addr.ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    struct upstream_conn *uc = sc_calloc(1, sizeof *uc);
    if (!uc) {
        close(fd);
        return NULL;
    }
    uc->t.fd = fd;
    ev_io_init(&uc->watch, on_idle_readable, fd, 0);
    int rc = connect(fd, (const struct sockaddr *)&sc->addr, sc->addrlen);
    if (rc < 0 && (errno == EINPROGRESS || errno == EAGAIN)) {
        int w = req_wait_io(r, &uc->watch, REQ_WRITABLE, timeout);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : UF_CONNECT_TIMEOUT;
            conn_close_now(uc);
            return NULL;
        }
        int e = 0;
        socklen_t el = sizeof e;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
        errno = e;
        rc = e ? -1 : 0;
    }
    if (rc < 0) {
        *detail = upstream_call_failed("connect", errno);
        conn_close_now(uc);
        return NULL;
    }
    uc->server = (uint8_t)sc->index;
    uc->epoch = u->epoch;
    if (!current(u, sc))
        uc->epoch--;                /* closed when it is done, counted nowhere, keeps no session */
    if (tls && upstream_tls_handshake(r, uc, tls, deadline, why, detail)) {
        conn_close_now(uc);
        return NULL;
    }
    /* The handshake waited: a reload may have changed the server list meanwhile. */
    if (uc->epoch != u->epoch || !current(u, sc)) {
        uc->epoch = u->epoch - 1;
        *why = UF_NONE;
        return uc;
    }
    struct server_state *st = &u->s[sc->index];
    if (tls) {
        counter_add(&st->n.handshakes, 1);
        if (SSL_session_reused(uc->t.ssl))
            counter_add(&st->n.resumed, 1);
    }
    st->active++;
    set(&st->n.active, st->active);
    *why = UF_NONE;
    return uc;
}

/* ---- TLS sessions ---- */

SSL_SESSION *upstream_session_for(const struct upstream_conn *uc, const SSL_CTX *ctx)
{
    struct upstreams *u = state();
    if (!u || uc->epoch != u->epoch)
        return NULL;
    struct server_state *st = &u->s[uc->server];
    if (!st->session || st->session_ctx != ctx || !SSL_SESSION_is_resumable(st->session))
        return NULL;
    SSL_SESSION *s = st->session;
    if (SSL_SESSION_get_protocol_version(s) >= TLS1_3_VERSION) {
        st->session = NULL;          /* a ticket is used once: the caller takes this reference */
        SSL_CTX_free(st->session_ctx);
        st->session_ctx = NULL;
    } else if (!SSL_SESSION_up_ref(s)) {
        return NULL;
    }
    return s;
}

int upstream_session_keep(const struct upstream_conn *uc, SSL_SESSION *s)
{
    struct upstreams *u = state();
    if (!u || uc->epoch != u->epoch)
        return 0;
    struct server_state *st = &u->s[uc->server];
    SSL_CTX *ctx = SSL_get_SSL_CTX(uc->t.ssl);
    if (!SSL_CTX_up_ref(ctx))
        return 0;
    forget_session(st);
    st->session = s;
    st->session_ctx = ctx;
    return 1;
}

void upstream_done(struct upstream_conn *uc, bool reusable, double now)
{
    struct upstreams *u = state();
    if (!u || uc->epoch != u->epoch) {
        conn_close_now(uc);
        return;
    }
    struct server_state *st = &u->s[uc->server];
    st->active--;
    set(&st->n.active, st->active);
    uc->exchanges++;
    /* The same epoch: the worker's server list is the one uc was made for. */
    const struct upstream_server_conf *sc = &u->cfg->upstream_servers[uc->server];
    if (!reusable || transport_pending(&uc->t) || st->nidle >= sc->keepalive) {
        conn_close_now(uc);
        return;
    }
    buf_free(&uc->t.out);
    uc->t.out_off = 0;
    h2up_idle(uc);
    /* OpenSSL sets its read buffer up before the read that finds nothing, and
     * SSL_MODE_RELEASE_BUFFERS gives it back only after one that found data: over TLS 1.3
     * a pooled connection kept its 21 KiB until it was taken again. */
    if (uc->t.ssl)
        SSL_free_buffers(uc->t.ssl);
    uc->idle_since = now;
    uc->pooled_turn = ev_iteration(u->loop);
    uc->prev = NULL;
    uc->next = st->idle;           /* the most recently used is taken first: it is warm */
    if (uc->next)
        uc->next->prev = uc;
    st->idle = uc;
    st->nidle++;
    set(&st->n.idle, st->nidle);
    if (!uc->h2) {
        /* The exchange's last wait on the socket stopped this watcher in this turn of the
         * loop: started again for the same events, libev has nothing to tell the kernel. */
        ev_set_cb(&uc->watch, on_idle_readable);
        uc->watch.data = uc;
        ev_io_modify(&uc->watch, EV_READ);
        ev_io_start(u->loop, &uc->watch);
    }
}

void upstream_tick(double now)
{
    if (!mine)
        return;
    for (uint32_t i = 0; i < mine->cfg->nupstream_servers; i++) {
        struct server_state *st = &mine->s[i];
        for (struct upstream_conn *uc = st->idle, *next; uc; uc = next) {
            next = uc->next;
            if (now - uc->idle_since > mine->cfg->upstream_servers[i].keepalive_timeout) {
                unlink_idle(st, uc);
                conn_close_now(uc);
            }
        }
        if (st->n.down && st->down_until <= now)
            set(&st->n.down, 0);
    }
}

int upstream_stats_sum(const struct config *c, struct upstream_stats *out, int cap)
{
    int n = (int)c->nupstream_servers < cap ? (int)c->nupstream_servers : cap;
    memset(out, 0, sizeof *out * (size_t)n);
    uint64_t want = upstream_fingerprint(c);
    pthread_mutex_lock(&registry_lock);
    for (struct upstreams *u = registry; u; u = u->next) {
        if (__atomic_load_n(&u->fingerprint, __ATOMIC_RELAXED) != want)
            continue;               /* a worker still on another server list */
        for (int i = 0; i < n; i++) {
            const uint64_t *src = (const uint64_t *)&u->s[i].n;
            uint64_t *dst = (uint64_t *)&out[i];
            for (size_t k = 0; k < sizeof out[i] / sizeof *dst; k++)
                dst[k] += __atomic_load_n(&src[k], __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&registry_lock);
    upstream_health_stats(want, out, n);
    return n;
}

const struct upstream_client *upstream_client_for(const struct proxy_conf *pc)
{
    return pc->h2 ? &upstream_h2_client : &upstream_h1_client;
}

void upstream_exchange_free(struct upstream_exchange *ux)
{
    h1resp_free(&ux->resp);
    buf_free(&ux->rx);
}
