/* The application: the routes h2park serves, written against request.h only.
 *
 * routes.c finds each request's site and location in its configuration and hands it
 * to the location's handler: the static files, a return, or a built-in route (each
 * module offers its routes as a table).  No route knows a protocol, and no protocol
 * names a route. */
#ifndef H2PARK_APP_H
#define H2PARK_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "buf.h"
#include "clienttable.h"
#include "counters.h"
#include "request.h"

struct ev_loop;

enum { M_GET = 1, M_HEAD = 2, M_POST = 4 };
struct worker_counters;

struct route {
    const char *name;              /* what "handler = NAME" calls it */
    const char *path;              /* where it is unless the configuration places it */
    unsigned methods;              /* M_* */
    void (*handler)(struct request *r);
    bool open_to_all;              /* else only builtin_routes_allow's addresses see it */
};

extern const struct route builtin_routes[];    /* builtin.c: healthz, echo, delay */
extern const struct route stats_routes[];      /* stats.c: /-/stats, /metrics */
/* Every built-in route, for config_use_routes (routes.c). */
void app_register_routes(void);

/* routes.c: the application's entry point (request_set_handler). */
void app_handle(struct request *r);
void app_init(void);
/* On every worker after it took a new configuration. */
void app_configure(const struct config *c, struct ev_loop *loop);
/* Once a second on every worker, with that worker's counters. */
void app_tick(int worker, double now, const struct worker_counters *n, const struct config *cfg);

/* routes.c: an error answer - the location's error page for status if it has one, else
 * a line of text (app_error_text: text, the answer's own words). */
void app_error(struct request *r, int status);
void app_error_text(struct request *r, int status, const char *text);
/* ... with fields of its own (a 401's WWW-Authenticate), on the error page too. */
void app_error_fields(struct request *r, int status, const char *text, const struct header *h, size_t n);

/* static.c.  path is the request's decoded path (path_decode), loc the location it matched. */
struct config;
struct config_errors;
struct location;
/* Opens every root of c (on the main thread, as it is applied; closed when c is freed). */
int static_open_roots(struct config *c, struct config_errors *e);
void static_configure(void);
void static_serve(struct request *r, const struct location *loc, const char *path);
/* The file at path (an error page's) with status and the fields h[0..n), if the site has
 * it: 0, else -1. */
int static_serve_page(struct request *r, const char *path, int status, const struct header *h, size_t n);
void static_sweep(double now);

/* returns.c: a location's return, and the redirect of a cleartext request to https. */
void return_serve(struct request *r, const char *host, const char *path);
struct site;
void https_redirect(struct request *r, const struct site *site, const char *host);

/* listing.c: the HTML index of directory fd (under path), for directory_listing. */
void listing_serve(struct request *r, int fd, const char *path, bool show_dotfiles);

/* realip.c: the client a trusted proxy names in the configured header, if the peer is
 * one (real_ip_from); the request's client becomes it.  -1 without memory. */
int realip_apply(struct request *r);
/* The rule itself, for a peer (16-byte form) and the header's values in order: true
 * and *out if a trusted chain names another client. */
bool realip_resolve(const struct config *c, const uint8_t peer[16], const char *const *values, size_t n,
                    struct sockaddr_storage *out);

/* mimetypes.c: the Content-Type for a path's extension; /etc/mime.types adds to the
 * built-in table. */
const char *mime_type(const char *path);
void mime_types_load(const char *path);

/* path.c: the path part of target, percent-decoded, with one leading slash and runs of
 * slashes merged: its length, or -1 on a bad escape, a NUL, a "." or ".." segment, or
 * more than cap bytes.  *dotted (unless dotted is NULL): a segment begins with a dot. */
int path_decode(const char *target, char *out, size_t cap, bool *dotted);
/* s[0..n) as a URL may carry it (a Location, a request line): every byte RFC 3986 does
 * not let a URL carry as it is - a control byte, space, DEL, '\\', '"', '#', a byte above
 * 127 - is written %XX, and so are '%' and '?' when s is a decoded path (decoded), so that
 * it names the same path again.  At most cap - 1 bytes and a NUL; like snprintf, the
 * length the whole would take. */
size_t url_escape(char *out, size_t cap, const char *s, size_t n, bool decoded);
/* A segment that begins with a dot (".well-known" aside). */
bool path_has_dotfile(const char *path);
/* Opens rel beneath root_fd, refusing symlinks and "..": a descriptor or -1 (errno). */
int path_open_beneath(int root_fd, const char *rel);

/* proxy_pass.c: the reverse proxy, for a location with proxy_pass (its route runs the
 * handler once routing's frames are gone, as a built-in route's). */
extern const struct route proxy_pass_route;
void proxy_pass_handle(struct request *r);
/* Once, before the workers start: the mark of this process in the Via of its requests. */
void proxy_pass_init(void);

/* auth_basic.c, auth_request.c: whether the request may go on past the location's
 * authentication; false when it was answered (401, 403, 500, 503, 504) or its client
 * went.  Either may wait, parked. */
struct auth_conf;
bool auth_basic_allows(struct request *r, const struct auth_conf *a);
bool auth_request_allows(struct request *r, const struct auth_conf *a);
/* limits.c: the per-client limits of a request's location (location->limits): 0 to go
 * on (*delay > 0: once held that long - then again with delay NULL, which leaves
 * limit_req out), -1 answered (refused).  limits_read: requests refused by the per-client
 * connection limit behind a trusted proxy, over it and for want of room in the table. */
int limits_check(struct request *r, const struct location *loc, double *delay);
void limits_read(uint64_t conn_refusals[2]);
/* The per-client limits' figures, for /-/stats, /metrics and the dashboard: the table's,
 * and the refusals (n: the workers' counters summed) and delays. */
struct limit_figures {
    struct client_table_stats table;
    uint64_t conns_refused[2][CONN_REFUSALS];   /* [0] at accept, [1] by request; by reason */
    uint64_t req_refused, req_delayed;          /* every limit_req rule's */
};
void limit_figures(const struct config *cfg, const struct worker_counters *n, struct limit_figures *l);

/* accesslog.c: one line per request, as it ends, in access_log_format. */
void access_log_request(const struct request *r);

/* metrics.c: responses by status class and request durations by protocol, per worker
 * thread, summed for /metrics. */
#define DURATION_BUCKETS 18
#define METRIC_PROTOCOLS 3
/* Authentications by kind and outcome: passed; refused (401, 403); not decided (503 for a
 * full password-check queue, 500 or 504 for an authentication server that failed). */
enum { AUTH_BASIC, AUTH_REQUEST, AUTH_KINDS };
enum { AUTH_SUCCESS, AUTH_FAILURE, AUTH_ERROR, AUTH_OUTCOMES };
#define AUTH_BUSY AUTH_ERROR
extern const char *const auth_kind_names[AUTH_KINDS], *const auth_outcome_names[AUTH_OUTCOMES];
extern const double duration_bounds[DURATION_BUCKETS];
extern const char *const metric_protocols[METRIC_PROTOCOLS];
struct request_metrics {
    uint64_t responses[5];                                    /* 1xx .. 5xx */
    uint64_t client_closed;                                   /* closed before an answer (499) */
    uint64_t rate_limited;                                    /* under a limit_rate */
    uint64_t duration[METRIC_PROTOCOLS][DURATION_BUCKETS + 1]; /* per bucket, not cumulative */
    uint64_t duration_us[METRIC_PROTOCOLS];
    uint64_t auth[AUTH_KINDS][AUTH_OUTCOMES];
};
void metrics_record(const struct request *r);
/* An authentication's outcome (auth_basic.c, auth_request.c). */
void metrics_auth(int kind, int outcome);
void metrics_rate_limited(void);            /* a request's location limits its response */
void metrics_sum(struct request_metrics *out);

/* dashboard.c: one sample a second per worker, the last DASHBOARD_SAMPLES of them. */
void dashboard_sample(int worker, double now, const struct worker_counters *n, const struct config *cfg);
extern const struct route dashboard_routes[];

/* Shared by the routes: a text answer, and an integer from the query. */
void reply_text(struct request *r, int status, const char *text);
long query_int(const char *target, const char *key);
uint64_t rss_bytes(void);
void stats_init(void);        /* stats.c: the process start time */

/* The length of the well-formed UTF-8 sequence s starts with (RFC 3629: no overlong form,
 * surrogate or code point past U+10FFFF), or 0.  s is NUL-terminated: a sequence cut
 * short is not one.  For names the configuration took as bytes (a unix socket's path)
 * that go out where text is required (Prometheus labels, JSON). */
static inline size_t utf8_sequence(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (u[0] < 0x80)
        return 1;
    if (u[0] >= 0xc2 && u[0] <= 0xdf)
        n = 2;
    else if (u[0] >= 0xe0 && u[0] <= 0xef)
        n = 3, lo = u[0] == 0xe0 ? 0xa0 : 0x80, hi = u[0] == 0xed ? 0x9f : 0xbf;
    else if (u[0] >= 0xf0 && u[0] <= 0xf4)
        n = 4, lo = u[0] == 0xf0 ? 0x90 : 0x80, hi = u[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (u[1] < lo || u[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (u[i] < 0x80 || u[i] > 0xbf)
            return 0;
    return n;
}

#endif
