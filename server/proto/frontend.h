/* What the protocol front ends share: the request as they fill and drain it, and the
 * calls the request runtime (request.c) makes back into them.
 *
 * A front end creates a request when a head begins (request_init), adds the head's
 * fields (request_add_header: pseudo-headers :method, :path, :authority first), starts
 * it (request_start), hands it body (request_body, request_body_end) and pulls its
 * response (request_out_*), and says when the exchange is over (request_closed).  The
 * runtime calls the front end through struct request_ops.  A request's life is an enum
 * with one transition function (request.c):
 *
 *   RECEIVING --start--> HANDLING --handler returns--> DRAINING --closed--> DONE
 *       |                    |                                              ^
 *       +---closed-----------+--closed--> ORPHANED --handler returns--------+
 */
#ifndef H2PARK_FRONTEND_H
#define H2PARK_FRONTEND_H

#include <string.h>

#include "core/conn.h"
#include "request.h"

struct request_ops {
    /* The response head is ready (status, resp headers, out_length): send it. */
    int (*respond)(struct request *r);
    /* More response body is ready, or its end. */
    void (*output_ready)(struct request *r);
    /* The handler read n bytes of body (HTTP/2 opens the window by as much). */
    void (*consumed)(struct request *r, size_t n);
    /* The handler waits for body that has not come (HTTP/1.1 sends 100 Continue). */
    void (*body_wanted)(struct request *r);
    /* A deadline passed: abandon the exchange (RST_STREAM(CANCEL); HTTP/1.1 closes).  It
     * only asks: the caller wakes the connection afterwards, and nothing may run the serve
     * loop in between (it could free r and its connection under the caller). */
    void (*cancel)(struct request *r);
    /* Handler done and exchange over: free the front end's part and r itself. */
    void (*release)(struct request *r);
};

enum req_state { REQ_RECEIVING, REQ_HANDLING, REQ_DRAINING, REQ_ORPHANED, REQ_DONE };

enum req_wait { WAIT_NONE, WAIT_BODY, WAIT_WRITE, WAIT_TIMER, WAIT_FD };

struct request {
    struct conn *c;
    const struct request_ops *ops;
    const char *protocol;
    struct request *next, *prev;          /* in c->requests */
    struct request *next_runnable;
    coro *handler;
    uint8_t state;                        /* enum req_state */
    uint8_t wait;                         /* enum req_wait */
    bool queued;                          /* in c->runnable */
    bool too_large;                       /* the head passed max_header_list_size */
    bool body_eof;                        /* the request body ended */
    bool responded, out_eof, sent_all;    /* head submitted; body ended; all of it sent */
    bool head;                            /* a HEAD request */
    bool aborted;                         /* req_abort: the response never ends */
    bool body_asked;                      /* body_wanted was called */
    bool upgrade_offered;                 /* the front end can tunnel it (req_upgrade) */
    bool tunnel;                          /* answered 101: a tunnel both ways */
    uint8_t fd_events;                    /* req_wait_fd: what it waits for, then what came */
    /* The head: name\0value\0 pairs, pseudo-headers first. */
    struct buf hdr;
    /* Room the front end allocated with the request (request_set_store): the head, then
     * the response fields, live there while they fit, and cost no allocation. */
    char *store;
    uint32_t store_cap, store_used;
    uint32_t known[KF_COUNT];             /* where a known field's value starts in hdr, + 1; 0: absent */
    const char *method, *target, *authority;
    uint32_t nfields, header_bytes;
    int64_t content_length;
    struct buf body;                      /* received, not yet read by the handler */
    size_t body_off;
    /* The response: status, fields (request_resp_field reads them), and the body's source. */
    int status;
    struct buf resp;
    uint32_t nresp;
    int64_t out_length;                   /* >= 0, BODY_STREAM or BODY_NONE */
    struct buf outb;                      /* written by the handler, not yet sent */
    size_t outb_off;
    int file_fd;                          /* a file body, or -1 */
    const char *file_mem;                 /* ... read from this copy instead */
    int64_t file_off, file_left;
    struct body_source src;               /* its owner's reference (src.release, if any) */
    uint64_t bytes_sent;
    ev_timer timer;                       /* the nearest of wake_at and the deadlines */
    ev_io fd_wait;                        /* req_wait_fd's watcher (started only while it waits) */
    struct req_upstream *upstream;        /* what a proxied request's upstream did, or NULL */
    ev_tstamp wake_at;                    /* when req_sleep ends, or 0 */
    ev_tstamp in_progress;                /* request body last arrived or was all read */
    ev_tstamp out_progress;               /* response data last went out or became ready */
    ev_tstamp started;
    ev_tstamp ended;                      /* read from the clock as the exchange ended */
};

/* The response fields, in r->resp as respond wrote them: per field the lengths of its
 * name and value, then both, each followed by a NUL; names in lower case.  *off starts
 * at 0; false after the last field. */
struct resp_field {
    const char *name, *value;
    uint32_t nlen, vlen;
};
static inline bool request_resp_field(const struct request *r, size_t *off, struct resp_field *f)
{
    if (*off >= r->resp.len)
        return false;
    const char *p = r->resp.data + *off;
    memcpy(&f->nlen, p, sizeof f->nlen);
    memcpy(&f->vlen, p + 4, sizeof f->vlen);
    f->name = p + 8;
    f->value = f->name + f->nlen + 1;
    *off += 8 + (size_t)f->nlen + f->vlen + 2;
    return true;
}
#define RESP_FIELD_OVERHEAD 10      /* the two lengths and the two NULs */

void request_init(struct request *r, struct conn *c, const struct request_ops *ops, const char *protocol);
/* Gives r cap bytes at mem, which live as long as r, for its head and response fields. */
void request_set_store(struct request *r, char *mem, size_t cap);
/* One field of the head; false once the head is over max_header_list_size (the rest
 * is dropped and the handler answers 431), and for a request already started: its
 * handler points into the head, which never changes under it. */
bool request_add_header(struct request *r, const char *name, size_t nlen, const char *value, size_t vlen);
/* The head is complete: run the handler.  -1 if refused (max_handlers) or no memory;
 * the front end then refuses the request (REFUSED_STREAM, 503). */
int request_start(struct request *r);
int request_body(struct request *r, const char *data, size_t len);
void request_body_end(struct request *r);
/* The exchange is over for the protocol (stream closed, response sent, connection
 * going): a handler still running learns it at its next call. */
void request_closed(struct request *r);
/* The front end answered the request itself (HTTP/1.1's 400, 408, 414, 431, 505 and the
 * like, decided by its parser) with status and body_bytes of body, and the exchange is
 * over: closed, counted and logged as any other. */
void request_refused(struct request *r, int status, uint64_t body_bytes);
/* The response's body for the front end: bytes available now (a file's remaining
 * bytes count as available), and taking them. */
size_t request_out_avail(const struct request *r);
int request_out_take(struct request *r, char *dst, size_t n);
bool request_out_finished(const struct request *r);   /* everything taken, and the end is known */
/* Takes the rest of a body that is a file on disk (not a copy in memory) as a range
 * for sendfile, with a reference on the file of its own (dropped by
 * transport_file_done): false if the body is no such thing. */
bool request_out_file(struct request *r, struct conn *c);
void request_sent_all(struct request *r);             /* the last byte went out */
void request_arm_timer(struct request *r);

/* Appended to the access log when the exchange ends (set by the application). */
extern void (*request_log_hook)(const struct request *r);

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

#endif
