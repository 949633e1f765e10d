/* Worker threads: each owns a libev loop, its side of every listening socket (listen.c),
 * and the connections it accepted.
 *
 * Configuration: the main thread publishes a checked configuration tree with the
 * listener table (workers_publish, under a lock) and wakes every worker through its
 * ev_async; the worker takes a reference to the tree and copies the table between two
 * events (adopt), opens the listeners that are new, closes its socket of those that
 * went away and drains the connections it accepted there (GOAWAY, or a close between
 * requests), re-aims its timers, and tells the main thread which generation it now
 * runs.  The main thread publishes no new generation until every worker has taken the
 * last one (main.c), so the sockets and arrays a generation names stay valid until it
 * is taken.
 *
 * Requests hold the tree they began under (worker_hold_config): each generation a
 * worker has run has a hold that counts its requests, touched by that worker alone, so
 * a request pays an increment and a decrement and no atomic.  A hold the worker has
 * moved on from lets go of its tree when its last request ends.
 *
 * Accepting pauses when max_conns is reached and when accept fails for lack of file
 * descriptors; a short timer resumes it, so neither case spins the loop.  Shutdown
 * arrives through an ev_async: stop accepting, ask every connection to stop (a GOAWAY,
 * or a close between requests; parked ones are woken for it), and leave the loop when
 * the last connection has closed or shutdown_timeout has passed.
 *
 * TLS handshakes in a storm (thousands of clients arriving at once, after a network blip
 * or a restart): a full handshake's first step - the ClientHello's key exchange and
 * signature - costs the worker about half a millisecond, so one loop iteration begins
 * at most HANDSHAKES_PER_TURN of them; the rest wait in order (w->hs_wait), their
 * watchers stopped, and begin in later iterations.  Established connections thus wait at
 * most one such batch between their turns, and a client's handshake_timeout counts from
 * when its turn came, never while it queued: a storm is served at the worker's pace
 * instead of timing out the handshakes it has not reached and wasting the work spent on
 * the others.  Accepting goes on meanwhile (a connection waiting costs its struct and its
 * SSL object; max_conns bounds them). */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/conn.h"
#include "scalloc.h"

#define ACCEPT_BURST 64
#define ACCEPT_RETRY 0.1
#define HANDSHAKES_PER_TURN 16

struct worker *workers;
void (*worker_tick_hook)(int worker, ev_tstamp now, const struct worker_counters *n, const struct config *cfg);
void (*worker_config_hook)(const struct config *c, struct ev_loop *loop);
const char *const close_reason_names[CLOSED_REASONS] = { "peer", "idle", "timeout", "goaway", "error" };
const char *const handshake_end_names[HANDSHAKE_ENDS] = { "full", "resumed", "failed", "timed_out" };
_Atomic int shutting_down;
int nworkers;
static _Atomic long live_conns;

/* What the main thread published last (one reference of its own). */
static pthread_mutex_t published_lock = PTHREAD_MUTEX_INITIALIZER;
static struct config *published;
static struct listener published_listeners[MAX_LISTEN];
static unsigned published_gen;

/* The main thread's loop, woken when a worker took a configuration or stopped. */
static struct ev_loop *main_loop;
static ev_async main_notify;
static void (*main_notify_cb)(void);

int workers_create(int n)
{
    workers = sc_calloc((size_t)n, sizeof *workers);
    if (!workers)
        return -1;
    nworkers = n;
    for (int i = 0; i < n; i++)
        workers[i].id = i;
    return 0;
}

static void set_accepting(struct worker *w, bool on)
{
    if (w->accepting == on)
        return;
    w->accepting = on;
    for (int l = 0; l < MAX_LISTEN; l++) {
        if (!w->lis[l].serial)
            continue;
        if (on)
            ev_io_start(w->loop, &w->lis[l].io);
        else
            ev_io_stop(w->loop, &w->lis[l].io);
    }
}

static void pause_accepting(struct worker *w)
{
    set_accepting(w, false);
    if (!ev_is_active(&w->accept_pause)) {
        ev_timer_set(&w->accept_pause, ACCEPT_RETRY, ACCEPT_RETRY);
        ev_timer_start(w->loop, &w->accept_pause);
    }
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker *w = t->data;
    if (w->shutting_down || atomic_load(&live_conns) >= config_max_conns(w->cfg))
        return;
    ev_timer_stop(loop, t);
    set_accepting(w, true);
}

/* The ready list: connections whose serve step stopped at its budget with work the
 * socket does not show.  The check watcher runs after every poll and wakes the
 * connections that were on the list when it started; one that goes back on waits for
 * the next iteration, after every connection the poll reported has had its turn. */
void conn_mark_ready(struct conn *c)
{
    struct worker *w = c->w;
    if (c->ready)
        return;
    c->ready = true;
    c->ready_next = NULL;
    if (w->ready_tail)
        w->ready_tail->ready_next = c;
    else
        w->ready = c;
    w->ready_tail = c;
    ev_idle_start(w->loop, &w->ready_idle);
}

/* Takes c out of a list linked by ready_next (a walk: only a closing connection leaves
 * a list before its turn). */
static void unlink_waiting(struct conn **head, struct conn **tail, struct conn *c)
{
    struct conn *prev = NULL;
    for (struct conn *r = *head; r; prev = r, r = r->ready_next) {
        if (r != c)
            continue;
        if (prev)
            prev->ready_next = c->ready_next;
        else
            *head = c->ready_next;
        if (*tail == c)
            *tail = prev;
        return;
    }
}

void worker_forget_ready(struct worker *w, struct conn *c)
{
    if (!c->ready)
        return;
    unlink_waiting(&w->ready, &w->ready_tail, c);
    c->ready = false;
}

bool worker_handshake_turn(struct conn *c)
{
    struct worker *w = c->w;
    if (c->hs_waiting)
        return false;
    if (!w->hs_wait && w->hs_begun < HANDSHAKES_PER_TURN) {
        w->hs_begun++;
        return true;
    }
    c->hs_waiting = true;
    c->ready_next = NULL;
    if (w->hs_wait_tail)
        w->hs_wait_tail->ready_next = c;
    else
        w->hs_wait = c;
    w->hs_wait_tail = c;
    conn_watch(c, false, false);
    counter_add(&w->n.handshakes_waiting, 1);
    ev_idle_start(w->loop, &w->ready_idle);
    return false;
}

void worker_forget_handshake(struct worker *w, struct conn *c)
{
    if (!c->hs_waiting)
        return;
    unlink_waiting(&w->hs_wait, &w->hs_wait_tail, c);
    c->hs_waiting = false;
    counter_add(&w->n.handshakes_waiting, -1);
}

/* The handshakes this iteration has room for, oldest first; its deadline counts from now. */
static void begin_waiting_handshakes(struct worker *w)
{
    while (w->hs_wait && w->hs_begun < HANDSHAKES_PER_TURN) {
        struct conn *c = w->hs_wait;
        w->hs_wait = c->ready_next;
        if (!w->hs_wait)
            w->hs_wait_tail = NULL;
        c->hs_waiting = false;
        counter_add(&w->n.handshakes_waiting, -1);
        w->hs_begun++;
        c->since = ev_now(w->loop);
        conn_arm_timer(c);
        conn_wake(c);
    }
    w->hs_begun = 0;
}

static void on_ready_check(struct ev_loop *loop, ev_check *chk, int revents)
{
    (void)revents;
    struct worker *w = chk->data;
    struct conn *list = w->ready;
    w->ready = w->ready_tail = NULL;
    while (list) {
        struct conn *c = list;
        list = c->ready_next;
        c->ready = false;
        conn_wake(c);
    }
    begin_waiting_handshakes(w);
    if (!w->ready && !w->hs_wait)
        ev_idle_stop(loop, &w->ready_idle);
}

static void on_ready_idle(struct ev_loop *loop, ev_idle *idle, int revents)
{
    (void)loop, (void)idle, (void)revents;   /* exists so that the poll does not block */
}

void worker_conn_opened(void) { atomic_fetch_add(&live_conns, 1); }

void worker_conn_closed(struct worker *w)
{
    atomic_fetch_sub(&live_conns, 1);
    if (w->shutting_down && !w->conns)
        ev_break(w->loop, EVBREAK_ALL);
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop, (void)revents;
    struct worker *w = io->data;
    struct worker_listener *wl = &w->lis[(size_t)((char *)io - (char *)w->lis) / sizeof *wl];
    long limit = config_max_conns(w->cfg);
    for (int i = 0; i < ACCEPT_BURST; i++) {
        if (atomic_load(&live_conns) >= limit) {
            pause_accepting(w);
            return;
        }
        struct sockaddr_storage sa;
        socklen_t salen = sizeof sa;
        int fd = accept4(io->fd, (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                log_msg(LOG_WARN, "accept: %s; pausing accepts for %.0f ms", strerror(errno), ACCEPT_RETRY * 1000);
                pause_accepting(w);
                return;
            }
            log_msg(LOG_WARN, "accept: %s", strerror(errno));
            return;
        }
        unsigned slot = (unsigned)(wl - w->lis);
        /* Before anything is spent on it; a PROXY header's client is counted once it is read. */
        uint32_t per_client = config_conns_per_client(w->cfg, slot);
        int counted = per_client && !wl->proxy_protocol ? connlimit_acquire(w, slot, per_client, (struct sockaddr *)&sa) : 0;
        if (counted < 0) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        unsigned flags = (wl->tls ? CONN_TLS : 0) | (wl->proxy_protocol ? CONN_PROXY_PROTOCOL : 0);
        struct conn *c = conn_new(w, fd, flags, slot, (struct sockaddr *)&sa, salen);
        if (!c) {
            if (counted) {
                struct conn gone = { .w = w };
                memcpy(&gone.peer, &sa, salen <= sizeof gone.peer ? salen : sizeof gone.peer);
                connlimit_release(&gone);
            }
            close(fd);
            continue;
        }
        c->client_counted = counted > 0;
        if (!w->cfg->parking)
            conn_wake(c);    /* parking off: every connection has a serve loop from the start */
    }
}

static void on_scavenge(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)t, (void)revents;
    coro_trim_stacks(false);
    sc_scavenge();
}

/* Housekeeping timers do not keep the loop alive: started, they are unref'd. */
static void arm_scavenge(struct worker *w)
{
    if (ev_is_active(&w->scavenge)) {
        ev_ref(w->loop);
        ev_timer_stop(w->loop, &w->scavenge);
    }
    if (w->cfg && w->cfg->scavenge_interval > 0) {
        ev_timer_set(&w->scavenge, w->cfg->scavenge_interval, w->cfg->scavenge_interval);
        ev_timer_start(w->loop, &w->scavenge);
        ev_unref(w->loop);
    }
}

#define TICK 1.0

/* Housekeeping once a second: parked connections give back their dead pages, the
 * request runtime parks handlers that have waited long, and the application sweeps what
 * it caches. */
static void on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker *w = t->data;
    ev_tstamp now = ev_now(loop);
    if (w->cfg->parking)
        for (struct conn *c = w->conns; c; c = c->next) {
            if (!c->serve && !c->trimmed && ++c->parked_ticks >= 2)   /* parked a whole tick */
                conn_trim_idle(c);
            if (c->requests)
                conn_runtime.tick(c);
        }
    coro_trim_stacks(true);
    if (worker_tick_hook)
        worker_tick_hook(w->id, now, &w->n, w->cfg);
}

static void close_listener(struct worker *w, int l)
{
    struct worker_listener *wl = &w->lis[l];
    if (!wl->serial)
        return;
    ev_io_stop(w->loop, &wl->io);
    if (!wl->shared)
        close(wl->fd);          /* a shared one is systemd's and the other workers' too */
    wl->serial = 0;
}

void worker_drop_hold(struct worker *w, struct config_hold *h)
{
    for (struct config_hold **p = &w->retired; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    config_unref(h->cfg);
    sc_free(h);
}

int worker_use_config(struct worker *w, struct config *c)
{
    struct config_hold *h = sc_calloc(1, sizeof *h), *old = w->hold;
    if (!h)
        return -1;
    config_ref(c);
    h->cfg = c;
    w->hold = h;
    w->cfg = c;
    if (old && old->inflight == 0) {
        config_unref(old->cfg);
        sc_free(old);
    } else if (old) {
        old->next = w->retired;     /* its requests still read it */
        w->retired = old;
    }
    return 0;
}

/* Takes the configuration the main thread published last, unless this worker runs it
 * already.  Runs from the loop, between events: no serve step or handler is running. */
static void adopt(struct worker *w)
{
    struct listener lis[MAX_LISTEN];
    bool was_parking = w->cfg && w->cfg->parking;
    double was_scavenge = w->cfg ? w->cfg->scavenge_interval : 0;
    struct config *next = NULL;
    pthread_mutex_lock(&published_lock);
    unsigned gen = published_gen;
    if (gen != w->gen) {
        next = published;
        config_ref(next);           /* published may be replaced once the lock is let go */
        memcpy(lis, published_listeners, sizeof lis);
    }
    pthread_mutex_unlock(&published_lock);
    if (gen == w->gen)
        return;
    int failed = worker_use_config(w, next);
    config_unref(next);
    if (failed) {
        log_msg(LOG_ERROR, "worker %d: out of memory taking the new configuration; the old one stays", w->id);
        return;
    }
    bool first = w->gen == 0;
    w->gen = gen;
    for (int l = 0; l < MAX_LISTEN; l++) {
        struct worker_listener *wl = &w->lis[l];
        if (wl->serial && wl->serial != lis[l].serial) {
            close_listener(w, l);
            for (struct conn *c = w->conns, *next; c; c = next) {
                next = c->next;
                if (c->listener == l) {          /* its address went away: drain it */
                    c->listener = NO_LISTENER;
                    conn_request_shutdown(c);
                }
            }
        }
        if (lis[l].serial && wl->serial != lis[l].serial) {
            wl->serial = lis[l].serial;
            wl->shared = lis[l].shared;
            wl->fd = lis[l].fds[lis[l].shared ? 0 : w->id];
            ev_io_init(&wl->io, on_accept, wl->fd, EV_READ);
            wl->io.data = w;
            if (w->accepting)
                ev_io_start(w->loop, &wl->io);
        }
        wl->tls = lis[l].a.tls;
        wl->proxy_protocol = lis[l].a.proxy_protocol;
    }
    if (first || w->cfg->scavenge_interval != was_scavenge)
        arm_scavenge(w);
    if (!first)
        for (struct conn *c = w->conns, *next; c; c = next) {
            next = c->next;
            conn_arm_timer(c);               /* a shorter timeout applies now */
            if (was_parking && !w->cfg->parking && !c->serve)
                conn_wake(c);                /* parking off: every connection gets its serve loop */
        }
    if (worker_config_hook)
        worker_config_hook(w->cfg, w->loop);
    atomic_store(&w->applied, gen);
    if (main_loop)
        ev_async_send(main_loop, &main_notify);
}

static void on_shutdown_deadline(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker *w = t->data;
    log_msg(LOG_WARN, "worker %d: shutdown_timeout passed, closing remaining connections", w->id);
    while (w->conns) {
        struct conn *c = w->conns;
        conn_force_close(c);
        if (w->conns == c) {      /* could not even spawn a serve loop to close it */
            break;
        }
    }
    ev_break(loop, EVBREAK_ALL);
}

/* The main thread's word: a new configuration, or stop. */
static void on_notify(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)revents;
    struct worker *w = a->data;
    if (w->shutting_down)
        return;
    if (!atomic_load(&shutting_down)) {
        adopt(w);
        return;
    }
    w->shutting_down = true;
    set_accepting(w, false);
    ev_timer_stop(loop, &w->accept_pause);
    for (int l = 0; l < MAX_LISTEN; l++)
        close_listener(w, l);
    if (!w->conns) {
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    ev_timer_init(&w->shutdown_deadline, on_shutdown_deadline, w->cfg->shutdown_timeout, 0);
    w->shutdown_deadline.data = w;
    ev_timer_start(loop, &w->shutdown_deadline);
    for (struct conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        conn_request_shutdown(c);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    adopt(w);
    set_accepting(w, true);
    ev_run(w->loop, 0);
    coro_trim_stacks(false);
    sc_scavenge();
    atomic_store(&w->exited, true);
    ev_async_send(main_loop, &main_notify);
    return NULL;
}

/* A worker's loop and housekeeping, without its listeners or thread (the fuzzers run
 * one in their own thread). */
int worker_init_loop(struct worker *w)
{
    w->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (!w->loop)
        return -1;
    ev_init(&w->accept_pause, on_accept_pause);
    w->accept_pause.data = w;
    ev_check_init(&w->ready_check, on_ready_check);
    w->ready_check.data = w;
    /* After every other callback of the iteration (libev runs pending watchers by
     * priority): a connection that one of them marks ready runs in this iteration,
     * rather than after one more poll that would find its upstream socket ready again
     * with no watcher on it (an epoll_ctl to drop it, another to add it back). */
    ev_set_priority(&w->ready_check, EV_MINPRI);
    ev_check_start(w->loop, &w->ready_check);
    ev_unref(w->loop);
    ev_idle_init(&w->ready_idle, on_ready_idle);
    ev_async_init(&w->notify, on_notify);
    w->notify.data = w;
    ev_async_start(w->loop, &w->notify);
    ev_init(&w->scavenge, on_scavenge);
    arm_scavenge(w);
    ev_timer_init(&w->tick, on_tick, TICK, TICK);
    w->tick.data = w;
    ev_timer_start(w->loop, &w->tick);
    ev_unref(w->loop);
    return 0;
}

/* AddressSanitizer pads every frame with redzones: the measured default stack (see the
 * docs/coroutines.md) is too small for its builds, so they get twice as much. */
#if defined(__SANITIZE_ADDRESS__)
#define STACK_SCALE 2
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STACK_SCALE 2
#endif
#endif
#ifndef STACK_SCALE
#define STACK_SCALE 1
#endif

static void on_main_notify(struct ev_loop *loop, ev_async *a, int revents)
{
    (void)loop, (void)a, (void)revents;
    main_notify_cb();
}

int workers_start(struct ev_loop *loop, void (*notify)(void))
{
    main_loop = loop;
    ev_async_init(&main_notify, on_main_notify);
    main_notify_cb = notify;
    ev_async_start(loop, &main_notify);
    const struct config *c = published;
    struct coro_options co = { .stack_size = c->coro_stack_size * STACK_SCALE, .guard_pages = c->coro_guard_pages,
                               .paint = c->coro_paint };
    coro_configure(&co);
    for (int i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        if (worker_init_loop(w) || pthread_create(&w->thread, NULL, worker_main, w))
            return -1;
    }
    return 0;
}

unsigned workers_publish(struct config *c)
{
    config_ref(c);
    pthread_mutex_lock(&published_lock);
    struct config *old = published;
    published = c;
    memcpy(published_listeners, listeners, sizeof published_listeners);
    unsigned gen = ++published_gen;
    pthread_mutex_unlock(&published_lock);
    config_unref(old);
    for (int i = 0; i < nworkers; i++)
        if (workers[i].loop)
            ev_async_send(workers[i].loop, &workers[i].notify);
    return gen;
}

bool workers_all_applied(unsigned gen)
{
    for (int i = 0; i < nworkers; i++)
        if (atomic_load(&workers[i].applied) < gen && !atomic_load(&workers[i].exited))
            return false;
    return true;
}

bool workers_all_exited(void)
{
    for (int i = 0; i < nworkers; i++)
        if (!atomic_load(&workers[i].exited))
            return false;
    return true;
}

long workers_live_conns(void) { return atomic_load(&live_conns); }

void workers_shutdown(void)
{
    for (int i = 0; i < nworkers; i++)
        ev_async_send(workers[i].loop, &workers[i].notify);
}

void workers_join(void)
{
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i].thread, NULL);
}

void workers_sum(struct worker_counters *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < nworkers; i++) {
        const struct worker_counters *n = &workers[i].n;
        out->conns += __atomic_load_n(&n->conns, __ATOMIC_RELAXED);
        out->parked_conns += __atomic_load_n(&n->parked_conns, __ATOMIC_RELAXED);
        out->serve_coroutines += __atomic_load_n(&n->serve_coroutines, __ATOMIC_RELAXED);
        out->handler_coroutines += __atomic_load_n(&n->handler_coroutines, __ATOMIC_RELAXED);
        out->parked_handlers += __atomic_load_n(&n->parked_handlers, __ATOMIC_RELAXED);
        out->parked_handler_bytes += __atomic_load_n(&n->parked_handler_bytes, __ATOMIC_RELAXED);
        out->wide_output_bytes += __atomic_load_n(&n->wide_output_bytes, __ATOMIC_RELAXED);
        out->handler_parks_total += __atomic_load_n(&n->handler_parks_total, __ATOMIC_RELAXED);
        out->conns_total += __atomic_load_n(&n->conns_total, __ATOMIC_RELAXED);
        out->streams_total += __atomic_load_n(&n->streams_total, __ATOMIC_RELAXED);
        out->parks_total += __atomic_load_n(&n->parks_total, __ATOMIC_RELAXED);
        out->respawns_total += __atomic_load_n(&n->respawns_total, __ATOMIC_RELAXED);
        out->bytes_in += __atomic_load_n(&n->bytes_in, __ATOMIC_RELAXED);
        out->bytes_out += __atomic_load_n(&n->bytes_out, __ATOMIC_RELAXED);
        for (int r = 0; r < CLOSED_REASONS; r++)
            out->closed[r] += __atomic_load_n(&n->closed[r], __ATOMIC_RELAXED);
        for (int r = 0; r < CONN_REFUSALS; r++)
            out->conns_refused[r] += __atomic_load_n(&n->conns_refused[r], __ATOMIC_RELAXED);
        for (int r = 0; r < HANDSHAKE_ENDS; r++)
            out->handshakes[r] += __atomic_load_n(&n->handshakes[r], __ATOMIC_RELAXED);
        out->handshakes_waiting += __atomic_load_n(&n->handshakes_waiting, __ATOMIC_RELAXED);
        out->compress_state_bytes += __atomic_load_n(&n->compress_state_bytes, __ATOMIC_RELAXED);
        out->compress_skipped += __atomic_load_n(&n->compress_skipped, __ATOMIC_RELAXED);
        out->compress_lowered += __atomic_load_n(&n->compress_lowered, __ATOMIC_RELAXED);
        for (int k = 0; k < COUNTED_CODINGS; k++) {
            out->compressed_responses[k] += __atomic_load_n(&n->compressed_responses[k], __ATOMIC_RELAXED);
            out->compress_in_bytes[k] += __atomic_load_n(&n->compress_in_bytes[k], __ATOMIC_RELAXED);
            out->compress_out_bytes[k] += __atomic_load_n(&n->compress_out_bytes[k], __ATOMIC_RELAXED);
        }
    }
}
