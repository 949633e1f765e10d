/* Per-request metrics - responses by status class, requests their clients gave up on,
 * responses under a bandwidth limit, request duration by protocol - kept
 * per worker thread (each thread writes its own block, so the count is one add with no
 * lock) and summed when /metrics is read.  Blocks register themselves on first use and
 * stay (threads live as long as the daemon). */
#include <pthread.h>
#include <string.h>

#include "app/app.h"
#include "scalloc.h"

/* From 25 us: a small response here takes tens of microseconds from its head to its last
 * byte written, so buckets that started at 0.5 ms put every request in the first. */
const double duration_bounds[DURATION_BUCKETS] = { 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
const char *const metric_protocols[METRIC_PROTOCOLS] = { "http/1.1", "h2", "h2c" };

struct metrics_block {
    struct request_metrics m;
    struct metrics_block *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_block *registry;
static __thread struct metrics_block *mine;

static void add(uint64_t *c, uint64_t d) { __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + d, __ATOMIC_RELAXED); }

const char *const auth_kind_names[AUTH_KINDS] = { "basic", "request" };
const char *const auth_outcome_names[AUTH_OUTCOMES] = { "success", "failure", "error" };

/* This thread's block, registered on first use; NULL without memory. */
static struct metrics_block *block(void)
{
    if (!mine && (mine = sc_calloc(1, sizeof *mine))) {
        pthread_mutex_lock(&registry_lock);
        mine->next = registry;
        registry = mine;
        pthread_mutex_unlock(&registry_lock);
    }
    return mine;
}

void metrics_auth(int kind, int outcome)
{
    if (block())
        add(&mine->m.auth[kind][outcome], 1);
}

/* Counted as the limit is applied, so that a response without one pays nothing for it. */
void metrics_rate_limited(void)
{
    if (block())
        add(&mine->m.rate_limited, 1);
}

void metrics_record(const struct request *r)
{
    if (!block())
        return;
    int status = req_status(r), cls = status / 100;
    if (status == REQ_CLIENT_CLOSED)
        add(&mine->m.client_closed, 1);
    else if (cls >= 1 && cls <= 5)
        add(&mine->m.responses[cls - 1], 1);
    /* "http/1.1", "h2" or "h2c" (metric_protocols' order), told apart without a compare. */
    const char *proto = req_protocol(r);
    int p = proto[0] == 'h' && proto[1] == '2' ? (proto[2] == 'c' ? 2 : 1) : 0;
    double d = req_duration(r);
    int b = 0;
    while (b < DURATION_BUCKETS && d > duration_bounds[b])
        b++;
    add(&mine->m.duration[p][b], 1);      /* [DURATION_BUCKETS]: above the last bound */
    add(&mine->m.duration_us[p], d > 0 ? (uint64_t)(d * 1e6) : 0);
}

void metrics_sum(struct request_metrics *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&registry_lock);
    for (struct metrics_block *b = registry; b; b = b->next) {
        const uint64_t *src = (const uint64_t *)&b->m;
        uint64_t *dst = (uint64_t *)out;
        for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
            dst[i] += __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&registry_lock);
}
