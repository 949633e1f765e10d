/* The connection core: workers, connections, the serve loop and parking.
 *
 * Ownership, which every file relies on:
 * - A worker thread owns its libev loop, its listening sockets and every connection it
 *   accepted; nothing of a connection is touched from another thread.
 * - A connection is heap state only: socket, SSL, the protocol's state, watcher, timer,
 *   and buffers that exist only while there is input or output pending.  Its serve
 *   coroutine (conn->serve) exists only while the serve loop has work or waits for I/O
 *   with parking off; NULL means parked.  An idle HTTP/1.1 keep-alive connection is
 *   this struct and nothing else.
 * - The core knows protocols only through struct conn_proto: it reads, hands the bytes
 *   to c->proto, runs the handlers that became runnable, asks c->proto for output, and
 *   writes it.  Which protocol a connection starts with comes from conn_protocols,
 *   which main sets, so the core names none.
 * - Requests belong to their connection but are the request runtime's (runtime/): the
 *   core holds them as conn->requests, NULL while there are none, and reaches them only
 *   through conn_runtime, which main sets - it runs the handlers that became runnable
 *   (the runtime sets conn->runnable) from the serve loop, asks whether any are open,
 *   lets the runtime's housekeeping run once a tick, and cancels them all when the
 *   connection goes.
 * - The configuration a worker reads (w->cfg) is the tree it holds a reference to,
 *   replaced only between two events of its loop (worker.c), so a serve step or a
 *   handler's turn sees one configuration throughout; a request keeps the tree it
 *   began under (worker_hold_config) until it is released. */
#ifndef H2PARK_CONN_H
#define H2PARK_CONN_H

#include <ev.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "buf.h"
#include "config.h"
#include "coro.h"
#include "counters.h"
#include "log.h"
#include "core/transport.h"

struct conn;
struct request_set;

/* What a protocol front end does for the core.  Every callback runs in the connection's
 * serve coroutine and must not yield. */
struct conn_proto {
    const char *name;                   /* "h2", "h2c", "http/1.1", "detect" */
    int (*start)(struct conn *c);       /* chosen for c; 0, or -1 to close */
    /* Bytes from the peer; -1: close once what is queued is written. */
    int (*feed)(struct conn *c, const char *data, size_t len);
    /* After the handlers ran: put what is ready to go into c->out.  -1: close now. */
    int (*send)(struct conn *c);
    bool (*want_read)(const struct conn *c);     /* take input now (else stop reading) */
    bool (*want_write)(const struct conn *c);    /* has output it could produce now */
    bool (*finished)(const struct conn *c);      /* nothing more to do: close once flushed */
    /* A deadline passed (enum conn_timeout); true: close now. */
    bool (*timeout)(struct conn *c, int kind);
    void (*shutdown)(struct conn *c);            /* stop: GOAWAY, or close between requests */
    void (*destroy)(struct conn *c);             /* free the protocol's state */
    void (*trim)(struct conn *c);                /* optional: parked a while, give back dead memory */
    /* Optional: prefetch the state the input will touch first, as a step is about to read
     * (the read's system call then runs while it comes in from memory). */
    void (*warm)(const struct conn *c);
};

struct conn_protocols {
    const struct conn_proto *cleartext;          /* first protocol of a cleartext connection */
    /* The protocol for a TLS connection given the ALPN it negotiated (NULL, 0 if none). */
    const struct conn_proto *(*after_tls)(const unsigned char *alpn, unsigned len);
};
extern struct conn_protocols conn_protocols;

/* What the request runtime does for the core.  Called only for a connection whose
 * requests is not NULL, from its serve coroutine (run, cancel_all) or the worker's loop
 * (tick); none of them yields to the caller's caller. */
struct conn_runtime {
    void (*run)(struct conn *c);                 /* conn->runnable: resume the handlers that are */
    bool (*open)(const struct conn *c);          /* a request is in progress: no idle timeout */
    void (*tick)(struct conn *c);                /* once a worker tick, parking on */
    void (*arm_deadlines)(struct conn *c);       /* a step that set deadlines_due is ending */
    void (*cancel_all)(struct conn *c);          /* the connection is going */
};
extern struct conn_runtime conn_runtime;

enum conn_timeout { TIMEOUT_NONE, TIMEOUT_HEAD, TIMEOUT_IDLE, TIMEOUT_WRITE, TIMEOUT_STALLED, TIMEOUT_FORCE };

/* The life of a connection; conn_set_state is the one place it changes. */
enum conn_state {
    CONN_PROXY,         /* waiting for the PROXY protocol header (proxyproto.c) */
    CONN_HANDSHAKE,     /* TLS handshake in progress */
    CONN_OPEN,          /* a protocol runs (or, cleartext, is being detected) */
    CONN_CLOSING,       /* its last words are queued: close once they are written */
};

/* A listen address and its sockets, as the main thread keeps them (listen.c). */
struct listener {
    unsigned serial;               /* 0: the slot is free; new sockets, new serial */
    struct listen_addr a;          /* as configured: address and options */
    bool shared;                   /* systemd's socket: every worker accepts from fds[0] */
    bool fresh;                    /* opened by the plan being prepared */
    int *fds;                      /* one per worker, or the shared one */
};
extern struct listener listeners[MAX_LISTEN];

/* A worker's side of a listener slot. */
struct worker_listener {
    unsigned serial;               /* 0: none */
    int fd;
    bool shared, tls, proxy_protocol;
    ev_io io;
};
#define NO_LISTENER 0xff           /* conn->listener of a connection being drained */

/* A worker's count of the requests that began under one configuration. */
struct config_hold {
    struct config *cfg;
    long inflight;
    struct config_hold *next;      /* in w->retired */
};

struct worker {
    int id;
    const struct config *cfg;      /* the configuration this worker runs (w->hold->cfg) */
    struct config_hold *hold;
    struct config_hold *retired;   /* earlier ones, until their last request ends */
    pthread_t thread;
    struct ev_loop *loop;
    struct worker_listener lis[MAX_LISTEN];
    unsigned gen;                  /* the configuration generation this worker runs */
    _Atomic unsigned applied;      /* ... as the main thread may read it */
    _Atomic bool exited;
    ev_async notify;
    ev_timer accept_pause;
    ev_timer scavenge;
    ev_timer shutdown_deadline;
    ev_timer tick;                 /* housekeeping, once a second */
    ev_check ready_check;          /* wakes the ready list once per loop iteration */
    ev_idle ready_idle;            /* active while the list is not empty: poll does not block */
    bool accepting, shutting_down;
    struct conn *conns;            /* all connections of this worker */
    struct conn *ready, *ready_tail;
    /* TLS handshakes whose ClientHello is in, waiting for a loop iteration with room
     * (worker_handshake_turn), linked by ready_next: a connection in its handshake is
     * never on the ready list. */
    struct conn *hs_wait, *hs_wait_tail;
    unsigned hs_begun;             /* handshakes begun in this loop iteration */
    time_t refused_logged, emfile_logged, limit_full_logged;   /* rate limits for repeated warnings */
    struct worker_counters n;
    /* Input is read here and handed on before anything can yield, so one buffer serves
     * every connection of the worker and none costs coroutine stack. */
    char rbuf[16384];
};

extern struct worker *workers;
/* Runs on every worker once a second (the application's housekeeping). */
extern void (*worker_tick_hook)(int worker, ev_tstamp now, const struct worker_counters *n, const struct config *cfg);
/* Runs on a worker each time it has taken a new configuration (the application's). */
extern void (*worker_config_hook)(const struct config *c, struct ev_loop *loop);

int workers_create(int n);
/* Starts the threads; notify runs on main_loop whenever a worker took a configuration
 * or stopped. */
int workers_start(struct ev_loop *main_loop, void (*notify)(void));
/* Hands c and the listener table to every worker; returns its generation. */
unsigned workers_publish(struct config *c);
/* The worker runs c from now on (adopt; the fuzzers' harness sets its one this way). */
int worker_use_config(struct worker *w, struct config *c);
/* A request begins under the worker's configuration: counted until released (inline:
 * every request pays both). */
static inline struct config_hold *worker_hold_config(struct worker *w)
{
    w->hold->inflight++;
    return w->hold;
}
void worker_drop_hold(struct worker *w, struct config_hold *h);
static inline void worker_release_config(struct worker *w, struct config_hold *h)
{
    if (--h->inflight == 0 && h != w->hold)
        worker_drop_hold(w, h);   /* the last request of a configuration the worker left */
}
bool workers_all_applied(unsigned gen);
bool workers_all_exited(void);
int worker_init_loop(struct worker *w);
long workers_live_conns(void);      /* connections and lingering sockets, all workers */
void workers_shutdown(void);
void workers_join(void);

/* listen.c: the main thread's side of the listening sockets. */
int listen_inherit(char *err, size_t errlen);          /* LISTEN_FDS from systemd */
int listen_inherited_unused(char *err, size_t errlen); /* -1 if one matches no listen line */
/* Opens what next adds to the table into plan, and says which of next's listen
 * addresses each slot serves (check_only: probes and keeps nothing). */
int listeners_prepare(const struct config *next, struct listener *plan, int8_t *listen_of_slot, bool check_only,
                      char *err, size_t errlen);
void listeners_abort(struct listener *plan);
void listeners_commit(const struct listener *plan);
void worker_conn_opened(void);
void worker_conn_closed(struct worker *w);
void worker_forget_ready(struct worker *w, struct conn *c);
/* c's ClientHello has come (its handshake's costly step is due): true to begin it now,
 * false if this loop iteration has begun as many as it may - then c waits its turn, in
 * order, without its watcher, and is woken by the worker (its deadline counting from then). */
bool worker_handshake_turn(struct conn *c);
void worker_forget_handshake(struct worker *w, struct conn *c);
/* Shuts fd's write side and drops what the peer still sends for a while (linger.c). */
void linger_close(struct worker *w, int fd);

struct conn {
    struct worker *w;
    struct conn *next, *prev;      /* in w->conns */
    const struct conn_proto *proto;
    void *proto_state;             /* the front end's: struct h2_conn, struct h1_conn */
    struct transport sock;         /* the socket, its TLS, and the output waiting for it */
    coro *serve;
    struct request_set *requests;  /* the runtime's, NULL while there are none */
    struct conn *ready_next;       /* in w->ready while ready is set */
    struct buf in;                 /* input a protocol keeps for later (detection, HTTP/1.1) */
    ev_io io;
    ev_timer timer;
    /* With head_due: since when a head (preface, request head) is due; otherwise since
     * when the connection has had no open request. */
    ev_tstamp since;
    ev_tstamp write_blocked_since, last_io;
    uint8_t state;                 /* enum conn_state */
    uint8_t timed_out;             /* enum conn_timeout: which deadline passed */
    uint8_t close_reason;          /* enum close_reason, once the serve loop decides to close */
    uint8_t parked_ticks;          /* worker ticks since it parked (trimmed at the second) */
    uint8_t listener;              /* the worker's listener slot it came from, or NO_LISTENER */
    /* Bits: every connection, idle ones included, pays for this struct (320 bytes).
     *
     * Who sets and clears each, and whether it keeps the serve loop from parking
     * (conn_may_park, park.c: "blocks"; "-": it does not):
     *
     *   flag              set by                               cleared by                          blocks
     *   tls               conn_new (a TLS listener)            never                               -
     *   peer_eof          conn_read (EOF), proxyproto.c (EOF)  never                               - (the protocol's
     *                                                                                                finished() closes)
     *   in_serve          serve_main while its loop runs       serve_main as it waits or ends      - (conn_wake
     *                                                                                                skips a running one)
     *   ready             conn_mark_ready (worker.c)           the ready list's turn (worker.c)    -
     *   trimmed           conn_trim_idle (park.c, parked)      conn_wake, as it parks              - (parked only)
     *   head_due          conn_new, h1.c, h2.c, serve.c idle   h1.c (a head began), h2.c (preface)  - (head timer)
     *   io_read/io_write  conn_watch                           conn_watch                          -
     *   shutdown_asked    conn_request_shutdown                serve.c, once the protocol is told  blocks
     *   served_once       serve_main, first run                never                               - (counters)
     *   heard             conn_read (bytes came)               never                               -
     *   deadlines_due     runtime: a response began            runtime: arm_deadlines              -
     *   runnable          runtime: a handler became runnable   runtime: none left runnable         blocks
     *   nothing_to_write  serve.c: a round produced nothing    serve.c: each step's start          blocks while false
     *                                                                                                and want_write()
     *   tls_config_held   conn_new (an SSL object)             serve.c after the handshake         -
     *   input_drained     serve.c: a read found EAGAIN         on_io (readable)                    - (serve.c reads)
     *   client_counted    accept (worker.c), proxyproto.c      connlimit_release                   -
     *   hs_waiting        worker_handshake_turn (queued)       the queue's turn, conn_close        - (no watcher,
     *                                                                                                no deadline)
     *   hs_deadline_moved on_timer: a ClientHello not looked at  never                               -
     *
     * Besides the bits: timed_out (set by the timer, conn_close_soon, conn_abort_stalled;
     * cleared by serve.c's handle_timeout) blocks; so do output in sock (conn_out_pending),
     * input OpenSSL holds decrypted (transport_holds_input) and parking off. */
    bool tls : 1, peer_eof : 1, in_serve : 1, ready : 1, trimmed : 1, head_due : 1;
    bool io_read : 1, io_write : 1; /* what io watches for */
    bool shutdown_asked : 1;       /* the daemon is stopping */
    bool served_once : 1;          /* a serve coroutine has run for it */
    bool heard : 1;                /* the protocol has had bytes from the peer */
    bool deadlines_due : 1;        /* the runtime began a response this step: arm_deadlines as it ends */
    bool runnable : 1;             /* the runtime has a handler ready: the serve loop runs it */
    bool nothing_to_write : 1;     /* the step's last round found the protocol with nothing to produce */
    bool tls_config_held : 1;      /* ssl's handshake holds its configuration (tls.c) */
    bool input_drained : 1;        /* the last read found the socket empty, and no readiness came since */
    bool client_counted : 1;       /* counted in the client table (connlimit.c): released as it closes */
    bool hs_waiting : 1;           /* in w->hs_wait: its handshake waits for a loop iteration with room */
    bool hs_deadline_moved : 1;    /* its ClientHello was in when the deadline passed: moved once (conn.c) */
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } peer;                        /* the client: the socket's, or the PROXY header's */
};

enum { CONN_TLS = 1, CONN_PROXY_PROTOCOL = 2 };
/* A connection accepted on fd from the worker's listener slot (or NO_LISTENER); flags:
 * CONN_TLS, CONN_PROXY_PROTOCOL. */
struct conn *conn_new(struct worker *w, int fd, unsigned flags, unsigned slot, const struct sockaddr *sa,
                      socklen_t salen);
void conn_set_state(struct conn *c, enum conn_state to);
void conn_begin(struct conn *c);           /* the stage after the PROXY header */
/* How long a head may take from c->since: a TLS connection's PROXY header and handshake
 * have handshake_timeout, then (or a cleartext connection from accept) preface_timeout. */
static inline double conn_head_timeout(const struct conn *c)
{
    return c->tls && c->state < CONN_OPEN ? c->w->cfg->handshake_timeout : c->w->cfg->preface_timeout;
}
/* The peer as "addr:port", for logs (formatted per call into a per-thread buffer). */
const char *conn_peer(const struct conn *c);
const char *conn_peer_address(const struct conn *c);      /* without the port */
/* An IPv4 or IPv6 address as "addr:port" or "[addr]:port"; "?" for any other. */
void sockaddr_text(const struct sockaddr *sa, char *out, size_t cap);
/* Makes the serve loop run soon: resumes a waiting one, or spawns one for a parked one. */
void conn_wake(struct conn *c);
void conn_request_shutdown(struct conn *c);
void conn_arm_timer(struct conn *c);
void conn_watch(struct conn *c, bool read, bool write);
/* The transport's read and flush, with the connection's bookkeeping (progress, counters,
 * when a write got stuck): as transport_read and transport_flush say. */
ssize_t conn_read(struct conn *c, void *buf, size_t len);
int conn_flush(struct conn *c);
void conn_close(struct conn *c);
/* The serve loop closes c at its next step: conn_close_soon leaves waking it to the
 * caller (who must not touch c after the wake-up), conn_force_close wakes it now. */
void conn_close_soon(struct conn *c);
void conn_force_close(struct conn *c);
void conn_abort_stalled(struct conn *c);
/* Puts c on its worker's ready list: woken once the loop has served the others. */
void conn_mark_ready(struct conn *c);
bool conn_may_park(const struct conn *c);
void conn_trim_idle(struct conn *c);
static inline bool conn_runnable(const struct conn *c) { return c->runnable; }
/* Switches c to protocol p (detection handing over, an upgrade); -1 to close. */
int conn_start_proto(struct conn *c, const struct conn_proto *p);
static inline size_t conn_out_pending(const struct conn *c) { return transport_pending(&c->sock); }
/* Room for n more output bytes.  The buffer is freed whenever it empties (an idle
 * connection holds none), so a step's first bytes take CONN_OUT_FIRST at once rather than
 * growing it - and copying it - frame by frame. */
#define CONN_OUT_FIRST (16u << 10)
static inline int conn_out_reserve(struct conn *c, size_t n)
{
    return buf_reserve(&c->sock.out, c->sock.out.cap || n >= CONN_OUT_FIRST ? n : CONN_OUT_FIRST);
}

/* connlimit.c: max_conns_per_client.  connlimit_acquire counts a connection from sa on
 * listener slot against limit: 1 counted (the connection is marked client_counted), 0 not
 * counted (no table, or a trusted proxy's), -1 refused (close it now; counted and logged). */
int connlimit_acquire(struct worker *w, unsigned slot, uint32_t limit, const struct sockaddr *sa);
void connlimit_release(struct conn *c);

/* serve.c */
void *serve_main(void *arg);
#define SERVE_CLOSED ((void *)1)
#define SERVE_PARKED ((void *)2)

/* proxyproto.c: the PROXY protocol header (not the reverse proxy).  proxy_parse: > 0 the header's length (*client
 * set, or its family 0 for "keep the socket's address"), 0 more bytes needed, -1
 * malformed.  proxy_stage runs the header stage: 1 done, 0 wait for input, -1 close. */
#define PROXY_HEADER_MAX 1024
int proxy_parse(const uint8_t *p, size_t len, struct sockaddr_storage *client);
int proxy_stage(struct conn *c);

/* tls.c: the TLS contexts of a configuration - one per set of certificates, and one per
 * TLS listener that its handshakes start with (its default site's certificate, and the
 * SNI switch to the others) - made before it is applied and freed with it. */
int tls_prepare(struct config *c, struct config_errors *e);
/* A connection on listener slot of c's; NULL if there is no context for it.  The SSL
 * holds a reference to c until tls_config_release, once its handshake is over. */
SSL *tls_new_ssl(const struct config *c, unsigned slot, int fd);
void tls_config_release(SSL *ssl);
/* The configuration ssl's contexts belong to (its handshake holds it). */
const struct config *tls_config_of(const SSL *ssl);
/* tickets.c: session tickets.  tickets_prepare reads c's key files (when c is prepared);
 * tickets_use sets a context's tickets as c says; tickets_bind_certificate confines
 * resuming to the context's certificate. */
int tickets_prepare(struct config *c, struct config_errors *e);
void tickets_use(SSL_CTX *ctx, const struct config *c);
int tickets_bind_certificate(SSL_CTX *ctx);
bool tls_cipher_adequate(SSL *ssl);
/* The name the client asked for (SNI), or NULL. */
const char *tls_server_name(SSL *ssl);
/* Whether the certificate this connection presented is valid for host (a name or an
 * IP address): the condition under which a client may reuse it for host (RFC 9110
 * 4.3.4, RFC 9113 9.1.1). */
bool tls_certificate_covers(SSL *ssl, const char *host, size_t len);
/* selfsigned.c: a certificate and key made in memory for c's TLS listeners and the
 * names of its sites that have no certificate. */
int selfsigned_use(SSL_CTX *ctx, const struct config *c, char *err, size_t errlen);

extern _Atomic int shutting_down;

#endif
