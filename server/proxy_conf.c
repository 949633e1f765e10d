/* The reverse proxy's settings: proxy_pass and the upstream servers behind it.
 *
 *   proxy_pass = http://127.0.0.1:8081          one server (a name is resolved now)
 *   proxy_pass = http://unix:/run/app.sock:     a unix socket (nginx's spelling)
 *   proxy_pass = http://backend/app/            the group below; /app/ replaces proxy_location
 *   upstream = backend 127.0.0.1:8081 weight=3 max_fails=1 fail_timeout=10s max_conns=100
 *   upstream = backend 127.0.0.1:8082 backup
 *   upstream_balance = least_conn               (round_robin by default, both weighted)
 *   upstream_keepalive = 32                     idle connections kept per server and worker
 *
 * Each key is the nginx directive an operator knows (`upstream NAME { server ...; }`
 * becomes one `upstream = NAME ...` line per server), so a configuration reads the same
 * and moves into a location unchanged.  Values are checked here, as config_set checks
 * every key; whether proxy_pass names a group that exists is checked once every
 * setting is in (proxy_config_check), naming the line of proxy_pass. */
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

void proxy_config_defaults(struct proxy_conf *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->location, sizeof p->location, "/");
    p->keepalive = 32;
    p->keepalive_timeout = 60;
    p->connect_timeout = 60;    /* nginx's defaults, all three */
    p->read_timeout = 60;
    p->send_timeout = 60;
}

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

/* "HOST:PORT", "[V6]:PORT", "HOST" (port 80) or "unix:/path" into s. */
static int parse_address(const char *text, struct upstream_server_conf *s, char *err, size_t errlen)
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
    char host[256], port[16] = "80";
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

static void server_defaults(struct upstream_server_conf *s)
{
    s->weight = 1;
    s->max_fails = 1;          /* nginx's defaults */
    s->fail_timeout = 10;
}

/* proxy_pass = http://WHERE[/URI]: WHERE is an address, unix:/path: or a group name. */
static int set_pass(struct proxy_conf *p, const char *value, char *err, size_t errlen)
{
    p->on = false;
    p->group[0] = p->uri[0] = 0;
    if (!*value)
        return CONFIG_OK;
    if (!strncmp(value, "https://", 8))
        return fail(err, errlen, "proxy_pass '%s': TLS upstreams are not supported yet; use http://%s", value, "");
    if (strncmp(value, "http://", 7))
        return fail(err, errlen, "proxy_pass '%s': expected http://ADDRESS[/PATH]%s", value, "");
    const char *where = value + 7, *slash;
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
    if (strlen(slash) >= sizeof p->uri)
        return fail(err, errlen, "proxy_pass '%s': path too long%s", value, "");
    snprintf(p->uri, sizeof p->uri, "%s", slash);
    /* A bare name without a port is a group (defined by upstream lines, before or after);
     * anything else is one server's address. */
    bool name = strncmp(addr, "unix:", 5) && !strchr(addr, ':') && !strchr(addr, '[');
    struct in_addr ignored;
    if (name && strlen(addr) < sizeof p->group && inet_pton(AF_INET, addr, &ignored) != 1 && strcmp(addr, "localhost")) {
        snprintf(p->group, sizeof p->group, "%s", addr);
        p->on = true;
        return CONFIG_OK;
    }
    struct upstream_server_conf s;
    if (parse_address(addr, &s, err, errlen))
        return CONFIG_ERROR;
    server_defaults(&s);
    /* One address: the only server, kept apart from any upstream lines (checked later). */
    p->direct = s;
    p->on = true;
    return CONFIG_OK;
}

/* upstream = GROUP ADDRESS [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N] [backup] */
static int add_server(struct proxy_conf *p, const char *value, char *err, size_t errlen)
{
    char copy[512];
    if (strlen(value) >= sizeof copy)
        return fail(err, errlen, "upstream '%.100s...': too long%s", value, "");
    snprintf(copy, sizeof copy, "%s", value);
    char *save = NULL, *group = strtok_r(copy, " \t", &save), *addr = strtok_r(NULL, " \t", &save);
    if (!group || !addr)
        return fail(err, errlen, "upstream '%s': expected GROUP ADDRESS [weight=N] [max_fails=N] "
                    "[fail_timeout=T] [max_conns=N] [backup]%s", value, "");
    if (strlen(group) >= sizeof p->upstream_name)
        return fail(err, errlen, "upstream '%s': group name too long%s", value, "");
    if (p->upstream_name[0] && strcmp(p->upstream_name, group))
        return fail(err, errlen, "upstream '%s': one group per configuration (this one is '%s')", group,
                    p->upstream_name);
    if (p->nservers == MAX_UPSTREAM_SERVERS)
        return fail(err, errlen, "upstream '%s': too many servers (at most 16)%s", value, "");
    struct upstream_server_conf s;
    if (parse_address(addr, &s, err, errlen))
        return CONFIG_ERROR;
    server_defaults(&s);
    for (char *opt; (opt = strtok_r(NULL, " \t", &save));) {
        char *eq = strchr(opt, '=');
        if (!strcmp(opt, "backup")) {
            s.backup = true;
            continue;
        }
        if (!eq)
            return fail(err, errlen, "upstream: unknown option '%s' (weight, max_fails, fail_timeout, max_conns, backup)%s", opt, "");
        *eq = 0;
        const char *v = eq + 1;
        int bad = !strcmp(opt, "weight")         ? count(v, 1000, &s.weight) || !s.weight
                  : !strcmp(opt, "max_fails")    ? count(v, 1000000, &s.max_fails)
                  : !strcmp(opt, "max_conns")    ? count(v, 1000000, &s.max_conns)
                  : !strcmp(opt, "fail_timeout") ? seconds(v, &s.fail_timeout)
                                                 : 2;
        if (bad == 2)
            return fail(err, errlen, "upstream: unknown option '%s' (weight, max_fails, fail_timeout, max_conns, backup)%s", opt, "");
        if (bad)
            return fail(err, errlen, "upstream: bad value '%s' for %s", v, opt);
    }
    snprintf(p->upstream_name, sizeof p->upstream_name, "%s", group);
    p->servers[p->nservers++] = s;
    return CONFIG_OK;
}

int proxy_config_set(struct proxy_conf *p, const char *key, const char *value, char *err, size_t errlen)
{
    if (!strcmp(key, "proxy_pass"))
        return set_pass(p, value, err, errlen);
    if (!strcmp(key, "upstream"))
        return add_server(p, value, err, errlen);
    if (!strcmp(key, "upstream_balance")) {
        if (!strcmp(value, "round_robin"))
            return p->balance = BALANCE_ROUND_ROBIN, CONFIG_OK;
        if (!strcmp(value, "least_conn"))
            return p->balance = BALANCE_LEAST_CONN, CONFIG_OK;
        return fail(err, errlen, "upstream_balance: '%s' is not round_robin or least_conn%s", value, "");
    }
    struct { const char *name; double *dst; } durations[] = {
        { "upstream_keepalive_timeout", &p->keepalive_timeout }, { "proxy_connect_timeout", &p->connect_timeout },
        { "proxy_read_timeout", &p->read_timeout }, { "proxy_send_timeout", &p->send_timeout },
    };
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
        if (!strcmp(key, durations[i].name)) {
            if (seconds(value, durations[i].dst) || *durations[i].dst <= 0)
                return fail(err, errlen, "%s: '%s' is not a duration (10s, 250ms, 5m)", key, value);
            return CONFIG_OK;
        }
    if (!strcmp(key, "upstream_keepalive")) {
        if (count(value, 100000, &p->keepalive))
            return fail(err, errlen, "upstream_keepalive: '%s' is not a count (0 keeps none)%s", value, "");
        return CONFIG_OK;
    }
    if (!strcmp(key, "proxy_next_upstream_tries")) {
        if (count(value, 100, &p->next_upstream_tries))
            return fail(err, errlen, "proxy_next_upstream_tries: '%s' is not a count (0: every server)%s", value, "");
        return CONFIG_OK;
    }
    if (!strcmp(key, "proxy_location")) {
        if (value[0] != '/' || strlen(value) >= sizeof p->location)
            return fail(err, errlen, "proxy_location: '%s' is not a path prefix starting with '/'%s", value, "");
        snprintf(p->location, sizeof p->location, "%s", value);
        return CONFIG_OK;
    }
    if (!strcmp(key, "proxy_set_host")) {
        for (const char *c = value; *c; c++)
            if ((unsigned char)*c <= 0x20 || *c == 0x7f)
                return fail(err, errlen, "proxy_set_host: '%s' is not a host%s", value, "");
        if (strlen(value) >= sizeof p->host)
            return fail(err, errlen, "proxy_set_host: '%.60s...' is too long%s", value, "");
        snprintf(p->host, sizeof p->host, "%s", value);
        return CONFIG_OK;
    }
    return 1;
}

int proxy_config_check(struct proxy_conf *p, char *err, size_t errlen)
{
    if (!p->on)
        return CONFIG_OK;
    if (!p->group[0]) {
        p->servers[0] = p->direct;
        p->nservers = 1;
        return CONFIG_OK;
    }
    if (strcmp(p->group, p->upstream_name) || !p->nservers) {
        snprintf(err, errlen, "%s: proxy_pass names upstream '%s', which no upstream line defines", p->pass_from,
                 p->group);
        return CONFIG_ERROR;
    }
    bool primary = false;
    for (int i = 0; i < p->nservers; i++)
        primary |= !p->servers[i].backup;
    if (!primary) {
        snprintf(err, errlen, "%s: upstream '%s' has only backup servers", p->pass_from, p->group);
        return CONFIG_ERROR;
    }
    return CONFIG_OK;
}
