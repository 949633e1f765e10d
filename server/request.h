/* The request API: what a handler sees of an HTTP exchange, whatever the protocol.
 *
 * A handler runs in a coroutine of its own, so every call here that must wait - for
 * request body, for room in the response, for a timer - suspends only that handler.
 * Nothing here names nghttp2, OpenSSL, libev or a connection: the HTTP/1.1 and HTTP/2
 * front ends both drive it (like h2o's h2o_req_t between lib/http2 and its handlers).
 * Strings a request returns live as long as the request. */
#ifndef H2PARK_REQUEST_H
#define H2PARK_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct request;
struct config;
struct location;
struct header {
    const char *name, *value;
};

/* The request fields the server itself reads.  They are found once, as the head comes
 * in, so asking for one by number (req_known) costs an array index where req_header
 * compares names. */
enum known_field {
    KF_METHOD, KF_PATH, KF_AUTHORITY, KF_HOST, KF_CONTENT_LENGTH, KF_ACCEPT_ENCODING, KF_IF_MATCH,
    KF_IF_NONE_MATCH, KF_IF_MODIFIED_SINCE, KF_IF_UNMODIFIED_SINCE, KF_RANGE, KF_IF_RANGE, KF_USER_AGENT,
    KF_REFERER, KF_UPGRADE, KF_CONNECTION, KF_HTTP2_SETTINGS, KF_PROTOCOL, KF_COUNT
};

/* The application: called once per request, in the request's coroutine. */
typedef void (*request_handler)(struct request *r);
void request_set_handler(request_handler h);
/* Called once per request as its exchange ends (the access log). */
void request_set_logger(void (*log)(const struct request *r));

/* The request as received.  Header names are lower case. */
const char *req_method(const struct request *r);
const char *req_target(const struct request *r);      /* path and query, as sent */
const char *req_authority(const struct request *r);   /* :authority or Host, "" if none */
/* The length of its host (host_length: -1 for no valid host, 0 for none), measured once:
 * by the front end as it read Host, else now. */
int req_host_length(const struct request *r);
const char *req_protocol(const struct request *r);    /* "http/1.1", "h2" or "h2c" */
const char *req_peer(const struct request *r);        /* "addr:port" of the client */
const char *req_peer_address(const struct request *r); /* the client's address alone */
const struct sockaddr *req_peer_sockaddr(const struct request *r);  /* ... as the socket has it */
bool req_is_head(const struct request *r);
int64_t req_content_length(const struct request *r);  /* -1 if the client gave none */
const char *req_header(const struct request *r, const char *name);   /* first value, or NULL */
const char *req_known(const struct request *r, enum known_field k);  /* the same, by number */
size_t req_header_count(const struct request *r);
/* Whether a comma-separated field value (RFC 9110 5.6.1: Connection, Upgrade, TE) lists
 * token, in any case; NULL lists nothing. */
bool http_list_has(const char *list, const char *token);
/* The values of every field called name, in order: the last max of them into out. */
size_t req_header_values(const struct request *r, const char *name, const char **out, size_t max);
struct header req_header_at(const struct request *r, size_t i);
/* Every field in the order received, pseudo-headers included, up to cap: how many. */
size_t req_headers(const struct request *r, struct header *out, size_t cap);
const char *req_scheme(const struct request *r);      /* "https" over TLS, else "http" */
/* The protocol the client asks to switch to, when the front end can hand it over: an
 * HTTP/1.1 request without a body whose Connection names upgrade (its Upgrade field), or
 * an HTTP/2 extended CONNECT (RFC 8441: its :protocol; h2c's own Upgrade is the front
 * end's).  NULL otherwise.  A handler that answers 101 (with the upgrade field it switched
 * to) turns the exchange into a tunnel: from then on the request body is the client's
 * bytes as they come, until it closes its side; what the handler writes goes out as it is.
 * Over HTTP/1.1 the connection ends with the response; over HTTP/2 the client sees a 200
 * without the upgrade field (RFC 8441 section 5) and the stream ends with the response.
 * Neither way has the request's own deadlines then: the handler bounds the silence
 * (req_wait_fd's timeout). */
const char *req_upgrade(const struct request *r);
/* The request body is over and was empty (nothing came, nothing will): false while a
 * body may still come. */
bool req_body_empty(const struct request *r);
double req_now(const struct request *r);               /* the worker's clock, seconds */
double req_started(const struct request *r);           /* when the head was complete */
/* For the logger (request_set_logger): from the head to the end of the exchange, read
 * from the clock as it ended, to the microsecond. */
double req_duration(const struct request *r);
bool req_is_tls(const struct request *r);
unsigned req_listener(const struct request *r);        /* the listener slot it arrived on */
/* Over TLS: the name the client asked for (SNI), or NULL; whether the certificate the
 * connection presented is valid for host (normalized, as host_normalize gives it). */
const char *req_tls_server_name(const struct request *r);
bool req_tls_certificate_covers(const struct request *r, const char *host, size_t len);

/* The configuration the request began under, and the location the application matched
 * it to: its settings (added response headers among them) apply from here on. */
const struct config *req_config(const struct request *r);
const struct location *req_location(const struct request *r);
void req_set_location(struct request *r, const struct location *loc);
/* The client, as a trusted proxy named it: req_peer and req_peer_address say it from
 * here on (logs, access rules, handlers).  -1 without memory: the request must not go on
 * as if the proxy were the client. */
int req_set_client(struct request *r, const struct sockaddr *sa);
const struct sockaddr *req_client(const struct request *r);
/* Caps the request body at max bytes: -1 if the announced length (or what came) is over it;
 * else a body that grows past it is dropped, req_read_body fails and
 * req_body_too_large says why. */
int req_limit_body(struct request *r, uint64_t max);
bool req_body_too_large(const struct request *r);
/* Limits the response's body to rate bytes a second after its first `after` bytes
 * (nginx's limit_rate, limit_rate_after; rate 0: no limit), over HTTP/1.1 and for each
 * HTTP/2 stream alone, wherever its body comes from; a wait between bursts is a wait like
 * any other (a handler writing faster waits in req_write and parks).  A 101's tunnel is not
 * limited.  Call it before the response begins, and before req_upstream (the state it
 * returns may move); -1 without memory. */
int req_limit_rate(struct request *r, uint64_t rate, uint64_t after);
/* Abandons an exchange whose answer has begun (RST_STREAM(CANCEL); HTTP/1.1 closes). */
void req_reset(struct request *r);

/* The request body as a blocking read: > 0 bytes, 0 at its end, -1 if the exchange is
 * gone (reset, closed, timed out). */
ssize_t req_read_body(struct request *r, void *buf, size_t len);

/* The response.  Field names go out in lower case.  length is the body's size (sent as Content-Length), or BODY_STREAM for
 * a body written piece by piece whose size is not known (HTTP/1.1 chunked), or BODY_NONE.
 * For HEAD the same length is announced and no body goes out.  Headers are copied;
 * content-length is the front end's to send. */
enum { BODY_NONE = -2, BODY_STREAM = -1 };
/* At most this many fields h[] (a location's own fields count against it too); more are
 * dropped. */
enum { REQ_RESPONSE_FIELDS_MAX = 64 };
int req_respond(struct request *r, int status, const struct header *h, size_t n, int64_t length);
/* A body of len bytes from off in a file, or from mem when it is not NULL (a copy of
 * the file).  The source is reference-counted by its owner: hold(arg) takes one more
 * reference (the server may still be sending from it after the request is gone),
 * release(arg) drops one; the request holds one from here on. */
struct body_source {
    int fd;
    const void *mem;
    void (*hold)(void *arg);
    void (*release)(void *arg);
    void *arg;
};
int req_respond_file(struct request *r, int status, const struct header *h, size_t n, const struct body_source *src,
                     int64_t off, int64_t len);
/* Fields laid out once for many responses (a cached file's type and validators), so
 * that a response that carries them copies one block instead of measuring, copying and
 * lower-casing each field again.  NULL without memory; req_fields_free(NULL) is a no-op. */
struct req_fields;
struct req_fields *req_fields_new(const struct header *h, size_t n);
void req_fields_free(struct req_fields *f);
/* req_respond_file with the prepared fields first, then h[0..n). */
int req_respond_file_with(struct request *r, int status, const struct req_fields *pre, const struct header *h,
                          size_t n, const struct body_source *src, int64_t off, int64_t len);
int req_write(struct request *r, const void *data, size_t len);
/* req_write without the copy, for a handler that reads its output from a descriptor:
 * room for *room bytes (1 to want) at the end of the response's output, where the handler
 * may write until its next call into this API; req_write_commit makes the first n of
 * them output.  Waits, as req_write does, while the output is full; NULL if the exchange
 * is gone or the response is over. */
char *req_write_room(struct request *r, size_t want, size_t *room);
int req_write_commit(struct request *r, size_t n);
int req_end(struct request *r);
/* req_end with trailer fields after the body (a gRPC server's grpc-status): HTTP/2 sends
 * them as a trailing HEADERS frame; HTTP/1.1 as the chunked trailer section when the
 * response is chunked and the client's TE lists "trailers" (RFC 9110 6.5.1), and drops
 * them otherwise.  Names go out in lower case; the fields are copied. */
int req_end_with_trailers(struct request *r, const struct header *h, size_t n);
/* The response cannot be completed (its source failed midway): the client must see it
 * cut short - HTTP/2 resets the stream, HTTP/1.1 closes the connection - never a
 * shorter body that looks whole. */
void req_abort(struct request *r);
/* A whole response from memory. */
int req_simple(struct request *r, int status, const char *content_type, const void *body, size_t len);
void req_sleep(struct request *r, double seconds);
/* Waits until fd is ready as events asks (REQ_READABLE, REQ_WRITABLE) or, with REQ_BODY,
 * request body has come (or its end), at most timeout seconds (0: no limit but the
 * request's own deadlines): what is ready (a mask of those), 0 the time passed, -1 the
 * exchange is gone.  What the wait needs - the watcher, the deadline - lives in the
 * request, so nothing touches the handler's stack meanwhile. */
enum { REQ_READABLE = 1, REQ_WRITABLE = 2, REQ_BODY = 4 };
int req_wait_fd(struct request *r, int fd, int events, double timeout);
/* req_wait_fd on a watcher of the caller's (libev's: the one place this API names the
 * event loop), set up once for its descriptor (ev_io_init) and kept, between waits, in
 * heap state that outlives them: the loop is told of the descriptor once, not at each
 * wait, and a caller that watches the descriptor itself between waits (a pooled
 * upstream connection) hands the watcher over without telling the kernel anything.  Its
 * callback and data are the runtime's during the wait and the caller's again after. */
struct ev_io;
int req_wait_io(struct request *r, struct ev_io *w, int events, double timeout);
/* A step of a handler that runs between two waits and needs large locals: never inlined,
 * so its frame is gone before the handler waits (and, waiting long, parks) again - the
 * frame rule, runtime/runtime.h. */
#define PARKED_APART __attribute__((noinline))
/* A buffer of the handler's own, in heap state that outlives its waits (never on its
 * stack), which the runtime frees if it is empty when the handler parks: a short wait
 * keeps it for the next read, a long one waits holding none.  One per request; NULL
 * forgets it (before the buffer itself goes). */
struct buf;
void req_park_frees(struct request *r, struct buf *b);
/* req_read_body without the wait: REQ_AGAIN if no body is there yet. */
#define REQ_AGAIN (-2)
ssize_t req_try_body(struct request *r, void *buf, size_t len);
int req_status(const struct request *r);               /* 0 until responded */
/* The status a request is logged with when its client closed before it was answered
 * (nginx's 499: never sent). */
#define REQ_CLIENT_CLOSED 499
uint64_t req_bytes_sent(const struct request *r);       /* response body bytes sent */
/* Compression on the fly (the location's compress): a flush point - what the handler wrote
 * so far goes out through the compressor now, decodable by the client before anything more
 * comes (an event, a long poll's answer, a chunk an upstream flushed).  0 (nothing to do)
 * for a response that is not compressed; -1 if the exchange is gone. */
int req_flush_point(struct request *r);
/* The coding the response is compressed in on the fly ("gzip", "br", "zstd"), or NULL. */
const char *req_content_coding(const struct request *r);

/* What an upstream made of the request, for the access log and metrics: set by the
 * handler that proxied it (app/proxy_pass.c), NULL for any other. */
struct req_upstream {
    const char *addr;              /* the last server tried, "addr:port" or "unix:path", or NULL:
                                      its configuration's text, which the request holds */
    double connect_time, header_time, response_time;   /* seconds from the first try; -1 none */
    char *error;                   /* why it failed (freed with the request), or NULL */
    int status;                    /* its response's status, 0 if none */
    uint8_t tries;
};
struct req_upstream *req_upstream(struct request *r);  /* allocated on first call; NULL without memory */
const struct req_upstream *req_upstream_info(const struct request *r);
/* The rule that refused the request (a limit, an authentication), named in the access log
 * as refused_by: rule is a string that outlives the request (a literal, or configuration
 * text the request holds).  NULL when none did. */
void req_set_refused_by(struct request *r, const char *rule);
/* Sets the request's field name (lower case) to value, or removes it (value NULL), in
 * place of every field of that name the client sent: req_header, req_header_values and
 * req_headers (whose order then puts it last) say so from here on - what auth_request
 * copies from its answer, so that an upstream reads the authentication server's X-User,
 * never one the client made up.  Not for the known fields (req_known).  -1 without memory. */
int req_set_field(struct request *r, const char *name, const char *value);
const char *req_refused_by(const struct request *r);
/* Calls fn(r) once as the request is released, after it is logged: for what the
 * application holds on the request's behalf (its client's count in a shared table).  One
 * per request.  -1 without memory (nothing is held then). */
int req_at_release(struct request *r, void (*fn)(struct request *r));

#endif
