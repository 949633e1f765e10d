/* /-/dashboard: a live view of parking - connections open and parked, serve and
 * handler coroutines, RSS, stacks in use, the heap's resident bytes, requests per second - drawn in the
 * browser from the samples the daemon keeps.
 *
 * Every worker samples its own counters once a second (its tick) into a ring of its own
 * (DASHBOARD_SAMPLES: the last 10 minutes); process-wide figures (RSS, stack, heap) are
 * sampled by worker 0 alone.  /-/dashboard/data sums the rings second by second: a sample
 * counts for the second it was taken in, so workers need not tick in step.  The reverse
 * proxy's upstream servers are not sampled: the data carries their counters as they are
 * when it is asked for, and the page draws them as a table.  The page
 * (dashboard.html, embedded in the binary) is self-contained - no external script, font
 * or style - and draws SVG, so what it drew can be read back from the DOM. */
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "config.h"
#include "counters.h"
#include "scalloc.h"
#include "upstream/upstream.h"

#define DASHBOARD_SAMPLES 600
#define MAX_RINGS 1024

enum { S_CONNS, S_PARKED, S_SERVE, S_HANDLERS, S_PARKED_HANDLERS, S_PARKED_HANDLER_BYTES, S_REQUESTS, S_RSS,
       S_STACK, S_HEAP, S_CLIENTS, S_LIMITED, S_AUTH_FAILED, S_HS_FULL, S_HS_RESUMED, S_HS_WAITING, S_VALUES };
static const char *const names[S_VALUES] = { "conns", "parked", "serve", "handlers", "parked_handlers",
                                             "parked_handler_bytes", "requests_total", "rss", "stack", "heap",
                                             "clients_tracked", "limited_total", "auth_failed_total",
                                             "handshakes_full_total", "handshakes_resumed_total", "handshakes_waiting" };

struct slot {
    uint64_t second;                /* when it was taken; 0: never */
    uint64_t v[S_VALUES];
};

/* Written by its worker only, read by any with relaxed loads. */
static struct slot *rings[MAX_RINGS];

extern const char dashboard_html_text[];     /* server/embed.S */
extern const unsigned dashboard_html_size;

static void store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* Process-wide, so worker 0 alone samples them: the per-client table's entries, what the
 * per-client limits refused (connections at accept and by request, limit_req's requests)
 * and the authentication that failed (a wrong password, an auth_request's 401/403). */
static void sample_limits(struct slot *s, const struct config *cfg)
{
    struct worker_counters all;
    struct limit_figures l;
    struct request_metrics m;
    workers_sum(&all);
    limit_figures(cfg, &all, &l);
    metrics_sum(&m);
    uint64_t limited = l.req_refused, auth_failed = 0;
    for (int at = 0; at < 2; at++)
        for (int i = 0; i < CONN_REFUSALS; i++)
            limited += l.conns_refused[at][i];
    for (int k = 0; k < AUTH_KINDS; k++)
        auth_failed += m.auth[k][AUTH_FAILURE];
    store(&s->v[S_CLIENTS], l.table.entries);
    store(&s->v[S_LIMITED], limited);
    store(&s->v[S_AUTH_FAILED], auth_failed);
}

void dashboard_sample(int worker, double now, const struct worker_counters *n, const struct config *cfg)
{
    if (worker < 0 || worker >= MAX_RINGS)
        return;
    struct slot *ring = __atomic_load_n(&rings[worker], __ATOMIC_ACQUIRE);
    if (!ring) {
        if (!(ring = sc_calloc(DASHBOARD_SAMPLES, sizeof *ring)))
            return;
        __atomic_store_n(&rings[worker], ring, __ATOMIC_RELEASE);
    }
    uint64_t second = (uint64_t)now;
    struct slot *s = &ring[second % DASHBOARD_SAMPLES];
    store(&s->second, 0);           /* a reader skips it while it changes */
    store(&s->v[S_CONNS], load(&n->conns));
    store(&s->v[S_PARKED], load(&n->parked_conns));
    store(&s->v[S_SERVE], load(&n->serve_coroutines));
    store(&s->v[S_HANDLERS], load(&n->handler_coroutines));
    store(&s->v[S_PARKED_HANDLERS], load(&n->parked_handlers));
    store(&s->v[S_PARKED_HANDLER_BYTES], load(&n->parked_handler_bytes));
    store(&s->v[S_REQUESTS], load(&n->streams_total));
    store(&s->v[S_HS_FULL], load(&n->handshakes[HS_FULL]));
    store(&s->v[S_HS_RESUMED], load(&n->handshakes[HS_RESUMED]));
    store(&s->v[S_HS_WAITING], load(&n->handshakes_waiting));
    if (worker == 0) {
        struct sc_stats st;
        sc_read_stats(&st);
        store(&s->v[S_RSS], rss_bytes());
        store(&s->v[S_STACK], st.stack_inuse);
        store(&s->v[S_HEAP], sc_heap_resident());  /* what objects and spans count includes released pages */
        sample_limits(s, cfg);
    }
    __atomic_store_n(&s->second, second, __ATOMIC_RELEASE);
}

static void data(struct request *r);

/* The page, wherever it is placed; what it draws is at its own path + "/data". */
static void page(struct request *r)
{
    const char *t = req_target(r), *q = strchr(t, '?');
    size_t n = q ? (size_t)(q - t) : strlen(t);
    if (n >= 5 && !memcmp(t + n - 5, "/data", 5) && req_location(r) && req_location(r)->path_len < n)
        return data(r);
    struct header h[] = { { "content-type", "text/html; charset=utf-8" }, { "cache-control", "no-store" } };
    if (req_respond(r, 200, h, 2, dashboard_html_size) == 0 && !req_is_head(r)) {
        req_write(r, dashboard_html_text, dashboard_html_size);
        req_end(r);
    }
}

/* ,"upstreams":[{"upstream": G, "server": S, "up": B, "active": N, "idle": N, "requests": N,
 * "responses": [1xx..5xx], "failures": N}, ...]: each upstream server now, summed over the
 * workers (the page draws them as a table, and requests per second from one fetch to the
 * next).  The server is named as the configuration spelled it: a unix socket's path may
 * hold a quote or a backslash. */
static void upstreams(struct buf *b, const struct config *cfg)
{
    struct upstream_stats u[MAX_UPSTREAM_TOTAL];
    int n = upstream_stats_sum(cfg, u, MAX_UPSTREAM_TOTAL);
    buf_append(b, ",\"upstreams\":[", 14);
    for (int i = 0; i < n; i++) {
        const struct upstream_server_conf *sv = &cfg->upstream_servers[i];
        char item[6 * sizeof sv->text];
        size_t k = 0;
        for (const char *v = sv->text; *v;) {
            unsigned char c = (unsigned char)*v;
            size_t seq = utf8_sequence(v);
            if (!seq) {            /* JSON is UTF-8: a byte that is none of it is U+FFFD */
                k += (size_t)snprintf(item + k, 8, "\\ufffd");
                v++;
            } else if (seq > 1) {
                memcpy(item + k, v, seq);
                k += seq, v += seq;
            } else {
                if (c < 0x20 || c == 0x7f)
                    k += (size_t)snprintf(item + k, 8, "\\u%04x", c);
                else {
                    if (c == '\\' || c == '"')
                        item[k++] = '\\';
                    item[k++] = (char)c;
                }
                v++;
            }
        }
        item[k] = 0;
        uint64_t failures = 0;
        for (int f = 0; f < UF_COUNT; f++)
            failures += u[i].failures[f];
        char text[sizeof item + 300];
        int len = snprintf(text, sizeof text,
                           "%s{\"upstream\":\"%s\",\"server\":\"%s\",\"backup\":%s,\"up\":%s,\"active\":%llu,\"idle\":%llu,"
                           "\"requests\":%llu,\"responses\":[%llu,%llu,%llu,%llu,%llu],\"failures\":%llu}",
                           i ? "," : "", sv->group, item, sv->backup ? "true" : "false",
                           u[i].down || u[i].checked_down ? "false" : "true",
                           (unsigned long long)u[i].active, (unsigned long long)u[i].idle,
                           (unsigned long long)u[i].requests, (unsigned long long)u[i].responses[0],
                           (unsigned long long)u[i].responses[1], (unsigned long long)u[i].responses[2],
                           (unsigned long long)u[i].responses[3], (unsigned long long)u[i].responses[4],
                           (unsigned long long)failures);
        buf_append(b, text, (size_t)len);
    }
    buf_append(b, "]", 1);
}

/* {"now": S, "seconds": [...], "conns": [...], ..., "upstreams": [...]}: the last
 * DASHBOARD_SAMPLES seconds, oldest first, each the sum over the workers that sampled that
 * second (seconds no worker sampled are left out), and the upstream servers now. */
static void data(struct request *r)
{
    uint64_t now = (uint64_t)req_now(r);
    static __thread uint64_t sum[DASHBOARD_SAMPLES][S_VALUES];
    static __thread uint64_t secs[DASHBOARD_SAMPLES];
    size_t count = 0;
    for (uint64_t t = now - DASHBOARD_SAMPLES + 1; t <= now; t++) {
        bool seen = false;
        memset(sum[count], 0, sizeof sum[count]);
        for (int w = 0; w < nworkers && w < MAX_RINGS; w++) {
            const struct slot *ring = __atomic_load_n(&rings[w], __ATOMIC_ACQUIRE);
            if (!ring)
                continue;
            const struct slot *s = &ring[t % DASHBOARD_SAMPLES];
            if (__atomic_load_n(&s->second, __ATOMIC_ACQUIRE) != t)
                continue;
            for (int k = 0; k < S_VALUES; k++)
                sum[count][k] += load(&s->v[k]);
            seen = true;
        }
        if (seen)
            secs[count++] = t;
    }
    struct buf b = { 0 };
    char item[48];
    int len = snprintf(item, sizeof item, "{\"now\":%llu,\"seconds\":[", (unsigned long long)now);
    buf_append(&b, item, (size_t)len);
    for (size_t i = 0; i < count; i++) {
        len = snprintf(item, sizeof item, "%s%llu", i ? "," : "", (unsigned long long)secs[i]);
        buf_append(&b, item, (size_t)len);
    }
    for (int k = 0; k < S_VALUES; k++) {
        len = snprintf(item, sizeof item, "],\"%s\":[", names[k]);
        buf_append(&b, item, (size_t)len);
        for (size_t i = 0; i < count; i++) {
            len = snprintf(item, sizeof item, "%s%llu", i ? "," : "", (unsigned long long)sum[i][k]);
            buf_append(&b, item, (size_t)len);
        }
    }
    buf_append(&b, "]", 1);
    upstreams(&b, req_config(r));
    buf_append(&b, "}\n", 2);
    struct header h[] = { { "content-type", "application/json" }, { "cache-control", "no-store" } };
    if (req_respond(r, 200, h, 2, (int64_t)b.len) == 0 && !req_is_head(r)) {
        req_write(r, b.data, b.len);
        req_end(r);
    }
    buf_free(&b);
}

const struct route dashboard_routes[] = {
    { "dashboard", "/-/dashboard", M_GET | M_HEAD, page, false },
    { "dashboard_data", "/-/dashboard/data", M_GET | M_HEAD, data, false },
    { NULL, NULL, 0, NULL, false },
};
