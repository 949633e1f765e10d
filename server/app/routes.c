/* Routing: a request's site and location, their rules, then the location's handler.
 *
 * In order, each a step nginx users know from its phases:
 *   1. the site, by Host or :authority on the listener it came in on (sites.c); a host
 *      that is no valid host is a 400;
 *   2. over TLS, 421 Misdirected Request (RFC 9110 15.5.20) when the request is for a
 *      site other than the one its connection's SNI chose and the certificate the
 *      connection presented does not cover the request's host: a client that reused
 *      (coalesced) a connection for a name it should not have retries on a new one;
 *   3. the client, from a trusted proxy's header (realip.c);
 *   4. the location, by the decoded path (exact, then longest prefix);
 *   5. https_redirect for a cleartext request (before anything of the location, its
 *      headers included), then allow/deny (403; a built-in route
 *      the configuration did not place instead answers as if it were not there, so
 *      the path falls to the next location), dotfiles (403), the per-client limits
 *      (limits.c: limit_req, which may hold the request - routing then runs again once
 *      these frames are gone, without it - and max_conns_per_client behind a trusted
 *      proxy), WebSocket upgrades no handler here takes (400), the body limit (413), the
 *      response's bandwidth limit (limit_rate: what the location answers from here on,
 *      whatever answers it);
 *   6. the handler: static files, a return, or a built-in route (405 with Allow for a
 *      method it does not take).
 * The request carries its location from step 4 on (req_set_location), so the
 * location's response headers go with every answer, error pages included.  A built-in
 * route the configuration did not place answers only clients in builtin_routes_allow,
 * all but /-/healthz (what they tell - memory, connections, the heap - is the
 * operator's, and /-/echo and /-/delay hold handlers open); anyone else gets what the
 * path would be without it. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "config.h"
#include "upstream/upstream.h"

static const struct route *const tables[] = { builtin_routes, stats_routes, dashboard_routes };

void app_register_routes(void)
{
    static struct config_route all[16];
    static size_t n;
    if (n)
        return;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const struct route *rt = tables[t]; rt->path && n < 16; rt++)
            all[n++] = (struct config_route){ rt->name, rt->path, rt };
    config_use_routes(all, n);
}

static unsigned method_bit(const char *m)
{
    return !strcmp(m, "GET") ? M_GET : !strcmp(m, "HEAD") ? M_HEAD : !strcmp(m, "POST") ? M_POST : 0;
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

static const char *error_text(int status)
{
    switch (status) {
    case 400: return "bad request\n";
    case 403: return "forbidden\n";
    case 404: return "not found\n";
    case 413: return "request body too large\n";
    case 414: return "URI too long\n";
    case 421: return "misdirected request: this connection does not serve that host\n";
    case 431: return "request header fields too large\n";
    case 500: return "internal server error\n";
    case 501: return "not implemented\n";
    case 502: return "bad gateway\n";
    case 503: return "service unavailable\n";
    case 504: return "gateway timeout\n";
    case 508: return "loop detected\n";
    default: return status < 500 ? "client error\n" : "server error\n";
    }
}

void app_error_fields(struct request *r, int status, const char *text, const struct header *h, size_t n)
{
    const struct location *loc = req_location(r);
    for (uint16_t i = 0; loc && i < loc->nerrors; i++)
        if (loc->errors[i].status == status && static_serve_page(r, loc->errors[i].uri, status, h, n) == 0)
            return;
    if (!n) {
        reply_text(r, status, text);
        return;
    }
    struct header f[1 + 4] = { { "content-type", "text/plain; charset=utf-8" } };
    size_t k = 1, len = strlen(text);
    for (size_t i = 0; i < n && k < sizeof f / sizeof f[0]; i++)
        f[k++] = h[i];
    if (req_respond(r, status, f, k, (int64_t)len) == 0 && !req_is_head(r) && req_write(r, text, len) == 0)
        req_end(r);
}

void app_error_text(struct request *r, int status, const char *text) { app_error_fields(r, status, text, NULL, 0); }

void app_error(struct request *r, int status) { app_error_text(r, status, error_text(status)); }

/* Step 2: the site's answer may come on this connection (see the top). */
static bool misdirected(struct request *r, const struct site_table *t, const struct site *site, const char *host,
                        size_t hl)
{
    if (t->nsites < 2 || !hl || !req_is_tls(r))
        return false;
    const char *sni = req_tls_server_name(r);
    if (!sni)
        return false;              /* no SNI: the Host decides, as for cleartext */
    if (strlen(sni) == hl && !strncasecmp(sni, host, hl))
        return false;              /* the same name (the common case: no lookup) */
    return site_for_sni(t, sni) != site && !req_tls_certificate_covers(r, host, hl);
}

static bool builtin_allowed(const struct request *r, const struct config *cfg)
{
    uint8_t client[16];
    if (!net_address(req_client(r), client))
        return false;
    for (uint16_t i = 0; i < cfg->nbuiltin_allow; i++)
        if (net_contains(&cfg->builtin_allow[i].net, client))
            return true;
    return false;
}

static bool client_allowed(const struct request *r, const struct location *loc)
{
    uint8_t client[16];
    return net_address(req_client(r), client) && access_allows(loc->access, loc->naccess, client);
}

/* An answer given while routing: nothing is left to run. */
#define answered(call) ((call), (const struct route *)NULL)

/* A body past the location's limit, once the handler is done with the request. */
static void body_checked(struct request *r)
{
    if (req_body_too_large(r)) {
        if (!req_status(r))
            app_error(r, 413);
        else
            req_reset(r);          /* answered already: the exchange is cut short */
    }
}

/* The location's authentication runs once route_request's frame is gone (it may wait
 * long, parked): route_request returns this for it, and route_authorized goes on. */
static const struct route auth_gate = { "auth", NULL, 0, NULL, false };

static inline __attribute__((always_inline)) const struct route *serve_location(struct request *r,
    const struct location *loc, const char *host, const char *path);

/* The request's site and location, found with its host and path in buffers on this
 * frame (2.3 KiB), and every answer that needs them.  A built-in route is returned
 * instead, to run once this frame is gone: its handler may wait long, and a parked
 * handler keeps every live frame below its own (/-/delay parks in 352 bytes, not 2.7 KiB). */
static PARKED_APART const struct route *route_request(struct request *r, double *delay)
{
    const struct config *cfg = req_config(r);
    const struct site_table *t = config_sites_of(cfg, req_listener(r));
    char host[256], path[2048];
    host[0] = 0;
    /* With one site the host chooses nothing: it is checked (by HTTP/1.1's front end as
     * it read Host), and laid out only for an answer that names it (a redirect, a return). */
    bool one_site = t->nsites <= 1;
    int hl = req_host_length(r);
    if (hl < 0)
        return answered(reply_text(r, 400, "bad request: the host is not a host name or address\n"));
    if (!one_site)
        host_lower(req_authority(r), (size_t)hl, host);
    const struct site *site = one_site ? t->dflt : site_for_host(t, host, (size_t)hl);
    if (misdirected(r, t, site, host, (size_t)hl))
        return answered(app_error(r, 421));
    if (cfg->nreal_ip_from && delay && realip_apply(r))   /* (once: a held request keeps its client) */
        return answered(app_error(r, 503));
    bool dotted;
    int pl = path_decode(req_target(r), path, sizeof path - 16, &dotted);
    bool bad_path = pl < 0;
    if (bad_path)
        path[0] = '/', path[1] = 0, pl = 1;    /* matched as "/", answered 404 below */
    const struct location *loc = location_for_path(site, path, (size_t)pl, false);
    if (loc->implicit && loc->handler == HANDLER_BUILTIN && !loc->route->open_to_all && !builtin_allowed(r, cfg))
        loc = location_for_path(site, path, (size_t)pl, true);   /* as if the route were not there */
    if (loc->naccess && loc->implicit && !client_allowed(r, loc))
        loc = location_for_path(site, path, (size_t)pl, true);
    /* Before the location is the request's: the redirect is not the site's answer and
     * carries none of its headers (as nginx's separate port-80 server would not). */
    if ((site->https_redirect || loc->handler == HANDLER_RETURN) && one_site && hl)
        host_lower(req_authority(r), (size_t)hl, host);
    if (site->https_redirect && !req_is_tls(r))
        return answered(https_redirect(r, site, host));
    req_set_location(r, loc);
    if (bad_path)
        return answered(app_error(r, 404));  /* a path that names nothing under any root */
    if (loc->naccess && !client_allowed(r, loc))
        return answered(app_error(r, 403));
    if (loc->dotfiles == DOTFILES_DENY && dotted && path_has_dotfile(path))
        return answered(app_error(r, 403));
    /* nginx's order: the limits before authentication, so a flood of guessed passwords is
     * limited before any is checked. */
    if (loc->limits && (limits_check(r, loc, delay) || (delay && *delay > 0)))
        return NULL;               /* refused, or held: app_handle waits, then routes it again */
    if (loc->auth)
        return &auth_gate;
    return serve_location(r, loc, host, path);
}

/* Step 5's rest and step 6, for the request's location: also after its authentication. */
static inline __attribute__((always_inline)) const struct route *serve_location(struct request *r,
    const struct location *loc, const char *host, const char *path)
{
    /* A WebSocket handshake where nothing takes it: refused, not served as a GET
     * (RFC 6455 4.2.1: an error status such as 400).  Over HTTP/2 it is an extended
     * CONNECT (RFC 8441), and so is any other protocol's: only the proxy takes one - a
     * 2xx from anything else would tell the client its tunnel is open. */
    if (loc->handler != HANDLER_PROXY) {
        const char *upgrade = req_known(r, KF_UPGRADE), *m = req_method(r);
        if (upgrade && http_list_has(upgrade, "websocket") && http_list_has(req_known(r, KF_CONNECTION), "upgrade"))
            return answered(app_error_text(r, 400, "no WebSocket endpoint here\n"));
        if (m[0] == 'C' && !strcmp(m, "CONNECT")) {   /* an HTTP/2 extended one: the others never get here */
            const char *protocol = req_known(r, KF_PROTOCOL);
            if (protocol && !strcmp(protocol, "websocket"))
                return answered(app_error_text(r, 400, "no WebSocket endpoint here\n"));
            return answered(method_not_allowed(r, loc->handler == HANDLER_BUILTIN ? loc->route->methods
                                                  : loc->handler == HANDLER_RETURN  ? M_GET | M_HEAD | M_POST
                                                                                    : M_GET | M_HEAD));
        }
    }
    if (loc->max_body && req_limit_body(r, loc->max_body))
        return answered(app_error(r, 413));
    if (loc->limit_rate) {
        if (req_limit_rate(r, loc->limit_rate, loc->limit_rate_after))
            return answered(app_error(r, 503));   /* no memory: never served as if unlimited */
        metrics_rate_limited();
    }
    switch (loc->handler) {
    case HANDLER_PROXY:
        return &proxy_pass_route;   /* it may wait long: run once these frames are gone */
    case HANDLER_BUILTIN:
        if (!(loc->route->methods & method_bit(req_method(r))))
            return answered(method_not_allowed(r, loc->route->methods));
        return loc->route;
    case HANDLER_RETURN:
        return_serve(r, host, path);
        break;
    default:
        static_serve(r, loc, path);
    }
    if (loc->max_body)
        body_checked(r);           /* (no limit, nothing past it) */
    return NULL;
}

/* A request its location's authentication let through: its path and host laid out again
 * (the first frame that held them is gone), and served. */
static PARKED_APART const struct route *route_authorized(struct request *r)
{
    char host[256], path[2048];
    bool dotted;
    path_decode(req_target(r), path, sizeof path - 16, &dotted);   /* (one that failed was a 404) */
    int hl = req_host_length(r);
    host[0] = 0;
    if (hl > 0)
        host_lower(req_authority(r), (size_t)hl, host);
    return serve_location(r, req_location(r), host, path);
}

/* nginx's satisfy all: auth_basic, then auth_request; a location an auth_request names
 * answers only its subrequests (nginx's internal). */
static bool authorized(struct request *r, const struct auth_conf *a)
{
    if (a->internal)
        return app_error(r, 404), false;
    return (!a->challenge || auth_basic_allows(r, a)) && (!a->request || auth_request_allows(r, a));
}

void app_handle(struct request *r)
{
    double delay = 0;
    const struct route *rt = route_request(r, &delay);
    if (delay > 0) {               /* limit_req holds it: waiting parks like any wait */
        req_sleep(r, delay);
        rt = route_request(r, NULL);
    }
    if (rt == &auth_gate)
        rt = authorized(r, req_location(r)->auth) ? route_authorized(r) : NULL;
    if (rt) {
        rt->handler(r);
        body_checked(r);
    }
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
    proxy_pass_init();
    app_register_routes();
    request_set_handler(app_handle);
    request_set_logger(request_ended);
    stats_init();
    mime_types_load("/etc/mime.types");
}

void app_configure(const struct config *c, struct ev_loop *loop)
{
    static_configure();
    upstream_configure(c, loop);
}

void app_tick(int worker, double now, const struct worker_counters *n, const struct config *cfg)
{
    static_sweep(now);
    upstream_tick(now);
    dashboard_sample(worker, now, n, cfg);
}

void reply_text(struct request *r, int status, const char *text)
{
    req_simple(r, status, "text/plain; charset=utf-8", text, strlen(text));
}
