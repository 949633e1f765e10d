/* Connections per client (max_conns_per_client): counted in the per-client table
 * (clienttable.c) across every worker, and checked as a connection is accepted - before
 * the TLS handshake, before anything of it is allocated - or, on a proxy_protocol
 * listener, as soon as its PROXY header has named the client, still before the
 * handshake.  A refused connection is closed at once: no handshake, no protocol, no
 * answer; counted by reason (h2park_limit_conns_refused_total) and logged at most once a
 * minute per client, so that a client hammering at its limit cannot flood the log.
 *
 * A peer in real_ip_from is a proxy that carries many clients: its connections are not
 * counted here.  Those clients are counted by request instead, once a request names
 * them (app/limits.c), as nginx's limit_conn counts the realip client.
 *
 * Invariant: a connection that was counted (conn->client_counted) has its count released
 * exactly once, as it closes, under the key it was counted with: its peer, which does not
 * change once counted, keyed by the table it was counted in (the process keeps one, whose
 * prefixes take a restart). */
#include <stdio.h>

#include "clienttable.h"
#include "core/conn.h"

#define REFUSAL_LOG_SECONDS 60

static uint64_t now_ms(const struct worker *w) { return (uint64_t)(ev_now(w->loop) * 1000); }

int connlimit_acquire(struct worker *w, unsigned slot, uint32_t limit, const struct sockaddr *sa)
{
    const struct config *cfg = w->cfg;
    struct client_key k;
    if (!cfg->clients || net_trusted_proxy(cfg, sa) || !client_key_addr(cfg->clients, sa, &k))
        return 0;
    bool log_now;
    enum client_verdict v = client_conn_acquire(cfg->clients, &k, limit, now_ms(w), REFUSAL_LOG_SECONDS, &log_now);
    if (v == CLIENT_PASS)
        return 1;
    char text[64];
    sockaddr_text(sa, text, sizeof text);
    int li = slot < MAX_LISTEN ? cfg->listen_of_slot[slot] : -1;
    const char *on = li >= 0 ? cfg->listen[li].text : "?";
    if (v == CLIENT_OVER) {
        counter_add(&w->n.conns_refused[REFUSED_OVER_LIMIT], 1);
        if (log_now)
            log_msg(LOG_WARN, "%s: refused on %s: it holds max_conns_per_client (%u) connections already (logged once "
                    "a minute per client)", text, on, limit);
    } else {
        counter_add(&w->n.conns_refused[REFUSED_TABLE_FULL], 1);
        log_rate_limited(LOG_WARN, &w->limit_full_logged, "%s: refused on %s: no room in the client table for it (a "
                         "bucket full of clients holding connections: limit_zone_size)", text, on);
    }
    return -1;
}

void connlimit_release(struct conn *c)
{
    struct client_key k;
    const struct config *cfg = c->w->cfg;
    if (cfg->clients && client_key_addr(cfg->clients, &c->peer.sa, &k))
        client_conn_release(cfg->clients, &k, now_ms(c->w));
    c->client_counted = false;
}
