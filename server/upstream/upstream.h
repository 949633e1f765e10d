/* Upstreams: the servers the reverse proxy passes requests to (app/proxy_pass.c), seen
 * from one worker - which server a request goes to, its health, and the connections kept
 * open to it.
 *
 * Everything here is per worker thread and touched by that thread only, like a
 * connection: the balancing state, the passive health of each server, and the
 * keep-alive pool.  An idle pooled connection is its socket, this struct and a watcher
 * on the socket, nothing more - no coroutine, no buffer, no parser (as a parked client
 * connection).  An HTTP/1.1 one is closed as soon as the watcher sees the server close
 * it or send anything (bytes nobody asked for would be read as the next request's
 * response), as nginx's keepalive cache does; so taking one asks the socket nothing
 * once the loop has looked at it since it was pooled, but for a request that could not
 * be sent again (upstream_take's check).  An HTTP/2
 * one, whose server may speak meanwhile (SETTINGS, PING, GOAWAY), has no watcher and is
 * read when it is taken.  The worker's tick closes those idle past their group's
 * keepalive_timeout.  A connection goes
 * back to the pool only after a complete exchange (upstream_put's caller says so);
 * after an error or an unfinished body it is closed.
 *
 * The servers are config->upstream_servers, every group's in one array, and the state is
 * one per server: the worker's configuration says which (upstream_configure), and a
 * reload that changes the list starts the state anew (connections in use then finish
 * and are closed, not pooled).  A request passes its own configuration's server. */
#ifndef H2PARK_UPSTREAM_H
#define H2PARK_UPSTREAM_H

#include <ev.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "core/transport.h"
#include "request.h"

struct upstream_conn {
    struct transport t;
    struct upstream_conn *next, *prev;   /* in its server's idle list */
    ev_io watch;                   /* the socket's, from connect to close: every wait of an exchange
                                      (req_wait_io), and while pooled over HTTP/1.1 the server's
                                      close or stray bytes */
    double idle_since;
    uint32_t epoch;                /* the worker's server list it belongs to */
    uint32_t exchanges;            /* requests it has carried */
    uint8_t server;                /* index in config->upstream_servers */
    uint32_t pooled_turn;          /* the loop's iteration it was pooled in (ev_iteration) */
    struct h2up *h2;               /* an h2c connection's client session (h2client.c), or NULL */
};

/* Why an attempt failed: each has nginx's status (502, 504) and counts against the
 * server's health, but for the client's own end. */
enum upstream_failure {
    UF_NONE, UF_CONNECT, UF_CONNECT_TIMEOUT, UF_SEND, UF_SEND_TIMEOUT, UF_READ_TIMEOUT, UF_CLOSED, UF_RESET,
    UF_INVALID, UF_NOLIVE, UF_BUSY, UF_TLS, UF_COUNT
};

/* failure.c: a failure in words, for its one error-log line and the access log.
 * upstream_failure_text is each cause's name alone ("connect() failed"). */
extern const char *const upstream_failure_text[UF_COUNT];
int upstream_failure_status(enum upstream_failure f);
/* Where in the exchange it failed. */
enum upstream_phase { UP_NONE, UP_CONNECT, UP_SEND, UP_HEADER, UP_BODY, UP_TUNNEL };
struct upstream_fault {
    enum upstream_failure why;
    enum upstream_phase phase;
    int err;                       /* the errno of a failed system call, or 0 */
    const char *detail;            /* the words of the layer that saw it (llhttp's, OpenSSL's), or NULL */
    const struct proxy_conf *pc;   /* the timeouts that fired */
};
/* The sentence, into buf (cut to cap): "upstream timed out after proxy_read_timeout 30s
 * while reading the response header"; its length. */
size_t upstream_cause(const struct upstream_fault *f, char *buf, size_t cap);
/* Heap text (sc_free'd by its taker; NULL without memory): printf's, and a failed call's
 * "connect() failed (111: Connection refused)". */
char *upstream_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *upstream_call_failed(const char *call, int err);

/* The server of group g for a new attempt (its place in g), skipping those in tried (a bit
 * per place) and those down or at max_conns; backups only once no primary can take it.
 * -1 with *why UF_NOLIVE or UF_BUSY. */
int upstream_pick(const struct upstream_group *g, double now, uint32_t tried, enum upstream_failure *why);
/* A pooled connection to server sc that is still open and quiet, or NULL; over TLS (tls
 * not NULL) only one made with tls's context; h2: one that speaks HTTP/2 (h2client.c),
 * else HTTP/1.1.  The socket is asked too (one system call) when the loop has not looked
 * at it since it was pooled - a response nobody asked for, right behind the last one,
 * may be there already - and, with check, always: for a request that could not be sent
 * again were the server to have closed it since the watcher last looked. */
struct upstream_conn *upstream_take(const struct upstream_server_conf *sc, const struct upstream_tls *tls, double now,
                                    bool h2, bool check);
/* A new connection to server sc, connected (and its TLS handshake done, if tls) within
 * timeout seconds; the waits are r's.  NULL with *why on failure (r gone: UF_NONE), and
 * for a connect or handshake that failed *detail, what failed in words (upstream_text's;
 * else NULL). */
struct upstream_conn *upstream_connect(struct request *r, const struct upstream_server_conf *sc,
                                       const struct upstream_tls *tls, double timeout, enum upstream_failure *why,
                                       char **detail);
/* An exchange ended on uc: reusable says it was complete on both sides and the server
 * keeps the connection open; then it is pooled (within its group's keepalive), else closed. */
void upstream_done(struct upstream_conn *uc, bool reusable, double now);
/* Health and counters: an attempt on sc (one of g's) failed with f, or got a response. */
void upstream_failed(const struct upstream_group *g, const struct upstream_server_conf *sc, enum upstream_failure f,
                     double now);
void upstream_responded(const struct upstream_server_conf *sc, int status);
/* On each worker as it takes a configuration (loop: the worker's, for the pool's
 * watchers): a new server list starts anew. */
void upstream_configure(const struct config *c, struct ev_loop *loop);
/* Once a second per worker: idle connections past their time are closed. */
void upstream_tick(double now);

/* Per server, per worker, summed over the workers for /metrics: each written by its own
 * worker with relaxed atomic stores, read by anyone. */
struct upstream_stats {
    uint64_t requests, responses[5], failures[UF_COUNT];
    uint64_t handshakes, resumed;  /* TLS handshakes, and how many of them resumed a session */
    uint64_t checks[2], checked_down;   /* health checks passed, failed; 1 while they leave it out (health.c) */
    uint64_t active, idle, down;   /* gauges: connections in use, pooled; workers that mark it down */
};
/* Each of c's servers' figures, summed over the workers on c's server list, into out. */
int upstream_stats_sum(const struct config *c, struct upstream_stats *out, int cap);
/* What tells one server list from another (its servers' addresses, groups and schemes). */
uint64_t upstream_fingerprint(const struct config *c);

/* health.c: the active health checks, one thread for the process.  upstream_health_use
 * gives it each configuration applied (it keeps a reference; no thread is started until
 * one has a health_check), upstream_health_stop ends it.  upstream_health_down: whether
 * the checks leave out the server at index of the server list of that fingerprint (any
 * thread); upstream_health_stats fills checks and checked_down of out[0..n). */
void upstream_health_use(struct config *c);
void upstream_health_stop(void);
bool upstream_health_down(uint64_t fingerprint, uint16_t index);
void upstream_health_stats(uint64_t fingerprint, struct upstream_stats *out, int n);

/* tls.c: the client contexts of c's proxy_pass https:// and h2:// settings, made before c
 * is applied (every problem into e, with its line); and a handshake on uc's socket, by
 * deadline (req_now's clock): 0, or -1 with *why and, for UF_TLS, *detail (its cause in
 * nginx's words, upstream_text's). */
int upstream_tls_prepare(struct config *c, struct config_errors *e);
/* upstream.c: the TLS session kept for uc's server (one per server and worker), to
 * resume with - a reference the caller frees: NULL if none, or if it was made with another
 * context than ctx (other settings: another name or CA to verify, which a resumption
 * would not check again).  upstream_session_keep stores a session the server gave on uc
 * (1: kept). */
SSL_SESSION *upstream_session_for(const struct upstream_conn *uc, const SSL_CTX *ctx);
int upstream_session_keep(const struct upstream_conn *uc, SSL_SESSION *s);
int upstream_tls_handshake(struct request *r, struct upstream_conn *uc, const struct upstream_tls *t, double deadline,
                           enum upstream_failure *why, char **detail);
/* For the health checks: an SSL over fd (through the batching BIO, as a transport's)
 * naming and verifying as t says, its handshake the caller's (or NULL); and why a
 * handshake failed, into buf. */
SSL *upstream_tls_client(const struct upstream_tls *t, int fd);
const char *upstream_tls_failure(const struct upstream_tls *t, SSL *ssl, char *buf, size_t cap);

/* h1resp.c: an upstream's HTTP/1.1 response, parsed by llhttp in response mode.  The
 * parser stops after the head, after each piece of body (which stays in the caller's
 * buffer: body/body_len point into it) and at the message's end, so the caller passes
 * each on before parsing further. */
enum { UPSTREAM_MORE, UPSTREAM_HEAD, UPSTREAM_BODY, UPSTREAM_END, UPSTREAM_ERROR };
struct upstream_response {
    llhttp_t parser;
    struct buf fields;             /* the head's fields: lower-case name\0value\0 pairs, and the one being read */
    uint32_t field_start, name_end;   /* where in fields that one begins, and its name's NUL */
    uint32_t nfields, head_bytes, head_max;
    int status;
    int64_t length;                /* Content-Length, or -1 */
    const char *body;              /* the piece found last */
    size_t body_len;
    const char *exec_start;        /* the bytes llhttp parses now, ... */
    uint64_t fed;                  /* ... which begin this far into the upstream's stream */
    uint64_t vspan_end;            /* where in that stream the last value span ended */
    const char *error;             /* why the response is refused */
    char *error_text;              /* ... when it was composed (h1resp_fail): heap, freed with p */
    bool head_request, head_done, complete, chunked, keep_alive, informational, in_value;
    bool upgrade_asked, upgraded;  /* the request asked to switch; the response is a 101 */
    bool head_ends;                /* the head ended the message: no body, not even an empty one (HTTP/2) */
    bool cr_last;                  /* the framing so far (all but the body) ends with a CR */
    uint8_t crlf_due;              /* bytes of the CRLF after a chunk's data still to come */
    uint8_t event;                 /* what the last callback found */
};
/* upgrade_asked: the request carried Upgrade, so a 101 is its answer (then the bytes after
 * the head are the new protocol's, left to the caller). */
void h1resp_init(struct upstream_response *p, bool head_request, bool upgrade_asked, uint32_t head_max);
/* Parses up to len bytes: what it found (UPSTREAM_*), *used how many it took. */
int h1resp_parse(struct upstream_response *p, const char *data, size_t len, size_t *used);
/* The server closed: UPSTREAM_END if that ends the message (a body read to the close),
 * UPSTREAM_ERROR if the message was cut short. */
int h1resp_eof(struct upstream_response *p);
void h1resp_free(struct upstream_response *p);
/* Refuses the response: error becomes what, then detail if not NULL (copied). */
void h1resp_fail(struct upstream_response *p, const char *what, const char *detail);

/* ---- One exchange with an upstream server, whatever protocol it speaks ----
 *
 * The proxy says what to ask - a neutral request head (method, target, authority, the
 * end-to-end fields it passes, the body's length) - and a client asks it in its own
 * protocol, framing the head and the body its own way (HTTP/1.1's text and chunked
 * coding, h1client.c; HTTP/2's HEADERS and DATA frames, h2client.c), and reads the
 * answer: the head into struct upstream_response (status, lower-case fields, length), the
 * body straight into the request's output (req_write, or read in place when its length
 * is known: no copy through the proxy), the trailers, and a failure with its cause
 * (*why, resp.error, err).  As h2o's httpclient: one table of functions per protocol, so
 * the proxy names no protocol; as struct transport below it, the table is data.
 *
 * An exchange lives in its caller's heap state (a waiting one holds no buffer on the
 * handler's stack); a client's per-connection state (an HTTP/2 session) hangs off the
 * upstream_conn.  Nothing in it waits but the tunnel: step moves what can move and says
 * what to wait for. */
#define UPSTREAM_BODY_NONE (-2)    /* upstream_request.length: no body, and no length said */
#define UPSTREAM_BODY_STREAM (-1)  /* a body of unknown length (chunked, or DATA to END_STREAM) */
struct upstream_field {
    const char *name, *value;      /* a client's names are lower case; the proxy's own may not be */
    uint32_t nl, vl;
};
struct upstream_request {
    const char *method, *target, *authority;
    const struct upstream_field *fields;   /* what goes as it is: no framing, no hop-by-hop field */
    uint32_t nfields;
    uint32_t head_max;             /* the response head's limit, in bytes */
    int64_t length;                /* the body's, or UPSTREAM_BODY_*; the body is the request's (req_try_body) */
    const char *upgrade;           /* the protocol to switch to (HTTP/1.1's Upgrade), or NULL */
    bool head;                     /* HEAD: the response has no body, whatever its head says */
    bool close;                    /* ask the server to close the connection after this exchange */
    bool trailers;                 /* the client takes trailers (TE: trailers) */
};
struct upstream_client;
struct upstream_exchange;
/* What the caller does with the response's head once step finds it complete (it answers
 * its own client): 0, or -1 with *why. */
typedef int upstream_head_fn(struct upstream_exchange *ux, enum upstream_failure *why);
struct upstream_exchange {
    const struct upstream_client *client;
    struct upstream_conn *uc;      /* this attempt's connection, or NULL */
    struct request *r;             /* whose body goes up, whose output the response body fills */
    const struct proxy_conf *pc;   /* the timeouts the tunnel waits by (its waits are its own) */
    struct upstream_response resp;
    struct buf rx;                 /* read from the server, not yet parsed (HTTP/1.1) */
    uint32_t rx_off;
    bool body_open;                /* request body still to go */
    bool chunked;                  /* ... with HTTP/1.1's chunked coding */
    bool body_started;             /* some of it was taken from the client, in any attempt: not to be sent twice */
    bool request_sent;             /* all of the request went */
    uint8_t send_failed;           /* the server stopped taking the request: why (the answer is still read) */
    uint8_t err;                   /* the errno behind a failure, or 0 */
};
struct upstream_client {
    const char *version;           /* in Via, three characters: "1.1", "2.0" */
    bool h2;                       /* its pooled connections are HTTP/2's (upstream_take) */
    /* uc made ready to carry exchanges (an HTTP/2 session on a new connection): 0 or -1. */
    int (*open)(struct upstream_conn *uc, uint32_t head_max);
    /* The request on ux->uc: its head queued, its body taken as step finds it.  0, or -1. */
    int (*submit)(struct upstream_exchange *ux, const struct upstream_request *rq);
    /* Moves both ways without waiting (but for the client taking the body written to it),
     * calling head once ux->resp's head is complete, before any body: UPSTREAM_END,
     * UPSTREAM_ERROR (*why; UF_NONE: the client went), or UPSTREAM_MORE with the *events
     * to wait for. */
    int (*step)(struct upstream_exchange *ux, upstream_head_fn *head, int *events, enum upstream_failure *why);
    /* After UPSTREAM_END: the trailer fields, name\0value\0 pairs, *n of them (NULL: none). */
    const struct buf *(*trailers)(const struct upstream_exchange *ux, uint32_t *n);
    /* After UPSTREAM_END: both sides ended, cleanly, and the connection may carry another. */
    bool (*reusable)(const struct upstream_exchange *ux);
    /* The exchange is over on ux->uc (what is unfinished is given up). */
    void (*end)(struct upstream_exchange *ux);
    /* After a 101: bytes both ways as they come, until the server closes (0) or a failure
     * (-1, *why; UF_NONE: the client went).  NULL: this protocol switches to none. */
    int (*tunnel)(struct upstream_exchange *ux, enum upstream_failure *why);
};
extern const struct upstream_client upstream_h1_client, upstream_h2_client;
/* upstream.c: the client pc's upstreams speak to. */
const struct upstream_client *upstream_client_for(const struct proxy_conf *pc);
/* The exchange's buffers go (at the end of the last attempt). */
void upstream_exchange_free(struct upstream_exchange *ux);

/* h2client.c, for upstream.c: a pooled HTTP/2 connection, taken (what the server sent meanwhile is read: false
 * if it went away) and put back (the frame buffer's pages given back); and freed. */
bool h2up_idle_ok(struct upstream_conn *uc);
void h2up_idle(struct upstream_conn *uc);
void h2up_free(struct upstream_conn *uc);

#endif
