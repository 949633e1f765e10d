/* The reverse proxy's part of the configuration: its keys (proxy_pass and the proxy_*
 * keys in a location, site or the top level; server, balance, keepalive,
 * keepalive_timeout and health_check in "upstream NAME {"), their setters and values,
 * their merge into a location, and the upstream groups and proxy_conf each proxied
 * location gets - added to the format by config_add_module (config_tree.h).
 *
 *   proxy_pass = http://127.0.0.1:8081          one server (a name is resolved now)
 *   proxy_pass = http://unix:/run/app.sock:     a unix socket (nginx's spelling)
 *   proxy_pass = http://backend/app/            a group; /app/ replaces the location's path
 *   proxy_pass = https://app.internal:8443      TLS to the upstream (port 443 by default)
 *   proxy_pass = h2c://grpc_backend             HTTP/2 with prior knowledge (nginx's grpc://)
 *   proxy_pass = h2://grpc_backend              HTTP/2 over TLS, by ALPN (nginx's grpcs://)
 *   server = 127.0.0.1:8081 weight=3 max_fails=1 fail_timeout=10s max_conns=100
 *   server = 127.0.0.1:8082 backup
 *
 * Each is the nginx directive an operator knows, with nginx's defaults.  Whether
 * proxy_pass names a group that exists is checked as the tree is built (proxy_for), naming
 * the line of proxy_pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "config.h"
#include "config_tree.h"

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return CONFIG_ERROR;
}

static int seconds(const char *v, double *out) { return config_parse_duration(v, out); }

static int count(const char *v, unsigned long long max, uint32_t *out)
{
    unsigned long long n;
    if (config_parse_uint(v, max, &n))
        return -1;
    *out = (uint32_t)n;
    return 0;
}

/* "HOST:PORT", "[V6]:PORT", "HOST" (port default_port) or "unix:/path" into s. */
static int parse_address(const char *text, const char *default_port, struct upstream_server_conf *s, char *err,
                         size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!strncmp(text, "unix:", 5)) {
        struct sockaddr_un *un = (struct sockaddr_un *)&s->addr;
        const char *path = text + 5;
        if (path[0] != '/' || strlen(path) >= sizeof un->sun_path)
            return fail(err, errlen, "'%s': a unix socket needs an absolute path of at most 107 bytes%s", text, "");
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        s->addrlen = (socklen_t)sizeof *un;
        snprintf(s->text, sizeof s->text, "%s", text);
        return CONFIG_OK;
    }
    char host[256], port[16];
    snprintf(port, sizeof port, "%s", default_port);
    const char *colon = strrchr(text, ':'), *h = text;
    size_t hl = strlen(text);
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || (close[1] && close[1] != ':'))
            return fail(err, errlen, "'%s' is not [IPV6]:PORT%s", text, "");
        h = text + 1;
        hl = (size_t)(close - h);
        colon = close[1] ? close + 1 : NULL;
    } else if (colon) {
        hl = (size_t)(colon - text);
    }
    if (!hl || hl >= sizeof host)
        return fail(err, errlen, "'%s': no host%s", text, "");
    memcpy(host, h, hl);
    host[hl] = 0;
    if (colon) {
        uint32_t n;
        if (count(colon + 1, 65535, &n) || !n)
            return fail(err, errlen, "'%s': bad port '%s'", text, colon + 1);
        snprintf(port, sizeof port, "%u", n);
    }
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG }, *res = NULL;
    int e = getaddrinfo(host, port, &hints, &res);
    if (e || !res) {
        if (res)
            freeaddrinfo(res);
        return fail(err, errlen, "'%s': cannot resolve: %s", host, e ? gai_strerror(e) : "no address");
    }
    memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
    s->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    char num[INET6_ADDRSTRLEN] = "?";
    if (s->addr.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&s->addr)->sin6_addr, num, sizeof num);
        snprintf(s->text, sizeof s->text, "[%s]:%s", num, port);
    } else {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&s->addr)->sin_addr, num, sizeof num);
        snprintf(s->text, sizeof s->text, "%s:%s", num, port);
    }
    return CONFIG_OK;
}

/* Where path (from the configuration) has a byte a request line cannot carry as it is: the
 * offset, or -1.  A path is RFC 3986's pchars and '/', with a query (query_too) '?' too; a
 * '%' begins an escape of two hex digits.  Anything else - a space, a control byte, '#',
 * a byte past ASCII - would be copied into the line upstream, splitting or ending it. */
static long bad_path_byte(const char *path, bool query_too)
{
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if (*c == '%' ? !(isxdigit(c[1]) && isxdigit(c[2]))
                      : !(isalnum(*c) || strchr("-._~!$&'()*+,;=:@/", *c) || (query_too && *c == '?')))
            return (long)(c - (const unsigned char *)path);
    }
    return -1;
}

/* The byte at path[at], said so that no byte can pass for another (or for a line end). */
static const char *byte_named(const char *path, long at, char *buf, size_t cap)
{
    unsigned char b = (unsigned char)path[at];
    if (b == '%')
        snprintf(buf, cap, "a '%%' without two hex digits after it, at byte %ld", at + 1);
    else if (b > 0x20 && b < 0x7f)
        snprintf(buf, cap, "'%c' at byte %ld: write it as %%%02X", b, at + 1, b);
    else
        snprintf(buf, cap, "the byte 0x%02x at byte %ld: write it as %%%02X", b, at + 1, b);
    return buf;
}

/* A Host field's value as the configuration gives it (proxy_set_host, health_check's
 * host=): a host name or address and perhaps a port, nothing a field could not carry. */
bool upstream_host_ok(const char *host)
{
    size_t n = strlen(host);
    if (!n || n > 255)
        return false;
    for (const unsigned char *c = (const unsigned char *)host; *c; c++)
        if (!(isalnum(*c) || strchr("-._~!$&'()*+;=:[]%", *c)))
            return false;
    return true;
}

void upstream_server_defaults(struct upstream_server_conf *s)
{
    s->weight = 1;
    s->max_fails = 1;          /* nginx's defaults */
    s->fail_timeout = 10;
}

/* The host part of an address as written (before it is resolved): the name a TLS
 * upstream's certificate is checked against by default, as nginx's $proxy_host. */
static void host_of(const char *addr, char *host, size_t cap)
{
    if (!strncmp(addr, "unix:", 5)) {
        snprintf(host, cap, "localhost");
        return;
    }
    const char *end = addr[0] == '[' ? strchr(addr, ']') : strrchr(addr, ':');
    size_t n = end ? (size_t)(end - addr) : strlen(addr);
    if (addr[0] == '[')
        addr++, n--;
    snprintf(host, cap, "%.*s", (int)n, addr);
}

/* proxy_pass = SCHEME://WHERE[/URI]: WHERE is an address, unix:/path: or a group name; the
 * scheme says *tls and *h2: http (neither), https (tls), h2c (h2: HTTP/2 with prior
 * knowledge, nginx's grpc_pass grpc:// and Caddy's versions h2c) or h2 (both: HTTP/2 over
 * TLS as ALPN names it, nginx's grpcs://); host WHERE's host as written. */
int proxy_parse_pass(const char *value, bool *tls, char *host, size_t host_cap, char *group, size_t group_cap,
                     struct upstream_server_conf *direct, char *uri, size_t uri_cap, bool *h2, char *err,
                     size_t errlen)
{
    static const struct { const char *prefix; bool tls, h2; } schemes[] = {
        { "http://", false, false }, { "https://", true, false }, { "h2c://", false, true }, { "h2://", true, true },
    };
    group[0] = uri[0] = host[0] = 0;
    const char *where = NULL, *slash;
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes && !where; i++)
        if (!strncmp(value, schemes[i].prefix, strlen(schemes[i].prefix))) {
            where = value + strlen(schemes[i].prefix);
            *tls = schemes[i].tls;
            *h2 = schemes[i].h2;
        }
    if (!where)
        return fail(err, errlen, "proxy_pass '%s': expected SCHEME://ADDRESS[/PATH] or SCHEME://UPSTREAM[/PATH], "
                    "SCHEME http, https, h2c or h2%s", value, "");
    char addr[200];
    if (!strncmp(where, "unix:", 5)) {
        /* nginx: http://unix:/path/to.sock:/uri - the socket's path ends at the next colon */
        const char *end = strchr(where + 5, ':');
        size_t n = end ? (size_t)(end - where) : strlen(where);
        slash = end ? end + 1 : where + n;
        if (n >= sizeof addr)
            return fail(err, errlen, "proxy_pass '%s': socket path too long%s", value, "");
        memcpy(addr, where, n);
        addr[n] = 0;
    } else {
        slash = strchr(where, '/');
        size_t n = slash ? (size_t)(slash - where) : strlen(where);
        if (!n || n >= sizeof addr)
            return fail(err, errlen, "proxy_pass '%s': no address%s", value, "");
        memcpy(addr, where, n);
        addr[n] = 0;
        if (!slash)
            slash = where + n;
    }
    if (*slash && *slash != '/')
        return fail(err, errlen, "proxy_pass '%s': the path must start with '/'%s", value, "");
    if (strlen(slash) >= uri_cap)
        return fail(err, errlen, "proxy_pass '%s': path too long%s", value, "");
    long bad = bad_path_byte(slash, false);
    char named[80];
    if (bad >= 0)
        return fail(err, errlen, "proxy_pass '%s': the path cannot go in a request line as it is: %s", value,
                    byte_named(slash, bad, named, sizeof named));
    snprintf(uri, uri_cap, "%s", slash);
    /* A bare name without a port is a group (an upstream section, before or after);
     * anything else is one server's address. */
    bool name = strncmp(addr, "unix:", 5) && !strchr(addr, ':') && !strchr(addr, '[');
    struct in_addr ignored;
    host_of(addr, host, host_cap);
    if (name && strlen(addr) < group_cap && inet_pton(AF_INET, addr, &ignored) != 1 && strcmp(addr, "localhost")) {
        snprintf(group, group_cap, "%s", addr);
        return CONFIG_OK;
    }
    if (parse_address(addr, *tls ? "443" : "80", direct, err, errlen))
        return CONFIG_ERROR;
    upstream_server_defaults(direct);
    return CONFIG_OK;
}

/* health_check = PATH|tcp [interval=T] [timeout=T] [fails=N] [passes=N] [host=NAME]: the
 * defaults are nginx Plus's health_check's (5s, 1 and 1) with Caddy's 5s timeout.  The
 * path and host are written to path and host (cap bytes each), which h points to. */
int upstream_parse_health_check(const char *value, struct health_check *h, char *path, char *host, size_t cap,
                                char *err, size_t errlen)
{
    static const char usage[] = "health_check: expected PATH or tcp, then [interval=T] [timeout=T] [fails=N] "
                                "[passes=N] [host=NAME]";
    char copy[512];
    if (strlen(value) >= sizeof copy)
        return fail(err, errlen, "health_check '%.100s...': too long%s", value, "");
    snprintf(copy, sizeof copy, "%s", value);
    *h = (struct health_check){ .interval = 5, .timeout = 5, .fails = 1, .passes = 1 };
    char *save = NULL, *what = strtok_r(copy, " \t", &save);
    if (!what || (strcmp(what, "tcp") && what[0] != '/'))
        return fail(err, errlen, "%s%s", usage, "");
    if (what[0] == '/') {
        long bad = bad_path_byte(what, true);
        char named[80];
        if (bad >= 0)
            return fail(err, errlen, "health_check: '%.100s' cannot go in a request line as it is: %s", what,
                        byte_named(what, bad, named, sizeof named));
        if (strlen(what) >= cap)
            return fail(err, errlen, "health_check: the path '%.60s...' is too long%s", what, "");
        snprintf(path, cap, "%s", what);
        h->path = path;
    }
    for (char *opt; (opt = strtok_r(NULL, " \t", &save));) {
        char *eq = strchr(opt, '=');
        if (eq)
            *eq = 0;
        const char *v = eq ? eq + 1 : "";
        int bad;
        if (!eq) {
            bad = 2;
        } else if (!strcmp(opt, "host")) {
            bad = strlen(v) >= cap || !upstream_host_ok(v);
            if (!bad) {
                snprintf(host, cap, "%s", v);
                h->host = host;
            }
        } else {
            bad = !strcmp(opt, "fails")      ? count(v, 1000, &h->fails) || !h->fails
                  : !strcmp(opt, "passes")   ? count(v, 1000, &h->passes) || !h->passes
                  : !strcmp(opt, "interval") ? seconds(v, &h->interval) || h->interval < 0.1 || h->interval > 86400
                  : !strcmp(opt, "timeout")  ? seconds(v, &h->timeout) || h->timeout < 0.01 || h->timeout > 3600
                                             : 2;
        }
        if (bad == 2)
            return fail(err, errlen, "health_check: unknown option '%s' (interval, timeout, fails, passes, host)%s", opt, "");
        if (bad)
            return fail(err, errlen, "health_check: bad value '%s' for %s", v, opt);
    }
    return CONFIG_OK;
}

/* server = ADDRESS [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N] [backup] */
int upstream_parse_server(const char *value, struct upstream_server_conf *s, char *err, size_t errlen)
{
    char copy[512];
    if (strlen(value) >= sizeof copy)
        return fail(err, errlen, "server '%.100s...': too long%s", value, "");
    snprintf(copy, sizeof copy, "%s", value);
    char *save = NULL, *addr = strtok_r(copy, " \t", &save);
    if (!addr)
        return fail(err, errlen, "server: expected ADDRESS [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N] "
                    "[backup]%s%s", "", "");
    if (parse_address(addr, "80", s, err, errlen))
        return CONFIG_ERROR;
    upstream_server_defaults(s);
    for (char *opt; (opt = strtok_r(NULL, " \t", &save));) {
        char *eq = strchr(opt, '=');
        if (!strcmp(opt, "backup")) {
            s->backup = true;
            continue;
        }
        if (!eq)
            return fail(err, errlen, "server: unknown option '%s' (weight, max_fails, fail_timeout, max_conns, backup)%s", opt, "");
        *eq = 0;
        const char *v = eq + 1;
        int bad = !strcmp(opt, "weight")         ? count(v, 1000, &s->weight) || !s->weight
                  : !strcmp(opt, "max_fails")    ? count(v, 1000000, &s->max_fails)
                  : !strcmp(opt, "max_conns")    ? count(v, 1000000, &s->max_conns)
                  : !strcmp(opt, "fail_timeout") ? seconds(v, &s->fail_timeout)
                                                 : 2;
        if (bad == 2)
            return fail(err, errlen, "server: unknown option '%s' (weight, max_fails, fail_timeout, max_conns, backup)%s", opt, "");
        if (bad)
            return fail(err, errlen, "server: bad value '%s' for %s", v, opt);
    }
    return CONFIG_OK;
}

/* ---- the keys' setters ---- */

static int set_proxy_pass(struct setter_args *a)
{
    if (a->s->at[K_RETURN].src || a->s->at[K_HANDLER].src)
        return WHY("proxy_pass and %s both given", a->s->at[K_RETURN].src ? "return" : "handler");
    char group[64], uri[256], host[256];
    struct upstream_server_conf direct;
    if (proxy_parse_pass(a->value, &a->s->pass_tls, host, sizeof host, group, sizeof group, &direct, uri, sizeof uri,
                         &a->s->pass_h2, a->why, a->whylen))
        return -1;
    a->s->pass_host = config_strdup(a->c, host);
    a->s->pass_group = config_strdup(a->c, group);
    a->s->pass_direct = NULL;
    if (!group[0]) {
        a->s->pass_direct = config_alloc(a->c, sizeof direct);
        *a->s->pass_direct = direct;
    }
    a->s->pass_uri = config_strdup(a->c, uri);
    a->s->pass_from = a->from;
    return 0;
}

static int set_proxy_timeout(struct setter_args *a, int which, const char *key)
{
    double d;
    if (config_parse_duration(a->value, &d) || d <= 0)
        return WHY("%s: '%s' is not a duration (like 10s, 250ms, 5m; at most 30 days)", key, a->value);
    a->s->proxy_timeouts[which] = d;
    return 0;
}
static int set_proxy_connect_timeout(struct setter_args *a) { return set_proxy_timeout(a, 0, "proxy_connect_timeout"); }
static int set_proxy_read_timeout(struct setter_args *a) { return set_proxy_timeout(a, 1, "proxy_read_timeout"); }
static int set_proxy_send_timeout(struct setter_args *a) { return set_proxy_timeout(a, 2, "proxy_send_timeout"); }

static int set_proxy_tries(struct setter_args *a)
{
    unsigned long long n;
    if (config_parse_uint(a->value, 100, &n))
        return WHY("proxy_next_upstream_tries: '%s' is not a count (0: every server)", a->value);
    a->s->proxy_tries = (uint32_t)n;
    return 0;
}

static int set_proxy_host(struct setter_args *a)
{
    if (!upstream_host_ok(a->value))
        return WHY("proxy_set_host: '%.100s' is not a host (a name or an address, perhaps with a port; at most 255 "
                   "bytes)", a->value);
    a->s->proxy_host = config_strdup(a->c, a->value);
    return 0;
}

static int set_ssl_verify(struct setter_args *a) { return config_set_flag(a, &a->s->ssl.verify, "proxy_ssl_verify"); }
static int set_ssl_server_name(struct setter_args *a)
{
    return config_set_flag(a, &a->s->ssl.server_name, "proxy_ssl_server_name");
}
static int set_ssl_session_reuse(struct setter_args *a)
{
    return config_set_flag(a, &a->s->ssl.session_reuse, "proxy_ssl_session_reuse");
}
static int set_ssl_trusted(struct setter_args *a)
{
    a->s->ssl.trusted_from = a->from;
    return config_set_path(a, &a->s->ssl.trusted, "proxy_ssl_trusted_certificate");
}
static int set_ssl_certificate(struct setter_args *a)
{
    a->s->ssl.cert_from = a->from;
    return config_set_path(a, &a->s->ssl.cert, "proxy_ssl_certificate");
}
static int set_ssl_certificate_key(struct setter_args *a)
{
    a->s->ssl.key_from = a->from;
    return config_set_path(a, &a->s->ssl.key, "proxy_ssl_certificate_key");
}
/* A DNS name or an IP address: what the certificate is checked against. */
static int set_ssl_name(struct setter_args *a)
{
    size_t n = strlen(a->value);
    bool ok = n && n < 254;
    for (const char *c = a->value; *c && ok; c++)
        ok = isalnum((unsigned char)*c) || strchr("-._:", *c);
    if (!ok)
        return WHY("proxy_ssl_name: '%.100s' is not a host name or an IP address", a->value);
    a->s->ssl.name = config_strdup(a->c, a->value);
    return 0;
}

static int set_server(struct setter_args *a)
{
    struct upstream_server_conf srv;
    if (upstream_parse_server(a->value, &srv, a->why, a->whylen))
        return -1;
    if (a->s->servers.n == MAX_UPSTREAM_SERVERS)
        return WHY("server: too many servers in one upstream (at most %d)", MAX_UPSTREAM_SERVERS);
    *(struct upstream_server_conf *)config_push(a->c, &a->s->servers, sizeof srv) = srv;
    return 0;
}

static int set_balance(struct setter_args *a)
{
    if (!strcmp(a->value, "round_robin"))
        return a->s->balance = BALANCE_ROUND_ROBIN, 0;
    if (!strcmp(a->value, "least_conn"))
        return a->s->balance = BALANCE_LEAST_CONN, 0;
    return WHY("balance: '%s' is not round_robin or least_conn", a->value);
}

static int set_keepalive(struct setter_args *a)
{
    unsigned long long n;
    if (config_parse_uint(a->value, 100000, &n))
        return WHY("keepalive: '%s' is not a count (0 keeps none)", a->value);
    a->s->keepalive = (uint32_t)n;
    return 0;
}

static int set_keepalive_timeout(struct setter_args *a)
{
    double d;
    if (config_parse_duration(a->value, &d) || d <= 0)
        return WHY("keepalive_timeout: '%s' is not a duration (like 10s, 250ms, 5m; at most 30 days)", a->value);
    a->s->keepalive_timeout = d;
    return 0;
}

static int set_health_check(struct setter_args *a)
{
    struct health_check h;
    char path[256], host[256];
    if (upstream_parse_health_check(a->value, &h, path, host, sizeof path, a->why, a->whylen))
        return -1;
    if (h.path)
        h.path = config_strdup(a->c, h.path);
    if (h.host)
        h.host = config_strdup(a->c, h.host);
    h.from = a->from;
    a->s->health = config_alloc(a->c, sizeof h);
    *a->s->health = h;
    return 0;
}

/* ---- the proxy's part of the configuration (config_tree.h) ---- */

static void clear_servers(struct scope *s) { s->servers = (struct vec){ 0 }; }

static void top_defaults(struct scope *t)
{
    t->proxy_timeouts[0] = t->proxy_timeouts[1] = t->proxy_timeouts[2] = 60;   /* nginx's defaults */
    t->ssl.verify = t->ssl.server_name = true;   /* Go's, Caddy's and h2o's (nginx: both off) */
    t->ssl.session_reuse = true;                 /* nginx's and Go's */
}

static void merge(struct config *c, struct merged *m, const struct scope *s)
{
    (void)c;
    const struct origin *at = s->at;
    if (at[K_PROXY_PASS].src) {
        m->handler = HANDLER_PROXY;
        m->pass = s;
        m->route = NULL;
        m->ret = NULL;
    }
    for (int i = 0; i < 3; i++)
        if (at[K_PROXY_CONNECT_TIMEOUT + i].src || s->kind == SCOPE_TOP)
            m->proxy_timeouts[i] = s->proxy_timeouts[i];
    if (at[K_PROXY_NEXT_UPSTREAM_TRIES].src)
        m->proxy_tries = s->proxy_tries;
    if (at[K_PROXY_SET_HOST].src)
        m->proxy_host = s->proxy_host;
    bool top = s->kind == SCOPE_TOP;
    if (at[K_PROXY_SSL_VERIFY].src || top)
        m->ssl.verify = s->ssl.verify;
    if (at[K_PROXY_SSL_SERVER_NAME].src || top)
        m->ssl.server_name = s->ssl.server_name;
    if (at[K_PROXY_SSL_SESSION_REUSE].src || top)
        m->ssl.session_reuse = s->ssl.session_reuse;
    if (at[K_PROXY_SSL_NAME].src)
        m->ssl.name = s->ssl.name;
    if (at[K_PROXY_SSL_TRUSTED_CERTIFICATE].src) {
        m->ssl.trusted = s->ssl.trusted;
        m->ssl.trusted_from = s->ssl.trusted_from;
    }
    if (at[K_PROXY_SSL_CERTIFICATE].src) {
        m->ssl.cert = s->ssl.cert;
        m->ssl.cert_from = s->ssl.cert_from;
    }
    if (at[K_PROXY_SSL_CERTIFICATE_KEY].src) {
        m->ssl.key = s->ssl.key;
        m->ssl.key_from = s->ssl.key_from;
    }
}

static int add_upstream_server(struct config *c, const struct upstream_server_conf *srv, const char *group,
                               const struct scope *pool)
{
    if (c->nupstream_servers == MAX_UPSTREAM_TOTAL)
        return -1;
    struct upstream_server_conf *d = &c->upstream_servers[c->nupstream_servers];
    *d = *srv;
    d->index = (uint16_t)c->nupstream_servers++;
    d->group = group;
    d->keepalive = pool ? pool->keepalive : 32;
    d->keepalive_timeout = pool ? pool->keepalive_timeout : 60;
    return d->index;
}

/* The upstream sections, as groups: each needs a server that is not a backup. */
static void build_upstreams(struct config *c, const struct scope *top, struct config_errors *e)
{
    c->upstream_servers = config_alloc(c, MAX_UPSTREAM_TOTAL * sizeof *c->upstream_servers);
    c->upstreams = config_alloc(c, MAX_UPSTREAM_TOTAL * sizeof *c->upstreams);
    for (const struct scope *u = top->upstreams; u; u = u->next) {
        if (!u->path[0])
            continue;
        bool primary = false;
        for (uint32_t i = 0; i < u->servers.n; i++)
            primary |= !((const struct upstream_server_conf *)u->servers.v)[i].backup;
        if (!u->servers.n)
            config_error(e, "%s: upstream %s has no server lines", u->from, u->path);
        else if (!primary)
            config_error(e, "%s: upstream %s has only backup servers", u->from, u->path);
        if (c->nupstreams == MAX_UPSTREAM_TOTAL || c->nupstream_servers + u->servers.n > MAX_UPSTREAM_TOTAL) {
            config_error(e, "%s: too many upstream servers in all (at most %d)", u->from, MAX_UPSTREAM_TOTAL);
            return;
        }
        struct upstream_group *g = &c->upstreams[c->nupstreams++];
        g->name = u->path;
        g->balance = u->balance;
        g->check = u->health;
        g->from = u->from;
        g->servers = &c->upstream_servers[c->nupstream_servers];
        for (uint32_t i = 0; i < u->servers.n; i++)
            add_upstream_server(c, (const struct upstream_server_conf *)u->servers.v + i, u->path, u);
        g->nservers = (uint16_t)u->servers.n;
    }
}


/* The TLS settings of a proxy_pass https:// or h2://, shared with every location that has
 * the same ones and protocol (so they share one context and their pooled connections).
 * NULL after an error. */
static const struct upstream_tls *upstream_tls_for(struct config *c, const struct merged *m, const struct scope *ps,
                                                   struct config_errors *e)
{
    struct upstream_tls want = m->ssl;
    if (!want.name)
        want.name = ps->pass_host;
    want.h2 = ps->pass_h2;
    if (!want.cert != !want.key) {
        if (!ps->pass_reported)
            config_error(e, "%s: %s without %s (a client certificate needs both)",
                         want.cert ? want.cert_from : want.key_from,
                         want.cert ? "proxy_ssl_certificate" : "proxy_ssl_certificate_key",
                         want.cert ? "proxy_ssl_certificate_key" : "proxy_ssl_certificate");
        return NULL;
    }
    struct upstream_tls **tail = &c->upstream_tls;
    for (; *tail; tail = &(*tail)->next) {
        const struct upstream_tls *o = *tail;
        if (config_same_text(o->trusted, want.trusted) && config_same_text(o->cert, want.cert) && config_same_text(o->key, want.key) &&
            !strcmp(o->name, want.name) && o->verify == want.verify && o->server_name == want.server_name &&
            o->h2 == want.h2 && o->session_reuse == want.session_reuse)
            return o;
    }
    struct upstream_tls *t = config_alloc(c, sizeof *t);
    *t = want;
    t->ctx = NULL;
    t->next = NULL;
    *tail = t;
    return t;
}

/* What a proxied location passes to: the group proxy_pass names, or a group of its own
 * address (one per address, shared by the locations that give it).  A group is reached
 * over one scheme: its servers' pooled connections (and metrics) are either TLS or not.
 * NULL after an error, reported once per proxy_pass line. */
static const struct proxy_conf *proxy_for(struct config *c, const struct merged *m, struct config_errors *e)
{
    struct scope *ps = (struct scope *)m->pass;
    const struct upstream_group *g = NULL;
    for (uint32_t i = 0; i < c->nupstreams && !g; i++) {
        const struct upstream_group *o = &c->upstreams[i];
        if (ps->pass_group[0] ? !strcmp(o->name, ps->pass_group)
                              : !o->name[0] && !strcmp(o->servers[0].text, ps->pass_direct->text))
            g = o;
    }
    if (!g && ps->pass_group[0]) {
        if (!ps->pass_reported)       /* a top-level location is in every site */
            config_error(e, "%s: proxy_pass names upstream '%s', which no upstream section defines", ps->pass_from,
                         ps->pass_group);
        ps->pass_reported = true;
        return NULL;
    }
    if (!g) {
        if (c->nupstreams == MAX_UPSTREAM_TOTAL || c->nupstream_servers == MAX_UPSTREAM_TOTAL) {
            config_error(e, "%s: too many upstream servers in all (at most %d)", ps->pass_from, MAX_UPSTREAM_TOTAL);
            return NULL;
        }
        struct upstream_group *n = &c->upstreams[c->nupstreams++];
        n->name = "";
        n->from = ps->pass_from;
        n->servers = &c->upstream_servers[add_upstream_server(c, ps->pass_direct, "", NULL)];
        n->nservers = 1;
        g = n;
    }
    struct upstream_group *wg = (struct upstream_group *)g;
    uint8_t scheme = ps->pass_tls ? 2 : 1;
    const char *scheme_name = ps->pass_tls ? ps->pass_h2 ? "h2://" : "https://" : ps->pass_h2 ? "h2c://" : "http://";
    if (wg->scheme && wg->scheme != scheme) {
        if (!ps->pass_reported)
            config_error(e,
                         "%s: upstream %s is passed to over %s here but over %s at %s (TLS or not, one for each upstream)",
                         ps->pass_from, g->name[0] ? g->name : g->servers[0].text, scheme_name, g->scheme_name,
                         g->scheme_from);
        ps->pass_reported = true;
        return NULL;
    }
    if (g->check && g->check->path && ps->pass_h2) {
        if (!ps->pass_reported)
            config_error(e, "%s: upstream %s is passed to over %s here, but its health_check at %s asks for a path "
                         "over HTTP/1.1 (health_check = tcp checks any server)", ps->pass_from, g->name, scheme_name,
                         g->check->from);
        ps->pass_reported = true;
        return NULL;
    }
    wg->scheme = scheme;
    wg->scheme_name = scheme_name;
    wg->scheme_from = ps->pass_from;
    for (uint16_t i = 0; i < g->nservers; i++)
        c->upstream_servers[g->servers[i].index].tls = ps->pass_tls;
    const struct upstream_tls *tls = NULL;
    if (ps->pass_tls && !(tls = upstream_tls_for(c, m, ps, e))) {
        ps->pass_reported = true;
        return NULL;
    }
    if (tls && !wg->check_tls)
        wg->check_tls = tls;
    struct proxy_conf *pc = config_alloc(c, sizeof *pc);
    pc->tls = tls;
    pc->group = g;
    pc->uri = ps->pass_uri;
    pc->host = m->proxy_host ? m->proxy_host : "";
    pc->connect_timeout = m->proxy_timeouts[0];
    pc->read_timeout = m->proxy_timeouts[1];
    pc->send_timeout = m->proxy_timeouts[2];
    pc->next_upstream_tries = m->proxy_tries;
    pc->from = ps->pass_from;
    pc->h2 = ps->pass_h2;
    return pc;
}

static void tree(struct config *c, const struct scope *top, struct config_errors *e) { build_upstreams(c, top, e); }

static void location(struct config *c, struct location *l, const struct merged *m, struct config_errors *e)
{
    if (m->handler == HANDLER_PROXY && !(l->proxy = proxy_for(c, m, e)))
        l->handler = HANDLER_STATIC;   /* the configuration fails anyway */
}

static const struct config_module_key keys[] = {
    { K_PROXY_PASS, "proxy_pass", KEY_LOCATION, false, set_proxy_pass, NULL },
    { K_PROXY_CONNECT_TIMEOUT, "proxy_connect_timeout", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_proxy_connect_timeout, NULL },
    { K_PROXY_READ_TIMEOUT, "proxy_read_timeout", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_proxy_read_timeout, NULL },
    { K_PROXY_SEND_TIMEOUT, "proxy_send_timeout", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_proxy_send_timeout, NULL },
    { K_PROXY_NEXT_UPSTREAM_TRIES, "proxy_next_upstream_tries", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_proxy_tries, NULL },
    { K_PROXY_SET_HOST, "proxy_set_host", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_proxy_host, NULL },
    { K_PROXY_SSL_VERIFY, "proxy_ssl_verify", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_verify, NULL },
    { K_PROXY_SSL_TRUSTED_CERTIFICATE, "proxy_ssl_trusted_certificate", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_trusted, NULL },
    { K_PROXY_SSL_NAME, "proxy_ssl_name", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_name, NULL },
    { K_PROXY_SSL_SERVER_NAME, "proxy_ssl_server_name", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_server_name, NULL },
    { K_PROXY_SSL_SESSION_REUSE, "proxy_ssl_session_reuse", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_session_reuse, NULL },
    { K_PROXY_SSL_CERTIFICATE, "proxy_ssl_certificate", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_certificate, NULL },
    { K_PROXY_SSL_CERTIFICATE_KEY, "proxy_ssl_certificate_key", KEY_TOP | KEY_SITE | KEY_LOCATION, false, set_ssl_certificate_key, NULL },
    { K_SERVER, "server", KEY_UPSTREAM, true, set_server, clear_servers },
    { K_BALANCE, "balance", KEY_UPSTREAM, false, set_balance, NULL },
    { K_KEEPALIVE, "keepalive", KEY_UPSTREAM, false, set_keepalive, NULL },
    { K_KEEPALIVE_TIMEOUT, "keepalive_timeout", KEY_UPSTREAM, false, set_keepalive_timeout, NULL },
    { K_HEALTH_CHECK, "health_check", KEY_UPSTREAM, false, set_health_check, NULL },
};

static const struct config_module proxy_module = {
    keys, sizeof keys / sizeof keys[0], top_defaults, merge, tree, location, NULL,
};
__attribute__((constructor)) static void register_keys(void) { config_add_module(&proxy_module); }
