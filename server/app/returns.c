/* A location's return (nginx's "return"), and https_redirect.
 *
 * A return is a status and a URL (3xx: Location) or a body, with nginx's variables:
 * $scheme, $host, $request_uri (the target as sent), $uri (the decoded path), $args and
 * $query_string (the query, without "?"), $is_args ("?" when there is a query),
 * $remote_addr and $server_port.  A status alone is answered like any error of the
 * location (its error page, if it has one).
 *
 * What a client sent never makes a Location that leaves the site, nor splits it: in a
 * URL every variable's value goes escaped as RFC 3986 asks (url_escape) - $uri is the
 * decoded path, so "%0d%0a" in a request is CR LF there and "%09" a tab, which browsers
 * drop ("/<TAB>/evil.example" is "//evil.example" to them) - and an expansion that starts
 * with "//" (a request for //evil.example through "return = 301 $request_uri") is
 * collapsed to one slash, since browsers take it as another host. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "config.h"

#define EXPANSION_MAX 8192

struct out {
    char *p;
    size_t len, cap;
    bool overflow;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->len + n >= o->cap) {
        o->overflow = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = 0;
}

static void put_str(struct out *o, const char *s) { put(o, s, strlen(s)); }

/* s as a URL carries it (url_escape): a Location holds no byte a client sent that a
 * browser would read otherwise - CR or LF ending the field, a tab or a backslash it
 * drops or turns into a slash. */
static void put_url(struct out *o, const char *s, bool decoded)
{
    size_t need = url_escape(o->p + o->len, o->cap - o->len, s, strlen(s), decoded);
    if (o->len + need >= o->cap) {
        o->overflow = true;
        o->p[o->len] = 0;
        return;
    }
    o->len += need;
}

static unsigned server_port(const struct request *r)
{
    const struct config *c = req_config(r);
    unsigned slot = req_listener(r);
    int i = slot < MAX_LISTEN ? c->listen_of_slot[slot] : -1;
    if (i < 0)
        return req_is_tls(r) ? 443 : 80;
    const struct sockaddr_storage *a = &c->listen[i].addr;
    return ntohs(a->ss_family == AF_INET ? ((const struct sockaddr_in *)a)->sin_port
                                         : ((const struct sockaddr_in6 *)a)->sin6_port);
}

/* The host a response names: the request's, else its site's first name. */
static const char *host_or_site(struct request *r, const char *host)
{
    if (host && *host)
        return host;
    const struct location *loc = req_location(r);
    return loc && loc->site->name ? loc->site->name : "localhost";
}

/* text with its variables' values; in a URL (url) what the request gave goes escaped. */
static void expand(struct request *r, const char *text, const char *host, const char *path, bool url, struct out *o)
{
    const char *target = req_target(r), *q = strchr(target, '?');
    for (const char *p = text; *p;) {
        if (*p != '$') {
            const char *d = strchr(p, '$');
            size_t n = d ? (size_t)(d - p) : strlen(p);
            put(o, p, n);
            p += n;
            continue;
        }
        bool brace = p[1] == '{';
        const char *n = p + 1 + brace, *e = n;
        while ((*e >= 'a' && *e <= 'z') || *e == '_')
            e++;
        size_t nl = (size_t)(e - n);
        if (!nl) {
            put(o, p++, 1);         /* a '$' on its own */
            continue;
        }
#define VAR(name) (nl == sizeof name - 1 && !memcmp(n, name, nl))
        char num[16];
        if (VAR("scheme"))
            put_str(o, req_is_tls(r) ? "https" : "http");
        else if (VAR("host"))
            put_str(o, host_or_site(r, host));
        else if (VAR("request_uri"))
            url ? put_url(o, target, false) : put_str(o, target);
        else if (VAR("uri"))
            url ? put_url(o, path, true) : put_str(o, path);
        else if (VAR("args") || VAR("query_string"))
            url ? put_url(o, q ? q + 1 : "", false) : put_str(o, q ? q + 1 : "");
        else if (VAR("is_args"))
            put_str(o, q ? "?" : "");
        else if (VAR("remote_addr"))
            put_str(o, req_peer_address(r));
        else if (VAR("server_port"))
            snprintf(num, sizeof num, "%u", server_port(r)), put_str(o, num);
#undef VAR
        p = e + (brace && *e == '}');
    }
}

/* A Location that starts with "//" or "/\\" names another host to a browser (which reads a
 * backslash as a slash): a run of them becomes one slash, in place. */
static const char *same_site(char *location)
{
    if (location[0] != '/')
        return location;
    size_t n = strspn(location, "/\\");
    location[n - 1] = '/';
    return location + n - 1;
}

static void redirect(struct request *r, int status, char *location)
{
    struct header h[] = { { "location", same_site(location) } };
    req_respond(r, status, h, 1, BODY_NONE);
}

void return_serve(struct request *r, const char *host, const char *path)
{
    const struct return_spec *ret = req_location(r)->ret;
    if (!ret->text)
        return app_error(r, ret->status);
    char buf[EXPANSION_MAX];
    struct out o = { buf, 0, sizeof buf, false };
    buf[0] = 0;
    expand(r, ret->text, host, path, ret->is_url, &o);
    if (o.overflow)
        return app_error_text(r, 500, "the return's expansion is too long\n");
    if (ret->is_url)
        return redirect(r, ret->status, buf);
    req_simple(r, ret->status, "text/plain; charset=utf-8", buf, o.len);
}

/* Permanent, and keeping the method (308, as Caddy does): a POST stays a POST. */
void https_redirect(struct request *r, const struct site *site, const char *host)
{
    char buf[EXPANSION_MAX];
    struct out o = { buf, 0, sizeof buf, false };
    buf[0] = 0;
    put_str(&o, "https://");
    put_str(&o, host && *host ? host : site->name ? site->name : "localhost");
    unsigned port = site->https_port;
    if (port != 443) {
        char num[16];
        snprintf(num, sizeof num, ":%u", port);
        put_str(&o, num);
    }
    const char *target = req_target(r);
    /* The target's own slashes and backslashes, after the authority, would begin a user
     * name or another host ("/\\@evil.example": host:port%5C@evil.example): one slash. */
    put_str(&o, "/");
    put_url(&o, target[0] == '/' ? target + strspn(target, "/\\") : "", false);
    if (o.overflow)
        return app_error(r, 414);
    redirect(r, 308, buf);
}
