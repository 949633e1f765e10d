/* The reverse proxy's values: proxy_pass's target and an upstream section's servers
 * (config.c places them: proxy_pass in a location, server lines in "upstream NAME {").
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
 * proxy_pass names a group that exists is config_finish's to check, naming the line of
 * proxy_pass. */
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
