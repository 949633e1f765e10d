/* Configuration: the embedded default, config files, command-line overrides and
 * H2PARK_DEBUG.
 *
 * Every key goes through config_set, so a file line, a flag and the embedded default are
 * checked by the same code and fail with the same words.  Parse errors name the file
 * and line; the caller prints them and exits 2.  A file's listen lines replace the
 * default's as a group (the first listen line of a file clears the inherited ones), and
 * so do its builtin_routes_allow lines.  Nothing here binds or opens anything but the
 * file: listen addresses, root and certificates are checked when a configuration is
 * applied (main.c), so a reload can parse the same way and keep the running
 * configuration if the new one fails. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "coro.h"
#include "log.h"
#include "scalloc.h"

__thread struct config cfg;

void config_defaults(struct config *c)
{
    memset(c, 0, sizeof *c);
    c->workers = 0;
    snprintf(c->root, sizeof c->root, "./www");
    snprintf(c->root_from, sizeof c->root_from, CONFIG_BUILTIN);
    c->parking = true;
    c->builtin_routes = true;
    c->builtin_allow[0] = (struct cidr){ .family = AF_INET, .bits = 8, .addr = { 127 } };
    c->builtin_allow[1] = (struct cidr){ .family = AF_INET6, .bits = 128, .addr = { [15] = 1 } };
    c->nbuiltin_allow = 2;
    c->server_header = true;
    c->log_level = LOG_INFO;
    c->preface_timeout = 10;
    c->idle_timeout = 300;
    c->write_timeout = 30;
    c->body_timeout = 30;
    c->shutdown_timeout = 10;
    c->scavenge_interval = 5;
    c->max_conns = 0;
    c->max_concurrent_streams = 100;
    c->max_header_list_size = 65536;
    c->initial_window_size = 65535;
    c->hpack_encoder_table_size = 4096;
    c->connection_window_size = 1 << 20;
    c->max_resets_per_second = 200;
    c->coro_stack_size = CORO_DEFAULT_STACK;
    c->parking_source = "default";
    proxy_config_defaults(&c->proxy);
}

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return CONFIG_ERROR;
}

static int parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
        return *out = true, 0;
    if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0"))
        return *out = false, 0;
    return -1;
}

int config_parse_uint(const char *v, unsigned long long max, unsigned long long *out)
{
    if (!*v || !isdigit((unsigned char)*v))
        return -1;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || n > max)
        return -1;
    *out = n;
    return 0;
}

/* "10s", "250ms", "5m", "1h" or plain seconds. */
int config_parse_duration(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || errno || d < 0)
        return -1;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        *out = d;
    else if (!strcmp(end, "ms"))
        *out = d / 1000;
    else if (!strcmp(end, "m"))
        *out = d * 60;
    else if (!strcmp(end, "h"))
        *out = d * 3600;
    else
        return -1;
    return 0;
}

/* "*" (or nothing) is every address: an IPv6 socket with IPV6_V6ONLY off, which takes
 * IPv4 too (core/listen.c falls back to IPv4 where there is no IPv6).  "[::]" is IPv6
 * only and "0.0.0.0" IPv4 only, as they say. */
static int parse_listen(const char *text, struct listen_addr *out, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || strlen(text) >= sizeof host)
        return fail(err, errlen, "listen address '%s' is not ADDR:PORT%s", text, "");
    size_t hl = (size_t)(colon - text);
    memcpy(host, text, hl);
    host[hl] = 0;
    unsigned long long port;
    if (config_parse_uint(colon + 1, 65535, &port))
        return fail(err, errlen, "listen address '%s': bad port '%s'", text, colon + 1);
    memset(out, 0, sizeof *out);
    snprintf(out->text, sizeof out->text, "%s", text);
    char *h = host;
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h[hl - 1] = 0;
        h++;
    }
    struct sockaddr_in *in4 = (struct sockaddr_in *)&out->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->addr;
    if (!strcmp(h, "*") || !strcmp(h, "")) {
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        in6->sin6_port = htons((uint16_t)port);
        out->addrlen = sizeof *in6;
        out->dual = true;
    } else if (!strcmp(h, "localhost") || inet_pton(AF_INET, h, &in4->sin_addr) == 1) {
        if (!strcmp(h, "localhost"))
            inet_pton(AF_INET, "127.0.0.1", &in4->sin_addr);
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        out->addrlen = sizeof *in4;
    } else if (inet_pton(AF_INET6, h, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        out->addrlen = sizeof *in6;
    } else {
        return fail(err, errlen, "listen address '%s': '%s' is not an IP address", text, h);
    }
    return CONFIG_OK;
}

/* ADDR:PORT [tls] [proxy_protocol], the options in any order, each at most once. */
static int set_listen(struct config *c, const char *value, char *err, size_t errlen)
{
    char copy[300];
    if (strlen(value) >= sizeof copy)
        return fail(err, errlen, "listen '%.200s': too long%s", value, "");
    snprintf(copy, sizeof copy, "%s", value);
    char *save = NULL, *addr = strtok_r(copy, " \t", &save);
    if (!addr)
        return fail(err, errlen, "listen '%s': expected ADDR:PORT [tls] [proxy_protocol]%s", value, "");
    if (c->nlisten == MAX_LISTEN)
        return fail(err, errlen, "too many listen addresses (at most 16)%s%s", "", "");
    struct listen_addr a;
    if (parse_listen(addr, &a, err, errlen))
        return CONFIG_ERROR;
    for (char *opt; (opt = strtok_r(NULL, " \t", &save));) {
        bool *flag = !strcmp(opt, "tls") ? &a.tls : !strcmp(opt, "proxy_protocol") ? &a.proxy_protocol : NULL;
        if (!flag)
            return fail(err, errlen, "listen '%s': unknown option '%s' (tls, proxy_protocol)", value, opt);
        if (*flag)
            return fail(err, errlen, "listen '%s': '%s' given twice", value, opt);
        *flag = true;
    }
    c->listen[c->nlisten++] = a;
    return CONFIG_OK;
}

/* ADDR or ADDR/BITS, IPv4 or IPv6, with no bit set past the prefix (nginx warns of
 * those; here they are an error, since the rule would not say what it seems to). */
static int parse_cidr(char *item, struct cidr *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    char *slash = strchr(item, '/');
    if (slash)
        *slash = 0;
    if (inet_pton(AF_INET, item, r->addr) == 1)
        r->family = AF_INET;
    else if (inet_pton(AF_INET6, item, r->addr) == 1)
        r->family = AF_INET6;
    else
        return fail(err, errlen, "builtin_routes_allow: '%s' is not an IP address or network (or all)%s", item, "");
    unsigned max = r->family == AF_INET ? 32 : 128;
    unsigned long long bits = max;
    if (slash && config_parse_uint(slash + 1, max, &bits))
        return fail(err, errlen, "builtin_routes_allow: '%s': bad prefix length '%s'", item, slash + 1);
    r->bits = (uint8_t)bits;
    for (unsigned i = 0; i < max / 8; i++) {
        unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? (unsigned)bits - 8 * i : 0;
        if (r->addr[i] & (0xffu >> keep))
            return fail(err, errlen, "builtin_routes_allow: '%s/%s' has bits set past its prefix", item, slash + 1);
    }
    return CONFIG_OK;
}

/* builtin_routes_allow: addresses, networks or "all", separated by spaces or commas, as
 * nginx's allow takes them.  Each line adds to the list; a file's first line replaces
 * the inherited one (config_parse). */
static int set_allow(struct config *c, const char *value, char *err, size_t errlen)
{
    char copy[2048];
    if (strlen(value) >= sizeof copy)
        return fail(err, errlen, "builtin_routes_allow: too long%s%s", "", "");
    snprintf(copy, sizeof copy, "%s", value);
    for (char *save = NULL, *item = strtok_r(copy, " \t,", &save); item; item = strtok_r(NULL, " \t,", &save)) {
        struct cidr r[2] = { { .family = AF_INET }, { .family = AF_INET6 } };   /* all: both, no prefix */
        int n = 2;
        if (strcmp(item, "all")) {
            n = 1;
            if (parse_cidr(item, &r[0], err, errlen))
                return CONFIG_ERROR;
        }
        if (c->nbuiltin_allow + n > MAX_ALLOW)
            return fail(err, errlen, "builtin_routes_allow: more than %s entries%s", "64", "");
        memcpy(c->builtin_allow + c->nbuiltin_allow, r, (size_t)n * sizeof r[0]);
        c->nbuiltin_allow += n;
    }
    return CONFIG_OK;
}

bool cidr_match(const struct cidr *list, int n, const struct sockaddr *sa)
{
    const uint8_t *a;
    uint8_t family = (uint8_t)sa->sa_family;
    if (family == AF_INET) {
        a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    } else if (family == AF_INET6) {
        a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a)) {   /* an IPv4 client of a "*" socket */
            family = AF_INET;
            a += 12;
        }
    } else {
        return false;
    }
    for (int i = 0; i < n; i++) {
        const struct cidr *r = &list[i];
        if (r->family != family)
            continue;
        unsigned whole = r->bits / 8, rest = r->bits % 8;
        if (memcmp(a, r->addr, whole))
            continue;
        if (!rest || !((a[whole] ^ r->addr[whole]) & (uint8_t)(0xff << (8 - rest))))
            return true;
    }
    return false;
}

/* The user must exist now, so a typo is an error naming its line, not a failure after
 * the sockets are bound. */
static int set_user(struct config *c, const char *value, char *err, size_t errlen)
{
    if (strlen(value) >= sizeof c->user)
        return fail(err, errlen, "user '%.60s...': too long%s", value, "");
    if (*value) {
        struct passwd pw, *found = NULL;
        char buf[4096];
        int e = getpwnam_r(value, &pw, buf, sizeof buf, &found);
        if (!found)
            return fail(err, errlen, "user '%s': %s", value, e ? strerror(e) : "no such user");
    }
    snprintf(c->user, sizeof c->user, "%s", value);
    return CONFIG_OK;
}

#define VALUE_ERR(what) fail(err, errlen, "%s: " what, key, value)

/* 1..max, or "auto" as 0 (the caller decides what auto means). */
static int parse_count_or_auto(const char *value, unsigned long long max, unsigned long long *n)
{
    if (!strcmp(value, "auto")) {
        *n = 0;
        return 0;
    }
    return config_parse_uint(value, max, n) || *n == 0 ? -1 : 0;
}

int config_set(struct config *c, const char *key, const char *value, char *err, size_t errlen)
{
    unsigned long long n;
    double d;
    if (!strcmp(key, "listen"))
        return set_listen(c, value, err, errlen);
    if (!strcmp(key, "user"))
        return set_user(c, value, err, errlen);
    if (!strcmp(key, "builtin_routes_allow"))
        return set_allow(c, value, err, errlen);
    if (!strcmp(key, "workers")) {
        if (parse_count_or_auto(value, 1024, &n))
            return VALUE_ERR("'%s' is not a worker count (1..1024 or auto)");
        return c->workers = (int)n, CONFIG_OK;
    }
    if (!strcmp(key, "root") || !strcmp(key, "cert") || !strcmp(key, "key") || !strcmp(key, "access_log")) {
        char *dst = !strcmp(key, "root") ? c->root : !strcmp(key, "cert") ? c->cert : !strcmp(key, "key") ? c->key : c->access_log;
        if (strlen(value) >= sizeof c->root)
            return VALUE_ERR("path '%s' is too long");
        if (!strcmp(key, "root") && !*value)
            return VALUE_ERR("root must not be empty%s");
        snprintf(dst, sizeof c->root, "%s", value);
        return CONFIG_OK;
    }
    struct { const char *name; bool *dst; } bools[] = {
        { "parking", &c->parking }, { "builtin_routes", &c->builtin_routes },
        { "coro_guard_pages", &c->coro_guard_pages }, { "server_header", &c->server_header },
    };
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if (!strcmp(key, bools[i].name)) {
            bool b;
            if (parse_bool(value, &b))
                return VALUE_ERR("'%s' is not on or off");
            return *bools[i].dst = b, CONFIG_OK;
        }
    if (!strcmp(key, "access_log_format")) {
        if (!strcmp(value, "combined"))
            return c->access_log_format = ACCESS_LOG_COMBINED, CONFIG_OK;
        if (!strcmp(value, "json"))
            return c->access_log_format = ACCESS_LOG_JSON, CONFIG_OK;
        return VALUE_ERR("'%s' is not combined or json");
    }
    if (!strcmp(key, "log_level")) {
        int l = log_level_parse(value);
        if (l < 0)
            return VALUE_ERR("'%s' is not one of error, warn, info, debug");
        return c->log_level = l, CONFIG_OK;
    }
    struct { const char *name; double *dst; } durations[] = {
        { "preface_timeout", &c->preface_timeout }, { "idle_timeout", &c->idle_timeout },
        { "write_timeout", &c->write_timeout }, { "body_timeout", &c->body_timeout },
        { "shutdown_timeout", &c->shutdown_timeout },
        { "scavenge_interval", &c->scavenge_interval },
    };
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
        if (!strcmp(key, durations[i].name)) {
            if (config_parse_duration(value, &d) || d > 86400 * 30)
                return VALUE_ERR("'%s' is not a duration (like 10s, 250ms, 5m)");
            return *durations[i].dst = d, CONFIG_OK;
        }
    if (!strcmp(key, "max_conns")) {
        if (parse_count_or_auto(value, 10000000, &n))
            return VALUE_ERR("'%s' is not a connection count (or auto)");
        return c->max_conns = (long)n, CONFIG_OK;
    }
    if (!strcmp(key, "max_handlers")) {
        if (parse_count_or_auto(value, 10000000, &n))
            return VALUE_ERR("'%s' is not a handler count (or auto)");
        return c->max_handlers = (long)n, CONFIG_OK;
    }
    struct { const char *name; uint32_t *dst; unsigned long long lo, hi; } ints[] = {
        { "max_concurrent_streams", &c->max_concurrent_streams, 1, 1u << 31 },
        { "max_header_list_size", &c->max_header_list_size, 1024, 16u << 20 },
        { "initial_window_size", &c->initial_window_size, 1, 0x7fffffff },
        { "connection_window_size", &c->connection_window_size, 65535, 0x7fffffff },
        { "max_resets_per_second", &c->max_resets_per_second, 1, 1000000 },
        { "hpack_encoder_table_size", &c->hpack_encoder_table_size, 0, 65536 },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(key, ints[i].name)) {
            if (config_parse_uint(value, ints[i].hi, &n) || n < ints[i].lo)
                return VALUE_ERR("'%s' is out of range");
            return *ints[i].dst = (uint32_t)n, CONFIG_OK;
        }
    if (!strcmp(key, "coro_stack_size")) {
        if (config_parse_uint(value, 64u << 20, &n) || n < CORO_MIN_STACK)
            return VALUE_ERR("'%s' is not a stack size in bytes (8192 .. 64 MiB)");
        return c->coro_stack_size = (size_t)n, CONFIG_OK;
    }
    int rc = proxy_config_set(&c->proxy, key, value, err, errlen);
    if (rc != 1)
        return rc;
    return fail(err, errlen, "unknown key '%s'%s", key, "");
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

int config_parse(struct config *c, const char *text, size_t len, const char *name, char *err, size_t errlen)
{
    bool listen_seen = false, allow_seen = false;
    size_t pos = 0;
    for (int lineno = 1; pos < len; lineno++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        char line[2048];
        if (ll >= sizeof line) {
            snprintf(err, errlen, "%s:%d: line too long", name, lineno);
            return CONFIG_ERROR;
        }
        memcpy(line, text + pos, ll);
        line[ll] = 0;
        pos += ll + (nl ? 1 : 0);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'key = value', got '%s'", name, lineno, s);
            return CONFIG_ERROR;
        }
        *eq = 0;
        char *key = trim(s), *value = trim(eq + 1);
        if (!strcmp(key, "listen") && !listen_seen) {
            listen_seen = true;
            c->nlisten = 0;
        }
        if (!strcmp(key, "builtin_routes_allow") && !allow_seen) {
            allow_seen = true;
            c->nbuiltin_allow = 0;
        }
        char why[512];
        if (config_set(c, key, value, why, sizeof why)) {
            snprintf(err, errlen, "%s:%d: %s", name, lineno, why);
            return CONFIG_ERROR;
        }
        if (!strcmp(key, "parking"))
            c->parking_source = "config file";
        if (!strcmp(key, "proxy_pass"))
            snprintf(c->proxy.pass_from, sizeof c->proxy.pass_from, "%.140s:%d", name, lineno);
        if (!strcmp(key, "root")) {
            if (!strcmp(name, CONFIG_BUILTIN))
                snprintf(c->root_from, sizeof c->root_from, CONFIG_BUILTIN);
            else
                snprintf(c->root_from, sizeof c->root_from, "%.140s:%d", name, lineno);
        }
    }
    return CONFIG_OK;
}

int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return CONFIG_ERROR;
    }
    struct buf b = { 0 };
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (buf_append(&b, chunk, n)) {
            fclose(f);
            buf_free(&b);
            snprintf(err, errlen, "%s: out of memory", path);
            return CONFIG_ERROR;
        }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        buf_free(&b);
        snprintf(err, errlen, "%s: read error", path);
        return CONFIG_ERROR;
    }
    int rc = config_parse(c, b.data ? b.data : "", b.len, path, err, errlen);
    buf_free(&b);
    return rc;
}

int config_apply_debug_env(struct config *c, const char *env, void (*warn)(const char *key), char *err, size_t errlen)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", env);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        char *key = trim(item), *value = (char *)"";
        if (eq) {
            *eq = 0;
            key = trim(item);
            value = trim(eq + 1);
        }
        if (!*key)
            continue;
        if (!strcmp(key, "http2serveparking")) {
            if (!strcmp(value, "0"))
                c->parking = false;
            else if (!strcmp(value, "1"))
                c->parking = true;
            else {
                snprintf(err, errlen, "H2PARK_DEBUG: http2serveparking=%s: expected 0 or 1", value);
                return CONFIG_ERROR;
            }
            c->parking_source = "H2PARK_DEBUG";
        } else if (!strcmp(key, "corostackpaint")) {
            c->coro_paint = !strcmp(value, "1");
        } else if (warn) {
            warn(key);
        }
    }
    return CONFIG_OK;
}

/* Derived values that depend on the machine. */
static long worker_count(const struct config *c)
{
    long n = c->workers > 0 ? c->workers : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* auto: the open-file limit less what else may be open at once - 64 for listeners,
 * logs, the event loop and the like, and each worker's open-file cache - so a file
 * request at max_conns still gets a descriptor. */
long config_max_conns(const struct config *c)
{
    if (c->max_conns)
        return c->max_conns;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
        return 100000;
    long spare = 64 + OPEN_FILE_SLOTS * worker_count(c);
    return (long)rl.rlim_cur > spare + 64 ? (long)rl.rlim_cur - spare : 64;
}

/* The most one handler can hold: its stack, its request headers, the request body it
 * has not read (the stream window: body is acknowledged only as it is read), and the
 * response it got ahead of the peer by (REQUEST_OUTPUT_MAX), with the stream itself. */
size_t config_handler_worst_bytes(const struct config *c)
{
    return c->coro_stack_size + c->max_header_list_size + c->initial_window_size + REQUEST_OUTPUT_MAX + 1024;
}

/* auto: handlers of every worker together may pin at most a quarter of physical memory. */
long config_max_handlers(const struct config *c)
{
    if (c->max_handlers)
        return c->max_handlers;
    static __thread long cached;     /* per thread: workers ask concurrently */
    static __thread size_t cached_for;
    size_t worst = config_handler_worst_bytes(c);
    if (cached_for != worst) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        double mem = pages > 0 && page > 0 ? (double)pages * (double)page : 1e9;
        long n = (long)(mem / 4 / (double)worst / (double)worker_count(c));
        cached = n > 16 ? n : 16;
        cached_for = worst;
    }
    return cached;
}
