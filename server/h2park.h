/* h2park's shared structures: configuration, workers, connections and streams.
 *
 * Ownership, which every file relies on:
 * - A worker thread owns its libev loop, its listening sockets and every connection it
 *   accepted; nothing of a connection is touched from another thread.  Counters in
 *   struct worker are written by their worker only and read by /-/stats with relaxed
 *   loads.
 * - A connection is heap state only: socket, SSL, nghttp2 session, watcher, timer, and
 *   an output buffer that exists only while output is pending.  Its serve coroutine
 *   (conn->serve) exists only while the serve loop has work or waits for I/O with
 *   parking off; NULL means parked.
 * - A stream (one request) belongs to its connection.  Its handler runs in its own
 *   coroutine, resumed only by the serve loop; the stream is freed when both nghttp2 has
 *   closed it and its handler has returned. */
#ifndef H2PARK_H
#define H2PARK_H

#include <ev.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "coro.h"

#define H2PARK_VERSION "0.1.0"
#define MAX_LISTEN 16
#define OPEN_FILE_SLOTS 256           /* each worker's open-file cache (routes.c) */
#define STREAM_OUTPUT_MAX (64u << 10) /* response bytes a handler may get ahead by (stream.c) */

/* ---- configuration (config.c) ---- */
struct listen_addr {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bool tls;
    char text[64];
};

struct config {
    struct listen_addr listen[MAX_LISTEN];
    int nlisten;
    int workers;
    char root[1024];
    char cert[1024], key[1024];
    bool parking;
    bool builtin_routes;
    char access_log[1024];
    int log_level;
    double preface_timeout, idle_timeout, write_timeout, body_timeout, shutdown_timeout, scavenge_interval;
    long max_conns;
    long max_handlers;             /* per worker; 0 = auto (config_max_handlers) */
    uint32_t max_concurrent_streams;
    uint32_t max_header_list_size;
    uint32_t initial_window_size;
    uint32_t connection_window_size;
    uint32_t max_resets_per_second;
    size_t coro_stack_size;
    bool coro_guard_pages;
    bool coro_paint;
    const char *parking_source;   /* which setting decided parking, for the log */
};

extern struct config cfg;
extern const char default_conf_text[];
extern const unsigned default_conf_size;

enum { CONFIG_OK = 0, CONFIG_ERROR = 2 };
void config_defaults(struct config *c);
/* Parses text as a config file named name; on error writes "name:line: problem" into err. */
int config_parse(struct config *c, const char *text, size_t len, const char *name, char *err, size_t errlen);
int config_load_file(struct config *c, const char *path, char *err, size_t errlen);
int config_set(struct config *c, const char *key, const char *value, char *err, size_t errlen);
/* H2PARK_DEBUG in GODEBUG syntax; unknown keys are reported through warn. */
int config_apply_debug_env(struct config *c, const char *env, void (*warn)(const char *key), char *err, size_t errlen);
int parse_listen(const char *text, bool tls, struct listen_addr *out, char *err, size_t errlen);
/* max_conns, with auto resolved against the open-file limit. */
long config_max_conns(const struct config *c);
/* max_handlers, with auto resolved against the machine's memory. */
long config_max_handlers(const struct config *c);
/* What one handler coroutine can pin at most with these settings, in bytes. */
size_t config_handler_worst_bytes(const struct config *c);

/* ---- logging (log.c) ---- */
enum { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* log_msg at most once a second per *last. */
void log_rate_limited(int level, time_t *last, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int log_level_parse(const char *s);
int access_log_open(const char *path);
bool access_log_enabled(void);
void access_log_write(const char *line, size_t len);

/* ---- memory hooks (mem.c) ---- */
void mem_install_hooks(void);
extern nghttp2_mem h2_mem;

/* ---- TLS (tls.c) ---- */
int tls_init(char *err, size_t errlen);
int tls_reload(char *err, size_t errlen);
SSL *tls_new_ssl(int fd);
bool tls_cipher_adequate(SSL *ssl);

/* ---- growable byte buffer (buf.c) ---- */
struct buf {
    char *data;
    size_t len, cap;
};
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *p, size_t n);
void buf_free(struct buf *b);

/* ---- workers (worker.c) ---- */
struct conn;

struct worker_counters {
    uint64_t conns, parked_conns, serve_coroutines, handler_coroutines;
    uint64_t conns_total, streams_total, parks_total, respawns_total;
};

struct worker {
    int id;
    pthread_t thread;
    struct ev_loop *loop;
    int listen_fd[MAX_LISTEN];
    ev_io listen_io[MAX_LISTEN];
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
    time_t refused_logged, emfile_logged;   /* rate limits for repeated warnings */
    struct worker_counters n;
    /* Input is read here and fed to nghttp2 before anything can yield, so one buffer
     * serves every connection of the worker and none costs coroutine stack. */
    char rbuf[16384];
};

extern struct worker *workers;
/* Runs on every worker once a second (the application's housekeeping). */
extern void (*worker_tick_hook)(ev_tstamp now);
extern int nworkers;

int workers_listen(char *err, size_t errlen);
int workers_start(void);
int worker_init_loop(struct worker *w);
long workers_live_conns(void);      /* connections and lingering sockets, all workers */
void workers_shutdown(void);
void workers_join(void);
void worker_conn_opened(void);
void worker_conn_closed(struct worker *w);
void worker_forget_ready(struct worker *w, struct conn *c);
/* Shuts fd's write side and drops what the peer still sends for a while (linger.c). */
void linger_close(struct worker *w, int fd);
static inline void counter_add(uint64_t *c, int64_t d)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + (uint64_t)d, __ATOMIC_RELAXED);
}
void workers_sum(struct worker_counters *out);

/* ---- connections (conn.c, serve.c, park.c, h1.c) ---- */
enum conn_proto { PROTO_DETECT, PROTO_H1, PROTO_H2 };

struct stream;

struct conn {
    struct worker *w;
    struct conn *next, *prev;      /* in w->conns */
    int fd;
    SSL *ssl;
    nghttp2_session *h2;
    ev_io io;
    ev_timer timer;
    coro *serve;
    struct stream *streams;        /* every stream not yet released */
    struct stream *runnable;       /* handlers ready to run, FIFO */
    struct stream *runnable_tail;
    struct buf out;                /* bytes for the socket; freed whenever it empties */
    size_t out_off;
    struct buf in;                 /* only before the protocol is known (h2c detection, HTTP/1.1) */
    ev_tstamp accepted_at, idle_since, write_blocked_since, rst_window;
    uint32_t rst_count;
    int32_t max_client_stream;     /* highest stream id the client opened */
    struct {                       /* frame boundaries in the peer's bytes (serve.c) */
        uint32_t payload_left;
        uint8_t magic_left, hdr_len;
        uint8_t hdr[9];
    } h2in;
    float glitch_tokens;           /* useless frames the peer may still send (session.c) */
    int16_t update_credit;         /* WINDOW_UPDATEs the DATA sent can explain (session.c) */
    ev_tstamp glitch_at;
    ev_tstamp last_io;             /* last byte read or written */
    struct conn *ready_next;       /* in w->ready while ready is set */
    int32_t reset_ids[8];          /* streams this side reset lately (session.c) */
    uint8_t reset_next;
    bool stream_id_error;
    bool flood;                    /* GOAWAY(ENHANCE_YOUR_CALM) for useless frames */
    bool ready;                    /* has input or work left over from its budget */
    uint32_t open_streams;
    uint32_t live_handlers;
    uint8_t proto;
    bool tls, handshake_done, settings_seen, peer_eof, closing, in_serve;
    bool io_write;                 /* io watches for writability too */
    bool goaway_pending;           /* shutdown asked for a GOAWAY */
    bool served_once;              /* a serve coroutine has run for it */
    uint8_t timed_out;             /* which deadline passed (conn.c) */
    bool trimmed;                  /* parked and its dead buffers given back */
    void *framebuf;                /* nghttp2's frame buffer (mem.c) */
    size_t framebuf_size;
    void *zeroish;                 /* a session table that is all zero when idle (mem.c) */
    size_t zeroish_size;
    ev_tstamp parked_at;
    char peer[64];
};

struct conn *conn_new(struct worker *w, int fd, bool tls, const struct sockaddr *sa, socklen_t salen);
/* Makes the serve loop run soon: resumes a waiting one, or spawns one for a parked one. */
void conn_wake(struct conn *c);
void conn_request_goaway(struct conn *c);
int conn_h2_start(struct conn *c);
/* Gives nghttp2 bytes from the peer; -1 if the connection must close after its GOAWAY. */
int conn_feed_h2(struct conn *c, const char *data, size_t len);
void conn_arm_timer(struct conn *c);
void conn_watch_write(struct conn *c, bool want_write);
ssize_t conn_read(struct conn *c, void *buf, size_t len);
int conn_flush(struct conn *c);
void conn_close(struct conn *c);
void conn_force_close(struct conn *c);
void conn_abort_stalled(struct conn *c);
/* Puts c on its worker's ready list: woken once the loop has served the others. */
void conn_mark_ready(struct conn *c);
bool conn_handle_timeout(struct conn *c);
bool conn_may_park(const struct conn *c);
void conn_trim_idle(struct conn *c);
int h1_handle(struct conn *c);     /* 0: went on as HTTP/2, 1: needs more input, -1: close */

/* serve.c */
void *serve_main(void *arg);
#define SERVE_CLOSED ((void *)1)
#define SERVE_PARKED ((void *)2)

/* ---- streams and handlers (stream.c, handler.c, routes.c) ---- */
enum stream_wait { WAIT_NONE, WAIT_BODY, WAIT_WRITE, WAIT_TIMER };

struct stream {
    struct conn *c;
    struct stream *snext, *sprev;         /* in c->streams */
    int32_t id;
    struct stream *next_runnable;
    bool queued, closed, cancelled, handler_done, headers_done, body_eof, responded;
    bool out_eof, deferred, too_large, head;
    bool sent_all;                        /* the response's END_STREAM went out */
    uint8_t wait;
    coro *handler;
    char *method, *path, *authority;      /* from one allocation: hdr */
    struct buf hdr;                       /* method\0path\0authority\0 and kept headers */
    int64_t if_modified_since;
    int64_t content_length;
    uint32_t header_bytes;
    struct buf body;                      /* received, not yet read by the handler */
    size_t body_off;
    struct buf outb;                      /* written by the handler, not yet framed */
    size_t outb_off;
    int file_fd;                          /* static file body source, or -1 */
    struct open_file *file;               /* the cache entry file_fd belongs to (routes.c) */
    const char *file_mem;                 /* the entry's copy of a small file, read instead of file_fd */
    int64_t file_off, file_left;
    ev_timer timer;                       /* the nearest of wake_at and the two deadlines below */
    ev_tstamp wake_at;                    /* when h2_sleep ends, or 0 */
    ev_tstamp in_progress;                /* request body last arrived or was all read */
    ev_tstamp out_progress;               /* response data last went out or became ready */
    int status;
    uint64_t bytes_sent;
    ev_tstamp started;
};

struct stream *stream_new(struct conn *c, int32_t id);
void stream_make_runnable(struct stream *s);
void stream_arm_timer(struct stream *s);
/* A complete response to a request whose body is still coming: ask the client to stop
 * sending it (RST_STREAM(NO_ERROR), RFC 9113 section 8.1). */
void stream_end_unread_request(struct stream *s);
void stream_release_if_done(struct stream *s);
void stream_start_handler(struct stream *s);
void conn_run_handlers(struct conn *c);

/* The blocking-style handler API; each may yield the handler's coroutine. */
struct h2_header { const char *name, *value; };
ssize_t h2_read_body(struct stream *s, void *buf, size_t len);
int h2_respond(struct stream *s, int status, const struct h2_header *h, size_t n, bool body);
int h2_respond_file(struct stream *s, int status, const struct h2_header *h, size_t n, int fd, int64_t off, int64_t len);
int h2_write(struct stream *s, const void *data, size_t len);
int h2_end(struct stream *s);
void h2_sleep(struct stream *s, double seconds);
int h2_simple(struct stream *s, int status, const char *content_type, const void *body, size_t len);

/* path.c: the path part of target, percent-decoded, relative to root (no leading
 * slash); -1 on a bad escape, a NUL, a "." or ".." segment, or more than cap bytes. */
int path_decode(const char *target, char *out, size_t cap);
/* Opens rel beneath root_fd, refusing symlinks and "..": a descriptor or -1 (errno). */
int path_open_beneath(int root_fd, const char *rel);

void route_request(struct stream *s);
void open_file_release(struct open_file *f);
int routes_init(char *err, size_t errlen);

/* ---- stats (stats.c) ---- */
size_t stats_json(char *out, size_t cap);
size_t stats_prometheus(char *out, size_t cap);
uint64_t rss_bytes(void);

/* ---- nghttp2 glue (session.c) ---- */
int session_create(struct conn *c);
void session_check_data(struct conn *c, int32_t stream_id);
void session_submit_settings(struct conn *c);
ssize_t data_source_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user_data);

extern volatile int shutting_down;

#endif
