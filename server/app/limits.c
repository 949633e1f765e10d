/* Per-client limits on requests, once routing has found the location (routes.c):
 *
 * - limit_req, nginx's leaky bucket per rule and client (clienttable.c): a request over
 *   the rate within burst is held until it is due - its handler waits in req_sleep, and
 *   a wait of more than a worker tick parks it, its stack given back - or passes at once
 *   under nodelay (or within delay=N); one past burst is answered limit_status (429 by
 *   default) with Retry-After, the seconds until one would pass.  Every HTTP/2 stream is
 *   a request: 100 streams opened at once are limited as 100 pipelined requests are.
 *   The client is key=realip (the default: the address a trusted proxy names, else the
 *   peer), key=addr (the connection's peer: the socket's or the PROXY header's), or
 *   key=host (every client of one host name together).
 * - max_conns_per_client by the client a request names: a connection from a trusted
 *   proxy (real_ip_from) carries many clients, so it is not counted at accept
 *   (core/connlimit.c); each of its requests counts as one connection of the client its
 *   header names, from routing to the request's release, as nginx's limit_conn counts
 *   the realip client - a request past the limit is refused.
 *
 * A refused request names its rule in the access log (refused_by) and is counted: per
 * rule for limit_req (refused, delayed: h2park_limit_req_*_total), here for the
 * connection limit (h2park_limit_conns_refused_total{at="request"}).  Nothing here runs
 * for a location without limits (location->limits is false: routes.c tests only that). */
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "clienttable.h"
#include "config.h"
#include "host.h"
#include "log.h"

static _Atomic uint64_t conns_refused[2];      /* over the limit, no room in the table */

void limits_read(uint64_t conn_refusals[2])
{
    conn_refusals[0] = conns_refused[0];
    conn_refusals[1] = conns_refused[1];
}

void limit_figures(const struct config *cfg, const struct worker_counters *n, struct limit_figures *l)
{
    client_table_read(cfg->clients, &l->table);
    for (int i = 0; i < CONN_REFUSALS; i++)
        l->conns_refused[0][i] = n->conns_refused[i];
    limits_read(l->conns_refused[1]);
    l->req_refused = l->req_delayed = 0;
    for (uint32_t i = 0; i < cfg->nlimit_rules; i++) {
        l->req_refused += cfg->limit_rules[i]->refused;
        l->req_delayed += cfg->limit_rules[i]->delayed;
    }
}

static uint64_t now_ms(const struct request *r) { return (uint64_t)(req_now(r) * 1000); }

static bool rule_key(const struct client_table *t, struct request *r, uint8_t kind, struct client_key *k)
{
    if (kind == LIMIT_KEY_HOST) {
        char host[256];
        int hl = req_host_length(r);
        if (hl < 0)
            hl = 0;
        host_lower(req_authority(r), (size_t)hl, host);
        client_key_name(t, host, (size_t)hl, k);
        return true;
    }
    return client_key_addr(t, kind == LIMIT_KEY_ADDR ? req_peer_sockaddr(r) : req_client(r), k);
}

static void refuse(struct request *r, int status, const char *rule, uint64_t retry_ms, const char *text)
{
    req_set_refused_by(r, rule);
    char secs[24];
    snprintf(secs, sizeof secs, "%llu", (unsigned long long)(retry_ms + 999) / 1000);
    struct header retry_after = { "retry-after", secs };
    app_error_fields(r, status, text, &retry_after, retry_ms ? 1 : 0);
}

static int take_rules(struct request *r, const struct location *loc, double *delay)
{
    struct client_table *t = req_config(r)->clients;
    uint64_t longest = 0;
    for (uint8_t i = 0; i < loc->nlimit_req; i++) {
        struct limit_req_rule *rule = (struct limit_req_rule *)loc->limit_req[i];
        struct client_key k;
        if (!rule_key(t, r, rule->key, &k))
            continue;              /* a unix socket's peer: no address to limit */
        struct client_rate p = { rule->rate, rule->burst, rule->delay };
        uint64_t wait;
        enum client_verdict v = client_rate_take(t, &k, rule->id, &p, now_ms(r), &wait);
        if (v != CLIENT_PASS) {
            rule->refused++;
            refuse(r, loc->limit_status, rule->refused_by, v == CLIENT_OVER ? wait : 1000,
                   "too many requests from this client\n");
            return -1;
        }
        if (wait) {
            rule->delayed++;
            if (wait > longest)
                longest = wait;
        }
    }
    *delay = (double)longest / 1000;
    return 0;
}

static void release_client(struct request *r)
{
    struct client_table *t = req_config(r)->clients;
    struct client_key k;
    if (client_key_addr(t, req_client(r), &k))
        client_conn_release(t, &k, now_ms(r));
}

/* max_conns_per_client for a client behind a trusted proxy: this request is one of its
 * connections until it is released. */
static int count_client(struct request *r)
{
    const struct config *c = req_config(r);
    uint32_t limit = config_conns_per_client(c, req_listener(r));
    struct client_key k;
    if (!limit || !net_trusted_proxy(c, req_peer_sockaddr(r)) ||
        !client_key_addr(c->clients, req_client(r), &k))
        return 0;
    bool log_now;
    enum client_verdict v = client_conn_acquire(c->clients, &k, limit, now_ms(r), 60, &log_now);
    if (v == CLIENT_PASS) {
        if (req_at_release(r, release_client) == 0)
            return 0;
        release_client(r);         /* no memory to remember it: counted as nothing */
        return 0;
    }
    conns_refused[v == CLIENT_OVER ? 0 : 1]++;
    if (log_now)
        log_msg(LOG_WARN, "%s (behind a trusted proxy): request refused: the client has max_conns_per_client (%u) "
                "requests open already (logged once a minute per client)", req_peer_address(r), limit);
    int li = c->listen_of_slot[req_listener(r)];
    refuse(r, req_location(r)->limit_status, li >= 0 ? c->listen[li].max_conns_per_client_refused : "max_conns_per_client",
           0, "too many connections from this client\n");
    return -1;
}

int limits_check(struct request *r, const struct location *loc, double *delay)
{
    if (!req_config(r)->clients)
        return 0;                  /* (a configuration no daemon runs: the tests' harness) */
    if (delay && loc->nlimit_req) {
        if (take_rules(r, loc, delay))
            return -1;
        if (*delay > 0)
            return 0;              /* held first: counted as a connection once it goes on */
    }
    return count_client(r);
}
