/* Handler parking: a handler that has waited a whole worker tick gives its stack back.
 *
 * A handler waits in one place, wait_for (request.c) - for request body, for room in
 * its output, for a timer, and so for whatever else is built on those - and the serve
 * loop is the only code that resumes it.  Once a tick the runtime looks at a
 * connection's waiting handlers (conn_runtime.tick); one that was already waiting at
 * the tick before is parked: coro_park moves its live frames (a few hundred bytes for a
 * handler asleep in /-/delay) into a heap object of that size and every page of its 32
 * KiB stack goes back to the OS, and its request gives back the room its buffers keep
 * (request_shrink).  A wait shorter than a tick costs a store in wait_for and nothing
 * else; a long one costs a park and an unpark, a few microseconds (bench_coro park).
 * Connection parking (core/park.c) is the same idea one layer down: together a
 * connection whose request waits keeps its heap state and the handler's live bytes.
 *
 * Nothing a waiting handler waits on is in its frames - its timer, its place in the
 * runnable queue, the body it will read and the output it wrote are all in struct
 * request - so nothing reads or writes a parked stack; whatever ends the wait only
 * queues the request (make_runnable), and run_handlers unparks it just before it
 * resumes it.  A handler that took pointers of its own frames elsewhere would break
 * that, so builds that check (SAN=1, CORO_CHECKS=1) fence every parked stack and report
 * the first touch; with H2PARK_DEBUG=parkhandlersatonce=1 every wait parks at once,
 * which is how the end-to-end tests run every handler through it. */
#include "runtime/runtime.h"

/* Parked at the second tick that finds it waiting: after one whole tick (1 to 2 s). */
#define PARK_AFTER_TICKS 2

void request_park(struct request *r)
{
    coro_parked *p = coro_park(r->handler);
    if (!p)
        return;                     /* out of memory: it keeps its stack, and tries again */
    r->parked = p;
    request_shrink(r);
    struct worker_counters *n = &r->c->w->n;
    counter_add(&n->parked_handlers, 1);
    counter_add(&n->parked_handler_bytes, (int64_t)coro_parked_bytes(p));
    counter_add(&n->handler_parks_total, 1);
}

static void forget(struct request *r)
{
    struct worker_counters *n = &r->c->w->n;
    counter_add(&n->parked_handlers, -1);
    counter_add(&n->parked_handler_bytes, -(int64_t)coro_parked_bytes(r->parked));
    r->parked = NULL;
}

void request_unpark(struct request *r)
{
    coro_parked *p = r->parked;
    forget(r);
    coro_unpark(p);
}

void request_drop_parked(struct request *r)
{
    coro_parked *p = r->parked;
    forget(r);
    coro_parked_destroy(p);
}

void request_park_waiting(struct conn *c)
{
    if (!c->requests->all) {
        request_set_free(c);        /* a whole tick without a request: the pointer is enough */
        return;
    }
    for (struct request *r = c->requests->all; r; r = r->next)
        if (r->handler && !r->parked && !r->queued && r->wait != WAIT_NONE && ++r->waited_ticks >= PARK_AFTER_TICKS)
            request_park(r);
}
