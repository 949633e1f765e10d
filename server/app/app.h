/* The application: the routes h2park serves, written against request.h only.
 *
 * Each module offers its routes as a table; routes.c dispatches on them and falls back
 * to the static files.  No route knows a protocol, and no protocol names a route. */
#ifndef H2PARK_APP_H
#define H2PARK_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "request.h"

enum { M_GET = 1, M_HEAD = 2, M_POST = 4 };
struct worker_counters;

struct route {
    const char *path;              /* matched exactly, the query aside */
    unsigned methods;              /* M_* */
    void (*handler)(struct request *r);
    bool open_to_all;              /* else only builtin_routes_allow's addresses see it */
};

extern const struct route builtin_routes[];    /* builtin.c: healthz, echo, delay */
extern const struct route stats_routes[];      /* stats.c: /-/stats, /metrics */

/* routes.c: the application's entry point (request_set_handler). */
void app_handle(struct request *r);
void app_init(void);
/* On every worker after it took a new configuration. */
void app_configure(void);
/* Once a second on every worker, with that worker's counters. */
void app_tick(int worker, double now, const struct worker_counters *n);

/* static.c */
struct config;
int static_resolve_root(struct config *c, char *err, size_t errlen);
void static_configure(void);
void static_serve(struct request *r);
void static_sweep(double now);

/* mimetypes.c: the Content-Type for a path's extension; /etc/mime.types adds to the
 * built-in table. */
const char *mime_type(const char *path);
void mime_types_load(const char *path);

/* path.c: the path part of target, percent-decoded, relative to root (no leading
 * slash); -1 on a bad escape, a NUL, a "." or ".." segment, or more than cap bytes. */
int path_decode(const char *target, char *out, size_t cap);
/* Opens rel beneath root_fd, refusing symlinks and "..": a descriptor or -1 (errno). */
int path_open_beneath(int root_fd, const char *rel);

/* proxy_pass.c: the reverse proxy, for the paths under proxy_location when proxy_pass is set. */
bool proxy_pass_wants(const char *target);
void proxy_pass_handle(struct request *r);

/* accesslog.c: one line per request, as it ends, in access_log_format. */
void access_log_request(const struct request *r);

/* metrics.c: responses by status class and request durations by protocol, per worker
 * thread, summed for /metrics. */
#define DURATION_BUCKETS 18
#define METRIC_PROTOCOLS 3
extern const double duration_bounds[DURATION_BUCKETS];
extern const char *const metric_protocols[METRIC_PROTOCOLS];
struct request_metrics {
    uint64_t responses[5];                                    /* 1xx .. 5xx */
    uint64_t duration[METRIC_PROTOCOLS][DURATION_BUCKETS + 1]; /* per bucket, not cumulative */
    uint64_t duration_us[METRIC_PROTOCOLS];
};
void metrics_record(const struct request *r);
void metrics_sum(struct request_metrics *out);

/* dashboard.c: one sample a second per worker, the last DASHBOARD_SAMPLES of them. */
void dashboard_sample(int worker, double now, const struct worker_counters *n);
extern const struct route dashboard_routes[];

/* Shared by the routes: a text answer, and an integer from the query. */
void reply_text(struct request *r, int status, const char *text);
long query_int(const char *target, const char *key);
uint64_t rss_bytes(void);
void stats_init(void);        /* stats.c: the process start time */

#endif
