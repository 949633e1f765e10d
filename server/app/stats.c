/* /-/stats and /metrics: the daemon's figures as JSON and in Prometheus' text format.
 *
 * Connection and coroutine counts are summed over the workers' counters, per-request
 * figures over the workers' metric blocks (metrics.c), heap figures come from
 * sc_read_stats, process figures from /proc/self; all are cheap enough to serve on every
 * request.  The Prometheus names follow its conventions, which `promtool check metrics`
 * checks (a test runs it): HELP and TYPE for every family, _total only on counters, base
 * units in the name, no gauge and counter of one family name. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "app/app.h"
#include "clienttable.h"
#include "config.h"
#include "coro.h"
#include "counters.h"
#include "scalloc.h"
#include "upstream/upstream.h"

static time_t started_at;

/* /proc/self files are read with open and read, not stdio: a FILE would take memory
 * from the C library's malloc on every request. */
static ssize_t read_proc(const char *path, char *text, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, cap - 1) : -1;
    if (fd >= 0)
        close(fd);
    text[n > 0 ? n : 0] = 0;
    return n;
}

uint64_t rss_bytes(void)
{
    char text[128];
    unsigned long long size = 0, resident = 0;
    if (read_proc("/proc/self/statm", text, sizeof text) <= 0 || sscanf(text, "%llu %llu", &size, &resident) != 2)
        return 0;
    return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* What glibc's own allocator holds: zero when the daemon exports the malloc family from
 * the heap, as it does outside sanitizer builds (alloc/export.c). */
static uint64_t libc_heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.arena + mi.hblkhd;
}

static double cpu_seconds(void)
{
    char text[1024];
    if (read_proc("/proc/self/stat", text, sizeof text) <= 0)
        return 0;
    const char *p = strrchr(text, ')');   /* the command name may hold anything */
    unsigned long long utime = 0, stime = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return 0;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static unsigned open_fds(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n ? n - 1 : 0;                 /* less the one opendir holds */
}

struct figure {
    const char *name;
    uint64_t value;
    bool boolean, counter;
};

static size_t collect(struct figure *f, struct worker_counters *n, struct sc_stats *st, const struct config *cfg)
{
    bool parking = cfg->parking;
    workers_sum(n);
    sc_read_stats(st);
    size_t k = 0;
    f[k++] = (struct figure){ "conns", n->conns, false, false };
    f[k++] = (struct figure){ "parked_conns", n->parked_conns, false, false };
    f[k++] = (struct figure){ "coroutines", n->serve_coroutines + n->handler_coroutines, false, false };
    f[k++] = (struct figure){ "serve_coroutines", n->serve_coroutines, false, false };
    f[k++] = (struct figure){ "handler_coroutines", n->handler_coroutines, false, false };
    f[k++] = (struct figure){ "parked_handlers", n->parked_handlers, false, false };
    f[k++] = (struct figure){ "parked_handler_bytes", n->parked_handler_bytes, false, false };
    f[k++] = (struct figure){ "wide_output_bytes", n->wide_output_bytes, false, false };
    f[k++] = (struct figure){ "stack_inuse_bytes", st->stack_inuse, false, false };
    struct coro_counters cc;
    coro_read_counters(&cc);
    f[k++] = (struct figure){ "cached_stack_bytes", cc.cached_stack_bytes, false, false };
    f[k++] = (struct figure){ "heap_alloc_bytes", st->heap_alloc, false, false };
    f[k++] = (struct figure){ "heap_inuse_bytes", st->heap_inuse, false, false };
    f[k++] = (struct figure){ "heap_sys_bytes", st->heap_sys, false, false };
    f[k++] = (struct figure){ "heap_released_bytes", st->heap_released, false, false };
    f[k++] = (struct figure){ "rss_bytes", rss_bytes(), false, false };
    f[k++] = (struct figure){ "libc_heap_bytes", libc_heap_bytes(), false, false };
    f[k++] = (struct figure){ "parking", parking, true, false };
    f[k++] = (struct figure){ "conns_total", n->conns_total, false, true };
    f[k++] = (struct figure){ "streams_total", n->streams_total, false, true };
    f[k++] = (struct figure){ "parks_total", n->parks_total, false, true };
    f[k++] = (struct figure){ "respawns_total", n->respawns_total, false, true };
    f[k++] = (struct figure){ "handler_parks_total", n->handler_parks_total, false, true };
    f[k++] = (struct figure){ "workers", (uint64_t)nworkers, false, false };
    struct limit_figures l;
    limit_figures(cfg, n, &l);
    f[k++] = (struct figure){ "client_table_entries", l.table.entries, false, false };
    f[k++] = (struct figure){ "client_table_capacity", l.table.capacity, false, false };
    f[k++] = (struct figure){ "client_table_evictions_total", l.table.evictions, false, true };
    uint64_t refused = 0;
    for (int i = 0; i < CONN_REFUSALS; i++)
        refused += l.conns_refused[0][i] + l.conns_refused[1][i];
    f[k++] = (struct figure){ "limit_conns_refused_total", refused, false, true };
    f[k++] = (struct figure){ "limit_req_refused_total", l.req_refused, false, true };
    f[k++] = (struct figure){ "limit_req_delayed_total", l.req_delayed, false, true };
    return k;
}

static void stats(struct request *r)
{
    struct figure f[32];
    struct worker_counters n;
    struct sc_stats st;
    size_t k = collect(f, &n, &st, req_config(r));
    struct buf b = { 0 };
    char item[128];
    buf_append(&b, "{", 1);
    for (size_t i = 0; i < k; i++) {
        int len = f[i].boolean ? snprintf(item, sizeof item, "%s\"%s\": %s", i ? ", " : "", f[i].name, f[i].value ? "true" : "false")
                               : snprintf(item, sizeof item, "%s\"%s\": %llu", i ? ", " : "", f[i].name,
                                          (unsigned long long)f[i].value);
        buf_append(&b, item, (size_t)len);
    }
    /* ?classes: where the resident memory is, class by class (sc_read_residency walks
     * the whole heap: for analysis, not for a scraper). */
    if (strstr(req_target(r), "?classes") || strstr(req_target(r), "&classes")) {
        static struct sc_residency res;   /* one worker at a time is plenty for this */
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        sc_read_residency(&res);
        buf_append(&b, ", \"classes\": [", 14);
        bool first = true;
        for (int c = 0; c <= SC_NUM_CLASSES; c++) {
            const struct sc_class_residency *x = c < SC_NUM_CLASSES ? &res.by_class[c] : &res.stacks;
            if (!x->spans)
                continue;
            char size[16];
            snprintf(size, sizeof size, "%s", c == SC_NUM_CLASSES ? "\"stacks\"" : c ? "" : "\"large\"");
            if (!size[0])
                snprintf(size, sizeof size, "%u", st.by_class[c].size);
            int len = snprintf(item, sizeof item, "%s{\"size\": %s, \"spans\": %llu, \"bytes\": %llu, \"resident\": %llu, \"objects\": %llu}",
                               first ? "" : ", ", size, (unsigned long long)x->spans, (unsigned long long)x->bytes,
                               (unsigned long long)x->resident, (unsigned long long)x->objects);
            buf_append(&b, item, (size_t)len);
            first = false;
        }
        buf_append(&b, "]", 1);
        pthread_mutex_unlock(&lock);
    }
    buf_append(&b, "}\n", 2);
    req_simple(r, 200, "application/json", b.data, b.len);
    buf_free(&b);
}

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
    char text[512];
    int n = snprintf(text, sizeof text, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    buf_append(b, text, (size_t)n);
}

static void sample(struct buf *b, const char *name, const char *labels, double value)
{
    char text[40];
    buf_append(b, name, strlen(name));
    buf_append(b, labels, strlen(labels));
    int n = snprintf(text, sizeof text, " %.17g\n", value);
    buf_append(b, text, (size_t)n);
}

/* {upstream="G",server="S"[,KEY="VALUE"]}: the server's address with backslash and quote
 * escaped as Prometheus' text format reads them - a server is named as the configuration
 * spelled it, and a unix socket's path may hold either (a group's name cannot). */
static void server_labels(char *out, size_t cap, const struct upstream_server_conf *sv, const char *key,
                          const char *value)
{
    char server[2 * sizeof sv->text + 4];
    size_t k = 0;
    for (const char *v = sv->text; *v && k + 5 < sizeof server;) {
        unsigned char c = (unsigned char)*v;
        size_t seq = utf8_sequence(v);
        if (seq > 1) {             /* a label is UTF-8: a byte that is none of it is a '?' */
            memcpy(server + k, v, seq);
            k += seq, v += seq;
            continue;
        }
        if (c == '\\' || c == '"')
            server[k++] = '\\';
        server[k++] = !seq || c < 0x20 || c == 0x7f ? '?' : (char)c;
        v++;
    }
    server[k] = 0;
    if (key)
        snprintf(out, cap, "{upstream=\"%s\",server=\"%s\",%s=\"%s\"}", sv->group, server, key, value);
    else
        snprintf(out, cap, "{upstream=\"%s\",server=\"%s\"}", sv->group, server);
}

static void metric(struct buf *b, const char *name, const char *type, const char *help, double value)
{
    family(b, name, type, help);
    sample(b, name, "", value);
}

/* Per upstream server, summed over the workers (upstream/upstream.c): labelled by its
 * group ("" for a location's own address) and address. */
static void upstream_metrics(struct buf *b, const struct config *cfg)
{
    struct upstream_stats u[MAX_UPSTREAM_TOTAL];
    int n = upstream_stats_sum(cfg, u, MAX_UPSTREAM_TOTAL);
    if (!n)
        return;
    char labels[400];
    const struct upstream_server_conf *sv = cfg->upstream_servers;
    const char *const classes[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };
    family(b, "h2park_upstream_responses_total", "counter", "Responses from each upstream server, by status class.");
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 5; c++) {
            server_labels(labels, sizeof labels, &sv[i], "code", classes[c]);
            sample(b, "h2park_upstream_responses_total", labels, (double)u[i].responses[c]);
        }
    family(b, "h2park_upstream_failures_total", "counter",
           "Attempts on each upstream server that failed, by cause (connect, connect_timeout, send, send_timeout, "
           "read_timeout, closed, reset, invalid).");
    static const char *const causes[UF_COUNT] = { [UF_CONNECT] = "connect", [UF_CONNECT_TIMEOUT] = "connect_timeout",
        [UF_SEND] = "send", [UF_SEND_TIMEOUT] = "send_timeout", [UF_READ_TIMEOUT] = "read_timeout",
        [UF_CLOSED] = "closed", [UF_RESET] = "reset", [UF_INVALID] = "invalid", [UF_TLS] = "tls" };
    for (int i = 0; i < n; i++)
        for (int f = 0; f < UF_COUNT; f++)
            if (causes[f]) {
                server_labels(labels, sizeof labels, &sv[i], "cause", causes[f]);
                sample(b, "h2park_upstream_failures_total", labels, (double)u[i].failures[f]);
            }
    family(b, "h2park_upstream_tls_handshakes_total", "counter",
           "TLS handshakes with each upstream server reached over TLS: a session resumed, or a new one.");
    for (int i = 0; i < n; i++)
        if (sv[i].tls) {
            server_labels(labels, sizeof labels, &sv[i], "session", "resumed");
            sample(b, "h2park_upstream_tls_handshakes_total", labels, (double)u[i].resumed);
            server_labels(labels, sizeof labels, &sv[i], "session", "new");
            sample(b, "h2park_upstream_tls_handshakes_total", labels, (double)(u[i].handshakes - u[i].resumed));
        }
    family(b, "h2park_upstream_connections", "gauge", "Connections to each upstream server: in use (active) and pooled (idle).");
    for (int i = 0; i < n; i++) {
        server_labels(labels, sizeof labels, &sv[i], "state", "active");
        sample(b, "h2park_upstream_connections", labels, (double)u[i].active);
        server_labels(labels, sizeof labels, &sv[i], "state", "idle");
        sample(b, "h2park_upstream_connections", labels, (double)u[i].idle);
    }
    family(b, "h2park_upstream_up", "gauge",
           "1 if neither its health checks nor any worker's count of its failures (passive health) leave the "
           "upstream server out, else 0.");
    for (int i = 0; i < n; i++) {
        server_labels(labels, sizeof labels, &sv[i], NULL, NULL);
        sample(b, "h2park_upstream_up", labels, u[i].down || u[i].checked_down ? 0 : 1);
    }
    family(b, "h2park_upstream_health_checks_total", "counter",
           "Active health checks of each upstream server of a group with health_check, by result.");
    for (uint32_t g = 0; g < cfg->nupstreams; g++) {
        if (!cfg->upstreams[g].check)
            continue;
        for (uint16_t s = 0; s < cfg->upstreams[g].nservers; s++) {
            uint16_t i = cfg->upstreams[g].servers[s].index;
            if (i >= n)
                continue;
            server_labels(labels, sizeof labels, &sv[i], "result", "pass");
            sample(b, "h2park_upstream_health_checks_total", labels, (double)u[i].checks[0]);
            server_labels(labels, sizeof labels, &sv[i], "result", "fail");
            sample(b, "h2park_upstream_health_checks_total", labels, (double)u[i].checks[1]);
        }
    }
}

/* A label's value as Prometheus' text format reads it: backslash and quote escaped, a byte
 * that is no UTF-8 a '?' (a rule is named by its file, whose name may hold anything). */
static void label_value(char *out, size_t cap, const char *v)
{
    size_t k = 0;
    while (*v && k + 5 < cap) {
        size_t seq = utf8_sequence(v);
        if (seq > 1) {
            memcpy(out + k, v, seq);
            k += seq, v += seq;
            continue;
        }
        unsigned char c = (unsigned char)*v++;
        if (c == '\\' || c == '"')
            out[k++] = '\\';
        out[k++] = !seq || c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    out[k] = 0;
}

static void limit_metrics(struct buf *b, const struct config *cfg, const struct worker_counters *n)
{
    struct limit_figures l;
    limit_figures(cfg, n, &l);
    char labels[700], rule[600];
    family(b, "h2park_limit_conns_refused_total", "counter",
           "Connections max_conns_per_client refused, by reason (over_limit; table_full: no room in the client table) "
           "and where: at accept (or its PROXY header), or by request for a client behind a trusted proxy.");
    static const char *const reasons[CONN_REFUSALS] = { "over_limit", "table_full" };
    for (int at = 0; at < 2; at++)
        for (int i = 0; i < CONN_REFUSALS; i++) {
            snprintf(labels, sizeof labels, "{reason=\"%s\",at=\"%s\"}", reasons[i], at ? "request" : "accept");
            sample(b, "h2park_limit_conns_refused_total", labels, (double)l.conns_refused[at][i]);
        }
    family(b, "h2park_limit_req_refused_total", "counter",
           "Requests each limit_req rule (named by where it is written) refused, since its configuration was loaded.");
    for (uint32_t i = 0; i < cfg->nlimit_rules; i++) {
        label_value(rule, sizeof rule, cfg->limit_rules[i]->from);
        snprintf(labels, sizeof labels, "{rule=\"%s\"}", rule);
        sample(b, "h2park_limit_req_refused_total", labels, (double)cfg->limit_rules[i]->refused);
    }
    family(b, "h2park_limit_req_delayed_total", "counter",
           "Requests each limit_req rule held until they were due, since its configuration was loaded.");
    for (uint32_t i = 0; i < cfg->nlimit_rules; i++) {
        label_value(rule, sizeof rule, cfg->limit_rules[i]->from);
        snprintf(labels, sizeof labels, "{rule=\"%s\"}", rule);
        sample(b, "h2park_limit_req_delayed_total", labels, (double)cfg->limit_rules[i]->delayed);
    }
    metric(b, "h2park_client_table_entries", "gauge", "Entries of the per-client table in use (a client's connection "
           "count, or its bucket of a limit_req rule).", (double)l.table.entries);
    metric(b, "h2park_client_table_capacity", "gauge", "Entries the per-client table holds at most (limit_zone_size "
           "/ 32 bytes); 0 without a limit.", (double)l.table.capacity);
    metric(b, "h2park_client_table_bytes", "gauge", "Bytes the per-client table is (resident only as its entries are "
           "used).", (double)l.table.bytes);
    metric(b, "h2park_client_table_evictions_total", "counter",
           "Entries the per-client table forgot to make room for another client: the least recently seen of a bucket.",
           (double)l.table.evictions);
}

static void metrics(struct request *r)
{
    struct figure f[32];
    struct worker_counters n;
    struct sc_stats st;
    collect(f, &n, &st, req_config(r));
    struct request_metrics m;
    metrics_sum(&m);
    struct sc_config sc;
    sc_get_config(&sc);
    struct buf b = { 0 };
    char labels[160];

    metric(&b, "h2park_connections", "gauge", "Connections open.", (double)n.conns);
    metric(&b, "h2park_connections_parked", "gauge", "Open connections with no serve coroutine (parked).",
           (double)n.parked_conns);
    metric(&b, "h2park_connections_accepted_total", "counter", "Connections accepted.", (double)n.conns_total);
    family(&b, "h2park_connections_closed_total", "counter",
           "Connections closed, by reason: peer (the client closed), idle (idle_timeout), timeout (another deadline), "
           "goaway (h2park's last words: an error or a shutdown), error (the socket failed).");
    for (int i = 0; i < CLOSED_REASONS; i++) {
        snprintf(labels, sizeof labels, "{reason=\"%s\"}", close_reason_names[i]);
        sample(&b, "h2park_connections_closed_total", labels, (double)n.closed[i]);
    }
    family(&b, "h2park_tls_handshakes_total", "counter",
           "TLS handshakes, by end: full, resumed (a session ticket), failed (refused or broken off), timed_out "
           "(handshake_timeout).");
    for (int i = 0; i < HANDSHAKE_ENDS; i++) {
        snprintf(labels, sizeof labels, "{result=\"%s\"}", handshake_end_names[i]);
        sample(&b, "h2park_tls_handshakes_total", labels, (double)n.handshakes[i]);
    }
    metric(&b, "h2park_tls_handshakes_waiting", "gauge",
           "TLS handshakes whose ClientHello came, waiting for their worker (a storm of clients).",
           (double)n.handshakes_waiting);
    family(&b, "h2park_coroutines", "gauge", "Live coroutines, by kind: serve loops and request handlers.");
    sample(&b, "h2park_coroutines", "{kind=\"serve\"}", (double)n.serve_coroutines);
    sample(&b, "h2park_coroutines", "{kind=\"handler\"}", (double)n.handler_coroutines);
    metric(&b, "h2park_parks_total", "counter", "Serve coroutines that parked.", (double)n.parks_total);
    metric(&b, "h2park_serve_respawns_total", "counter", "Serve coroutines spawned for a connection that had parked.",
           (double)n.respawns_total);
    metric(&b, "h2park_handlers_parked", "gauge", "Handlers waiting long enough that their stacks went back (parked).",
           (double)n.parked_handlers);
    metric(&b, "h2park_handlers_parked_bytes", "gauge", "Heap bytes parked handlers hold: their live stack frames.",
           (double)n.parked_handler_bytes);
    metric(&b, "h2park_wide_output_bytes", "gauge",
           "What requests reading large bodies 256 KiB at a time may buffer beyond 64 KiB (at most 64 MiB a worker).",
           (double)n.wide_output_bytes);
    metric(&b, "h2park_handler_parks_total", "counter", "Handlers parked.", (double)n.handler_parks_total);
    metric(&b, "h2park_requests_total", "counter", "Requests begun, all protocols.", (double)n.streams_total);
    family(&b, "h2park_responses_total", "counter", "Responses by status class.");
    for (int i = 0; i < 5; i++) {
        snprintf(labels, sizeof labels, "{code=\"%dxx\"}", i + 1);
        sample(&b, "h2park_responses_total", labels, (double)m.responses[i]);
    }
    metric(&b, "h2park_requests_client_closed_total", "counter",
           "Requests whose client closed (or reset the stream) before they were answered: logged as 499.",
           (double)m.client_closed);
    metric(&b, "h2park_responses_rate_limited_total", "counter",
           "Responses under a bandwidth limit (limit_rate), counted as their location applies it.",
           (double)m.rate_limited);
    static const char *const codings[] = { "", "gzip", "br", "zstd" };
    family(&b, "h2park_compressed_responses_total", "counter", "Responses compressed on the fly, by coding.");
    for (int k = 1; k < COUNTED_CODINGS; k++) {
        snprintf(labels, sizeof labels, "{encoding=\"%s\"}", codings[k]);
        sample(&b, "h2park_compressed_responses_total", labels, (double)n.compressed_responses[k]);
    }
    family(&b, "h2park_compress_in_bytes_total", "counter", "Body bytes into the compressors, by coding.");
    for (int k = 1; k < COUNTED_CODINGS; k++) {
        snprintf(labels, sizeof labels, "{encoding=\"%s\"}", codings[k]);
        sample(&b, "h2park_compress_in_bytes_total", labels, (double)n.compress_in_bytes[k]);
    }
    family(&b, "h2park_compress_out_bytes_total", "counter", "Bytes out of the compressors (what was sent for them), by coding.");
    for (int k = 1; k < COUNTED_CODINGS; k++) {
        snprintf(labels, sizeof labels, "{encoding=\"%s\"}", codings[k]);
        sample(&b, "h2park_compress_out_bytes_total", labels, (double)n.compress_out_bytes[k]);
    }
    metric(&b, "h2park_compress_state_bytes", "gauge",
           "Bytes the compressors of responses under way hold (their libraries' state; compress_memory bounds it per "
           "worker).", (double)n.compress_state_bytes);
    metric(&b, "h2park_compress_skipped_total", "counter",
           "Responses sent uncompressed that would have been compressed: their worker's compressors held "
           "compress_memory.", (double)n.compress_skipped);
    metric(&b, "h2park_compress_lowered_total", "counter",
           "Compressors of responses already under way made small (level 1, a 1 KiB window) as their first bytes came: "
           "their worker's compressors held compress_memory.", (double)n.compress_lowered);
    family(&b, "h2park_auth_total", "counter",
           "Authentications by kind (basic: auth_basic, request: auth_request) and outcome: success, failure (401, "
           "403), error (not decided: 503 when the password checks are all taken, 500 or 504 when the "
           "authentication server failed).");
    for (int k = 0; k < AUTH_KINDS; k++)
        for (int o = 0; o < AUTH_OUTCOMES; o++) {
            snprintf(labels, sizeof labels, "{kind=\"%s\",outcome=\"%s\"}", auth_kind_names[k], auth_outcome_names[o]);
            sample(&b, "h2park_auth_total", labels, (double)m.auth[k][o]);
        }
    family(&b, "h2park_request_duration_seconds", "histogram",
           "Time from a request's complete head to the end of its exchange, by protocol.");
    for (int p = 0; p < METRIC_PROTOCOLS; p++) {
        uint64_t cum = 0;
        for (int i = 0; i <= DURATION_BUCKETS; i++) {
            cum += m.duration[p][i];
            if (i < DURATION_BUCKETS)
                snprintf(labels, sizeof labels, "{protocol=\"%s\",le=\"%g\"}", metric_protocols[p], duration_bounds[i]);
            else
                snprintf(labels, sizeof labels, "{protocol=\"%s\",le=\"+Inf\"}", metric_protocols[p]);
            sample(&b, "h2park_request_duration_seconds_bucket", labels, (double)cum);
        }
        snprintf(labels, sizeof labels, "{protocol=\"%s\"}", metric_protocols[p]);
        sample(&b, "h2park_request_duration_seconds_sum", labels, (double)m.duration_us[p] / 1e6);
        sample(&b, "h2park_request_duration_seconds_count", labels, (double)cum);
    }
    metric(&b, "h2park_received_bytes_total", "counter", "Bytes read from clients (after TLS).", (double)n.bytes_in);
    metric(&b, "h2park_sent_bytes_total", "counter", "Bytes written to clients (before TLS).", (double)n.bytes_out);
    metric(&b, "h2park_stack_inuse_bytes", "gauge", "Bytes of heap spans holding coroutine stacks.",
           (double)st.stack_inuse);
    struct coro_counters cc;
    coro_read_counters(&cc);
    metric(&b, "h2park_cached_stack_bytes", "gauge",
           "Stacks of finished coroutines kept for the next ones (given back after one to two idle seconds).",
           (double)cc.cached_stack_bytes);
    metric(&b, "h2park_heap_alloc_bytes", "gauge", "Bytes in live heap objects, class- or page-rounded.",
           (double)st.heap_alloc);
    metric(&b, "h2park_heap_inuse_bytes", "gauge", "Bytes in heap spans holding objects.", (double)st.heap_inuse);
    metric(&b, "h2park_heap_sys_bytes", "gauge", "Address space the heap has taken into use.", (double)st.heap_sys);
    metric(&b, "h2park_heap_released_bytes", "gauge", "Idle heap pages given back to the OS.", (double)st.heap_released);
    metric(&b, "h2park_libc_heap_bytes", "gauge", "Bytes glibc's own allocator holds (0: everything is on the heap).",
           (double)libc_heap_bytes());
    upstream_metrics(&b, req_config(r));
    limit_metrics(&b, req_config(r), &n);
    metric(&b, "h2park_parking_enabled", "gauge", "1 if idle serve loops park (http2serveparking).",
           req_config(r)->parking);
    metric(&b, "h2park_workers", "gauge", "Worker threads.", (double)nworkers);
    family(&b, "h2park_build_info", "gauge", "How this h2park was built; the value is always 1.");
    snprintf(labels, sizeof labels, "{version=\"%s\",allocator=\"scalloc\",size_specialized=\"%s\",coroutines=\"%s\"}",
             H2PARK_VERSION, sc.size_specialized ? "on" : "off", coro_switch_kind());
    sample(&b, "h2park_build_info", labels, 1);

    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    metric(&b, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", cpu_seconds());
    metric(&b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", (double)rss_bytes());
    metric(&b, "process_open_fds", "gauge", "Open file descriptors.", open_fds());
    metric(&b, "process_max_fds", "gauge", "The open-file limit.",
           rl.rlim_cur == RLIM_INFINITY ? 1e18 : (double)rl.rlim_cur);
    metric(&b, "process_start_time_seconds", "gauge", "When the process started, in seconds since the epoch.",
           (double)started_at);
    req_simple(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
    buf_free(&b);
}

void stats_init(void) { started_at = time(NULL); }

const struct route stats_routes[] = {
    { "stats", "/-/stats", M_GET | M_HEAD, stats, false },
    { "metrics", "/metrics", M_GET | M_HEAD, metrics, false },
    { NULL, NULL, 0, NULL, false },
};
