/* Connection parking (Go 1.28's http2serveparking): when may a serve loop exit, and how
 * a parked connection gets a serve loop back.
 *
 * A connection may park when its serve loop has nothing to do: no input buffered (the
 * socket was read to EAGAIN, and OpenSSL holds no decrypted bytes), nothing nghttp2
 * wants to write, no output stuck in conn->out, no handler ready to run.  Part of a TLS
 * record waiting in OpenSSL does not count: the rest can only come as new readability,
 * so such a connection parks like any other.  Open streams
 * and handlers waiting on timers or body do not prevent it.  Parking frees the serve
 * coroutine's stack; the connection keeps its heap state, its watcher and its timer.
 * Any wake-up - readiness, a timer, a handler's output - then spawns a fresh serve
 * coroutine, which carries on from the connection's state: nothing lived on the old
 * stack that the next one needs. */
#include <string.h>

#include "h2park.h"
#include "scalloc.h"

bool conn_may_park(const struct conn *c)
{
    if (!cfg.parking || c->runnable || c->out.len > c->out_off || c->goaway_pending || c->timed_out)
        return false;
    if (c->ssl && SSL_pending(c->ssl) > 0)
        return false;
    if (c->h2 && nghttp2_session_want_write(c->h2))
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
            log_msg(LOG_ERROR, "%s: no memory for a serve coroutine", c->peer);
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
    c->parked_at = ev_now(w->loop);
    c->trimmed = false;
    counter_add(&w->n.parked_conns, 1);
    counter_add(&w->n.parks_total, 1);
}

static void release_zero_pages(void *p, size_t len)
{
    static const char zero[4096];
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + len) & ~(uintptr_t)4095;
    for (uintptr_t a = lo; a < hi; a += 4096)
        if (!memcmp((void *)a, zero, 4096))
            sc_release_pages((void *)a, 4096);
}

/* A connection parked for a while gives back what is dead until it wakes: the pages of
 * nghttp2's frame buffer (nghttp2 rewrites it from the start for every frame).  Done
 * from a timer rather than at every park, so a busy connection that parks between
 * requests does not pay a system call and a page fault each time.  The stream map's
 * table goes back page by page where a page is all zero (no streams hash there), which
 * is every page once the connection has no streams. */
void conn_trim_idle(struct conn *c)
{
    if (c->serve || c->trimmed)
        return;
    if (c->framebuf)
        sc_release_pages(c->framebuf, c->framebuf_size);
    if (c->zeroish)
        release_zero_pages(c->zeroish, c->zeroish_size);
    c->trimmed = true;
}
