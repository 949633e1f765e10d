/* Connection parking (Go 1.28's http2serveparking): when may a serve loop exit, and how
 * a parked connection gets a serve loop back.
 *
 * A connection may park when its serve loop has nothing to do: no input buffered (the
 * socket was read to EAGAIN, and OpenSSL holds no decrypted bytes), nothing the
 * protocol wants to write, no output stuck in conn->out, no handler ready to run.  Part
 * of a TLS record waiting in OpenSSL does not count: the rest can only come as new
 * readability, so such a connection parks like any other.  Open requests and handlers
 * waiting on timers or body do not prevent it, and neither does the protocol's state:
 * an idle HTTP/1.1 keep-alive connection parks exactly like an idle HTTP/2 one.  Parking frees the serve
 * coroutine's stack; the connection keeps its heap state, its watcher and its timer.
 * Any wake-up - readiness, a timer, a handler's output - then spawns a fresh serve
 * coroutine, which carries on from the connection's state: nothing lived on the old
 * stack that the next one needs. */
#include "core/conn.h"
#include "scalloc.h"

bool conn_may_park(const struct conn *c)
{
    if (!c->w->cfg->parking || conn_runnable(c) || conn_out_pending(c) || c->shutdown_asked || c->timed_out)
        return false;
    if (transport_holds_input(&c->sock))
        return false;
    if (c->state == CONN_OPEN && !c->nothing_to_write && c->proto->want_write(c))
        return false;
    return true;
}

/* Runs the connection's serve loop until it waits or parks.  Called from the worker's
 * event loop only. */
void conn_wake(struct conn *c)
{
    if (c->in_serve)
        return;                 /* running right now: it will see what changed */
    struct worker *w = c->w;
    if (!c->serve) {
        c->serve = coro_create(serve_main, c, 0);
        if (!c->serve) {
            log_msg(LOG_ERROR, "%s: no memory for a serve coroutine", conn_peer(c));
            return;             /* stays parked; the next readiness tries again */
        }
        counter_add(&w->n.serve_coroutines, 1);
        if (c->served_once)
            counter_add(&w->n.respawns_total, 1);
        counter_add(&w->n.parked_conns, -1);
    }
    void *result = NULL;
    if (coro_resume(c->serve, &result))
        return;                 /* waiting for I/O with parking off */
    counter_add(&w->n.serve_coroutines, -1);
    if (result == SERVE_CLOSED)
        return;                 /* c is gone */
    c->serve = NULL;
    c->parked_ticks = 0;
    c->trimmed = false;
    counter_add(&w->n.parked_conns, 1);
    counter_add(&w->n.parks_total, 1);
}

/* A connection parked for a while gives back what is dead until it wakes (the protocol
 * knows what: nghttp2's frame buffer, for one).  Done from the worker's tick rather than
 * at every park, so a busy connection that parks between requests does not pay a system
 * call and a page fault each time. */
void conn_trim_idle(struct conn *c)
{
    if (c->serve || c->trimmed)
        return;
    if (c->state == CONN_OPEN && c->proto->trim)
        c->proto->trim(c);
    c->trimmed = true;
}
