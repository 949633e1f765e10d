/* Routing: the route tables of the modules, then the static files.
 *
 * A path that names a route answers 405 with Allow for a method the route does not take;
 * the built-in routes go away with builtin_routes = off, and then their paths are looked
 * up as files like any other.  They do the same for a client outside
 * builtin_routes_allow (the PROXY header's address where there is one), all but
 * /-/healthz: what they tell - memory, connections, the heap - is the operator's, and
 * /-/echo and /-/delay hold handlers open. */
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "config.h"
#include "upstream/upstream.h"

static const struct route *const tables[] = { builtin_routes, stats_routes, dashboard_routes };
/* The bytes the route paths have second ('-' of "/-/..." and 'm' of "/metrics"), set
 * once by app_init: a target that has none of them skips the tables at once. */
static bool route_second_byte[256];

static unsigned method_bit(const char *m)
{
    return !strcmp(m, "GET") ? M_GET : !strcmp(m, "HEAD") ? M_HEAD : !strcmp(m, "POST") ? M_POST : 0;
}

static bool path_is(const char *target, const char *want)
{
    if (target[0] != want[0] || (want[0] && target[1] != want[1]))
        return false;               /* most targets leave every route here, unmeasured */
    size_t l = strlen(want);
    return !strncmp(target, want, l) && (target[l] == 0 || target[l] == '?');
}

static void method_not_allowed(struct request *r, unsigned methods)
{
    char allow[32] = "";
    static const char *const names[] = { "GET", "HEAD", "POST" };
    for (int i = 0; i < 3; i++)
        if (methods & 1u << i)
            snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s", allow[0] ? ", " : "", names[i]);
    struct header h[] = { { "allow", allow } };
    req_respond(r, 405, h, 1, BODY_NONE);
}

void app_handle(struct request *r)
{
    const char *target = req_target(r);
    bool maybe = target[0] && route_second_byte[(unsigned char)target[1]];
    for (size_t t = 0; maybe && cfg.builtin_routes && t < sizeof tables / sizeof tables[0]; t++)
        for (const struct route *rt = tables[t]; rt->path; rt++) {
            if (!path_is(target, rt->path))
                continue;
            if (!rt->open_to_all && !cidr_match(cfg.builtin_allow, cfg.nbuiltin_allow, req_peer_sockaddr(r)))
                return static_serve(r);    /* as if the route were not there */
            if (!(rt->methods & method_bit(req_method(r))))
                return method_not_allowed(r, rt->methods);
            return rt->handler(r);
        }
    if (proxy_pass_wants(target))
        return proxy_pass_handle(r);
    static_serve(r);
}

/* Every request, as its exchange ends. */
static void request_ended(const struct request *r)
{
    metrics_record(r);
    access_log_request(r);
}

/* Once, before the workers start. */
void app_init(void)
{
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const struct route *rt = tables[t]; rt->path; rt++)
            if (rt->path[0])
                route_second_byte[(unsigned char)rt->path[1]] = true;
    request_set_handler(app_handle);
    request_set_logger(request_ended);
    stats_init();
    mime_types_load("/etc/mime.types");
    static_configure();
}

void app_configure(void)
{
    static_configure();
    upstream_configure();
}

void app_tick(int worker, double now, const struct worker_counters *n)
{
    static_sweep(now);
    upstream_tick(now);
    dashboard_sample(worker, now, n);
}

void reply_text(struct request *r, int status, const char *text)
{
    req_simple(r, status, "text/plain; charset=utf-8", text, strlen(text));
}
