/* The request runtime: requests and their handler coroutines between the protocol front
 * ends below it and the application's routes above (request.h).
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
 *
 * The connection core knows none of this: a connection's requests are a struct
 * request_set it only holds (conn->requests), and it reaches them through struct
 * conn_runtime, which main sets to request_runtime.  Handlers that wait long are parked
 * by the runtime alone (park.c).
 *
 * The frame rule (PARKED_APART, request.h).  A parked handler keeps its live frames - from
 * the handler's entry down to the wait it is parked in - and nothing else of its stack,
 * so what it keeps is the sum of those frames' sizes.  A handler therefore does the work
 * that needs large locals (a head built in arrays, a path and a host laid out, a parse)
 * in functions marked PARKED_APART: never inlined, so their frames exist only while they
 * run and are gone before the next wait; and it waits only in frames that are small (a
 * loop around req_wait_io, with its state in a heap struct that outlives the waits).
 * The compiler would otherwise inline a step into its caller and every wait would keep
 * that step's locals (proxy_pass: 616 -> 552 bytes per parked handler; routes.c: 352
 * bytes, not 2.7 KiB, for /-/delay).  The bytes parked handlers keep are
 * /-/stats's parked_handler_bytes. */
#ifndef H2PARK_RUNTIME_H
#define H2PARK_RUNTIME_H

#include <string.h>

#include "core/conn.h"
#include "request.h"
#include "runtime/acceptenc.h"
#include "runtime/rate.h"

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
enum req_protocol { REQ_HTTP1, REQ_H2, REQ_H2C };

/* A connection's requests (conn->requests), from its first request to its last. */
struct request_set {
    struct request *all;                  /* every request not yet released */
    struct request *runnable, *runnable_tail;   /* handlers ready to run, FIFO */
    uint32_t open;                        /* requests begun and not closed */
    uint32_t live;                        /* handlers not finished */
};

/* Every open exchange holds one, waiting ones included: the order (and the bit-fields)
 * keep it at 504 bytes (its configuration and location included; what only a proxied
 * request or one behind a trusted proxy needs is in its extra), so an HTTP/2 stream with
 * room for a small head fits the 896-byte class and the HTTP/1.1 request that embeds it
 * the 512-byte one. */
struct request {
    struct conn *c;
    const struct request_ops *ops;
    struct config_hold *hold;             /* the configuration it began under (worker.c) */
    const struct config *cfg;             /* ... hold->cfg */
    const struct location *loc;           /* what the application matched it to, or NULL */
    struct request *next, *prev;          /* in the set's all */
    struct request *next_runnable;
    coro *handler;                        /* not to be touched while parked is set */
    coro_parked *parked;                  /* the handler, waiting long, without its stack (park.c) */
    uint8_t state;                        /* enum req_state */
    uint8_t wait;                         /* enum req_wait */
    uint8_t waited_ticks;                 /* worker ticks seen since it began to wait */
    uint8_t protocol;                     /* enum req_protocol */
    bool queued;                          /* in the set's runnable */
    uint8_t host_len;                     /* host_length(authority), if host_checked */
    bool responded : 1;                   /* head submitted */
    bool out_eof : 1, sent_all : 1;       /* body ended; all of it sent */
    bool too_large : 1;                   /* the head passed max_header_list_size */
    bool body_eof : 1;                    /* the request body ended */
    bool head : 1;                        /* a HEAD request */
    bool head_out : 1;                    /* the front end is done with resp (it may go) */
    bool aborted : 1;                     /* req_abort: the response never ends */
    bool body_asked : 1;                  /* body_wanted was called */
    bool upgrade_offered : 1;             /* the front end can tunnel it (req_upgrade) */
    bool tunnel : 1;                      /* answered 101: a tunnel both ways */
    bool host_checked : 1;                /* host_len is the authority's host (the front end measured it) */
    bool body_over : 1;                   /* past body_max: the rest is dropped */
    bool client_set : 1;                  /* a trusted proxy named the client (extra->client) */
    bool wide_out : 1;                    /* holds a share of the worker's wide-output budget */
    bool rate_limited : 1;                /* req_limit_rate: its extra has the meter */
    uint16_t nresp;                       /* response fields in resp */
    /* Room the front end allocated with the request (request_set_store), store_off bytes
     * after it: the head, then the response fields, live there while they fit, and cost
     * no allocation.  store_cap 0: none. */
    uint16_t store_off, store_cap, store_used;
    /* The head: name\0value\0 pairs, pseudo-headers first. */
    struct buf hdr;
    int status;                           /* of the response */
    uint32_t known[KF_COUNT];             /* where a known field's value starts in hdr, + 1; 0: absent */
    uint32_t nfields, header_bytes;
    uint32_t outb_off;
    const char *method, *target, *authority;
    int64_t content_length;
    struct buf body;                      /* received, not yet read by the handler */
    uint32_t body_off;                    /* (body holds at most a stream window) */
    /* The response: its fields (request_resp_field reads them), and the body's source. */
    uint64_t body_max, body_seen;         /* the body limit (0: none) and the bytes received */
    struct buf resp;
    int64_t out_length;                   /* >= 0, BODY_STREAM or BODY_NONE */
    struct buf outb;                      /* written by the handler, not yet sent */
    int64_t file_off, file_left;
    /* A file body: src.fd (-1 if none), or read from the copy src.mem instead; and its
     * owner's reference (src.release, if any).  src.fd -2: no file, the body is compressed
     * on the fly and src.arg is its compressor's state (request.c). */
    struct body_source src;
    uint64_t bytes_sent;
    ev_timer timer;                       /* the nearest of wake_at and the deadlines */
    struct request_extra *extra;          /* req_wait_fd's watcher, the upstream's record, the client; or NULL */
    ev_tstamp wake_at;                    /* when req_sleep ends, or 0 */
    ev_tstamp in_progress;                /* request body last arrived or was all read */
    ev_tstamp out_progress;               /* response data last went out or became ready */
    ev_tstamp started;
    ev_tstamp ended;                      /* read from the clock as the exchange ended */
};

/* What only some requests need, allocated on first use and freed with the request: the
 * watcher of req_wait_fd (a handler waiting on a descriptor of its own, the reverse
 * proxy's upstream socket), what a proxied request's upstream did, and the client a trusted
 * proxy named.  Being here, not in
 * the handler's frames, it stays reachable while the handler is parked. */
struct request_extra {
    ev_io fd_wait;                        /* started only while it waits */
    ev_io *waiting_on;                    /* fd_wait, or req_wait_io's watcher, while it waits */
    uint8_t fd_events;                    /* req_wait_fd: what it waits for, then what came */
    bool has_upstream;
    union {                               /* the client a trusted proxy named (client_set) */
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } client;
    struct req_upstream upstream;
    struct buf trailers;                  /* req_end_with_trailers: name\0value\0 pairs, names lower case */
    struct buf *park_frees;               /* req_park_frees: the handler's buffer, or NULL */
    const char *refused_by;               /* req_set_refused_by: the rule that refused it, or NULL */
    char *set_fields;                     /* req_set_field: name\0 '+'value\0 or '-'\0 ..., \0; or NULL */
    void (*at_release)(struct request *r);   /* req_at_release, or NULL */
    /* A rate-limited response's meter (rate_limited): allocated with the extra of such a
     * request only, so that no other request's extra outgrows its size class for it. */
    struct rate_meter rate[];
};

/* Compression on the fly (compress.c decides, request.c drives the encoder): the fields a
 * response that could be compressed goes with, and how. */
struct compress_out {
    struct header h[REQ_RESPONSE_FIELDS_MAX];
    size_t n;
    char etag[256];                /* the weak ETag, if made */
    uint8_t coding;                /* enum coding: CODING_IDENTITY, as it is (but Vary) */
    uint8_t level;
    bool flush_each;               /* text/event-stream: every write a flush point */
    bool skipped;                  /* a coding was accepted, but the budget was used */
};
/* The response fields all[0..n) of a response of this status and length, in a location
 * that compresses: -1 if it is not to be touched at all, else 0 and its fields at out.
 * over_budget: the worker's compressors hold compress_memory already - sent as it is (with
 * the Vary it would have had), never waiting for memory to come free. */
int compress_fields(struct request *r, int status, const struct header *all, size_t n, int64_t length,
                    bool over_budget, struct compress_out *out);

/* The response's trailer fields, for the front end once the body has ended: *off starts
 * at 0; false after the last (or if there are none). */
bool request_trailer(const struct request *r, size_t *off, struct header *f);

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

/* -1 without memory (the front end then frees r and refuses the exchange). */
int request_init(struct request *r, struct conn *c, const struct request_ops *ops, enum req_protocol protocol);
/* Gives r cap bytes at mem, which live as long as r and lie less than 64 KiB after it,
 * for its head and response fields. */
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
/* Of avail bytes of a rate-limited response, those its limit lets go now (0: its timer
 * wakes the connection, and output_ready resumes it, when more may go). */
size_t request_rate_allows(const struct request *r, size_t avail);
/* Of avail bytes (request_out_avail), those a front end may take now: all of them, less
 * what a rate limit holds back (a response without one pays a bit test). */
static inline size_t request_out_allowed(const struct request *r, size_t avail)
{
    return __builtin_expect(r->rate_limited, 0) && avail ? request_rate_allows(r, avail) : avail;
}
int request_out_take(struct request *r, char *dst, size_t n);
/* All the output the handler wrote, moved rather than copied into out when out is empty
 * (its offset into *out_off): the bytes moved, 0 if it cannot be (a file, nothing, or
 * more than a rate limit lets go now). */
size_t request_out_give(struct request *r, struct buf *out, uint32_t *out_off);
bool request_out_finished(const struct request *r);   /* everything taken, and the end is known */
/* Takes the rest of a body that is a file on disk (not a copy in memory) as a range
 * for sendfile - under a rate limit, what it lets go now - with a reference on the file
 * of its own (dropped by transport_file_done): false if the body is no such thing, or
 * the limit lets nothing go now. */
bool request_out_file(struct request *r, struct conn *c);
void request_sent_all(struct request *r);             /* the last byte went out */
void request_arm_timer(struct request *r);
/* Gives back the room a buffer of the request keeps beyond what it holds (park.c: while
 * its handler waits long). */
void request_shrink(struct request *r);

/* park.c: handlers waiting long give their stacks back.  request_park_waiting is the
 * runtime's tick; request_park parks one handler now (CORO_CHECKS-style testing, see
 * park_handlers_at_once); request_unpark comes before every resume of a parked one, and
 * request_drop_parked frees one that will not run again. */
void request_park_waiting(struct conn *c);
void request_park(struct request *r);
void request_unpark(struct request *r);
void request_drop_parked(struct request *r);
/* Frees the connection's request set, which must hold no request. */
void request_set_free(struct conn *c);

/* Appended to the access log when the exchange ends (set by the application). */
extern void (*request_log_hook)(const struct request *r);

/* What the core calls (main.c: conn_runtime = request_runtime). */
extern const struct conn_runtime request_runtime;

#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

#endif
