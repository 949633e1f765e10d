/* Configuration: the file format, its keys, and the tree a configuration becomes.
 *
 * The format is "key = value" lines, "#" comments, and two kinds of section:
 *
 *   site example.com www.example.com {      names: exact, "*.example.com", or "*"
 *       root = /srv/example
 *       location /assets/ {                 a path prefix (longest wins), or
 *           header = Cache-Control: max-age=86400
 *       }
 *       location = /old { return = 301 /new }   "= PATH": that path exactly (on its own lines)
 *       location /api/ {
 *           proxy_pass = http://backend         the reverse proxy, to a group (or one address)
 *       }
 *   }
 *   upstream backend {                          a group of servers, at the top level
 *       server = 10.0.0.1:3000 weight=3
 *   }
 *
 * Every key is in one table (config_keys) that says where it may appear - the format's
 * own keys here, a module's (the reverse proxy's: proxy_conf.c) added by the module with
 * its setters and its part of the merge and of the tree (config_tree.h): the top level
 * only (workers, timeouts: the daemon's), the top level or a site (listen, cert, key:
 * what a site is reached by), or anywhere (root, header, allow: how requests are
 * served).  What a site does not say it takes from the top level, what a location does
 * not say from its site: config_finish merges the three into each location, so a
 * request reads one struct.  A configuration without sites is one site, the top level,
 * for every host.
 *
 * Sources come in order - the embedded default, a file, H2PARK_DEBUG, the command line -
 * and each may override what an earlier one set.  Within one source a key given twice
 * in one scope is an error naming both lines, unless it is one that repeats (listen,
 * header, allow...); the first of those in a scope from a newer source replaces what
 * the older ones listed (a file's listen lines replace the default's).  Parsing never
 * stops at an error: every one is reported, "file:line: problem", before exit 2.
 * Nothing here binds or opens anything but the file: listen addresses, certificates and
 * roots are checked when a configuration is applied (main.c), so a reload can parse the
 * same way and keep the running configuration if the new one fails. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "buf.h"
#include "clienttable.h"
#include "config.h"
#include "config_tree.h"
#include "coro.h"
#include "log.h"
#include "readfile.h"
#include "scalloc.h"

/* ---- memory: everything a configuration holds lives in its arena ---- */

struct config_arena {
    struct config_arena *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

static void *alloc(struct config *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct config_arena *a = c->arena;
    if (!a || a->cap - a->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        struct config_arena *b = sc_malloc(sizeof *b + cap);
        if (!b) {
            fprintf(stderr, "h2park: out of memory reading the configuration\n");
            abort();
        }
        b->next = a;
        b->used = 0;
        b->cap = cap;
        c->arena = a = b;
    }
    void *p = a->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

static char *dupn(struct config *c, const char *s, size_t n)
{
    char *p = alloc(c, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}
static char *sdup(struct config *c, const char *s) { return dupn(c, s, strlen(s)); }

void *config_alloc(struct config *c, size_t n) { return alloc(c, n); }
char *config_strdup(struct config *c, const char *s) { return sdup(c, s); }

static char *fmt(struct config *c, const char *f, ...) __attribute__((format(printf, 2, 3)));
static char *fmt(struct config *c, const char *f, ...)
{
    char tmp[1200];
    va_list ap;
    va_start(ap, f);
    vsnprintf(tmp, sizeof tmp, f, ap);
    va_end(ap);
    return sdup(c, tmp);
}

static void *push(struct config *c, struct vec *v, size_t size)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 4;
        void *n = alloc(c, cap * size);
        if (v->n)
            memcpy(n, v->v, v->n * size);
        v->v = n;
        v->cap = cap;
    }
    return (char *)v->v + size * v->n++;
}
void *config_push(struct config *c, struct vec *v, size_t size) { return push(c, v, size); }

struct config_cleanup {
    void (*fn)(void *);
    void *arg;
    struct config_cleanup *next;
};

int config_on_free(struct config *c, void (*fn)(void *arg), void *arg)
{
    struct config_cleanup *k = sc_malloc(sizeof *k);
    if (!k)
        return -1;
    *k = (struct config_cleanup){ fn, arg, c->cleanup };
    c->cleanup = k;
    return 0;
}

void config_ref(struct config *c) { atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); }

void config_unref(struct config *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (struct config_cleanup *k = c->cleanup, *next; k; k = next) {
        next = k->next;
        k->fn(k->arg);
        sc_free(k);
    }
    for (struct config_arena *a = c->arena, *next; a; a = next) {
        next = a->next;
        sc_free(a);
    }
    sc_free(c);
}

void config_error(struct config_errors *e, const char *f, ...)
{
    if (++e->count > CONFIG_ERRORS_MAX)
        return;
    char line[1200];
    va_list ap;
    va_start(ap, f);
    vsnprintf(line, sizeof line, f, ap);
    va_end(ap);
    if (e->count == CONFIG_ERRORS_MAX)
        snprintf(line, sizeof line, "(and perhaps more errors: only the first %d are listed)", CONFIG_ERRORS_MAX - 1);
    /* One error, one line: a value quoted in the message (a quoted string's \n, a
     * stray control byte) is shown escaped, so no error can pass for another line. */
    char shown[4 * sizeof line];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)line; *p; p++)
        if (*p == '\n')
            shown[n++] = '\\', shown[n++] = 'n';
        else if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(shown + n, sizeof shown - n, "\\x%02x", *p);
        else
            shown[n++] = (char)*p;
    if (e->len + n + 2 < sizeof e->text) {
        memcpy(e->text + e->len, shown, n);
        e->text[e->len + n] = '\n';
        e->len += n + 1;
        e->text[e->len] = 0;
    }
}

static const struct config_route *known_routes;
static size_t nknown_routes;

void config_use_routes(const struct config_route *routes, size_t n)
{
    known_routes = routes;
    nknown_routes = n;
}

/* ---- values ---- */

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

/* "10s", "250ms", "5m", "1h" or plain seconds: a decimal number (no exponent, no hex:
 * strtod takes "1e400" and "0x10" too) and a unit, at most DURATION_MAX, so that no
 * duration overflows a deadline it is added to. */
int config_parse_duration(const char *v, double *out)
{
    size_t digits = strspn(v, "0123456789."), dots = 0;
    for (size_t i = 0; i < digits; i++)
        dots += v[i] == '.';
    if (!digits || dots > 1 || (digits == 1 && dots))
        return -1;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end != v + digits || errno)
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
    return *out <= DURATION_MAX ? 0 : -1;
}

/* Bytes: "1048576", "512k", "10m", "1g" (nginx's units, either case).  0, -1 for what
 * is not a size, -2 for one over SIZE_MAX_BYTES: a count the unit would carry past 64
 * bits must not wrap (17179869184g is 2^64 bytes, which wrapped to 0: no limit). */
static int parse_size(const char *v, uint64_t *out);
int config_parse_size(const char *v, uint64_t *out) { return parse_size(v, out); }

static int parse_size(const char *v, uint64_t *out)
{
    char digits[32];
    size_t n = strlen(v);
    if (!n || n >= sizeof digits)
        return -1;
    unsigned shift = 0;
    switch (v[n - 1]) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: break;
    }
    memcpy(digits, v, n - (shift ? 1 : 0));
    digits[n - (shift ? 1 : 0)] = 0;
    unsigned long long x;
    if (config_parse_uint(digits, ULLONG_MAX, &x))
        return strspn(digits, "0123456789") == strlen(digits) && *digits ? -2 : -1;   /* past 2^64 */
    if (x > SIZE_MAX_BYTES >> shift)
        return -2;
    *out = (uint64_t)x << shift;
    return 0;
}

/* "*" (or nothing) is every address: an IPv6 socket with IPV6_V6ONLY off, which takes
 * IPv4 too (core/listen.c falls back to IPv4 where there is no IPv6).  "[::]" is IPv6
 * only and "0.0.0.0" IPv4 only, as they say. */
static int parse_listen_addr(const char *text, struct listen_addr *out, char *why, size_t n)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || strlen(text) >= sizeof host || strlen(text) >= sizeof out->text)
        return snprintf(why, n, "listen address '%.100s' is not ADDR:PORT", text), -1;
    size_t hl = (size_t)(colon - text);
    memcpy(host, text, hl);
    host[hl] = 0;
    unsigned long long port;
    if (config_parse_uint(colon + 1, 65535, &port))
        return snprintf(why, n, "listen address '%s': bad port '%s'", text, colon + 1), -1;
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
        return snprintf(why, n, "listen address '%s': '%s' is not an IP address", text, h), -1;
    }
    return 0;
}

static uint16_t listen_port(const struct listen_addr *a)
{
    return ntohs(a->addr.ss_family == AF_INET ? ((const struct sockaddr_in *)&a->addr)->sin_port
                                              : ((const struct sockaddr_in6 *)&a->addr)->sin6_port);
}

static bool same_listen_addr(const struct listen_addr *a, const struct listen_addr *b)
{
    if (a->addr.ss_family != b->addr.ss_family || listen_port(a) != listen_port(b))
        return false;
    if (a->addr.ss_family == AF_INET)
        return ((const struct sockaddr_in *)&a->addr)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)&b->addr)->sin_addr.s_addr;
    return !memcmp(&((const struct sockaddr_in6 *)&a->addr)->sin6_addr,
                   &((const struct sockaddr_in6 *)&b->addr)->sin6_addr, 16);
}

/* ---- setters: one per key that is not a plain global value ---- */

static const char *scope_name(const struct scope *s);

/* ADDR:PORT [tls] [proxy_protocol], the options in any order, each at most once. */
static int set_listen(struct setter_args *a)
{
    char copy[300];
    if (strlen(a->value) >= sizeof copy)
        return WHY("listen '%.200s': too long", a->value);
    snprintf(copy, sizeof copy, "%s", a->value);
    char *save = NULL, *addr = strtok_r(copy, " \t", &save);
    if (!addr)
        return WHY("listen '%s': expected ADDR:PORT [tls] [proxy_protocol]", a->value);
    if (a->s->listens.n == MAX_LISTEN)
        return WHY("too many listen addresses (at most %d)", MAX_LISTEN);
    struct listen_addr l;
    if (parse_listen_addr(addr, &l, a->why, a->whylen))
        return -1;
    for (char *opt; (opt = strtok_r(NULL, " \t", &save));) {
        bool *flag = !strcmp(opt, "tls") ? &l.tls : !strcmp(opt, "proxy_protocol") ? &l.proxy_protocol : NULL;
        if (!flag)
            return WHY("listen '%s': unknown option '%s' (tls, proxy_protocol)", a->value, opt);
        if (*flag)
            return WHY("listen '%s': '%s' given twice", a->value, opt);
        *flag = true;
    }
    l.from = a->from;
    for (uint32_t i = 0; i < a->s->listens.n; i++) {
        const struct listen_addr *o = (const struct listen_addr *)a->s->listens.v + i;
        if (same_listen_addr(o, &l))
            return WHY("listen %s: given twice %s (first at %s)", l.text, scope_name(a->s), o->from);
    }
    *(struct listen_addr *)push(a->c, &a->s->listens, sizeof l) = l;
    return 0;
}

/* The user must exist now, so a typo is an error naming its line, not a failure after
 * the sockets are bound. */
static int set_user(struct setter_args *a)
{
    if (strlen(a->value) >= sizeof a->c->user)
        return WHY("user '%.60s...': too long", a->value);
    if (*a->value) {
        struct passwd pw, *found = NULL;
        char buf[4096];
        int e = getpwnam_r(a->value, &pw, buf, sizeof buf, &found);
        if (!found)
            return WHY("user '%s': %s", a->value, e ? strerror(e) : "no such user");
    }
    snprintf(a->c->user, sizeof a->c->user, "%s", a->value);
    return 0;
}

/* A path as its source means it: a relative one in a file is taken from the file's
 * directory, so that the file means the same whichever directory h2park starts in (as
 * nginx's prefix and Caddy's file-relative paths); one in the embedded default or on the
 * command line from the working directory.  NULL if the result is too long. */
static const char *source_path(struct config *c, const char *path)
{
    const char *dir = c->parse->dir;
    if (!dir || path[0] == '/')
        return strlen(path) < PATH_MAX - 64 ? sdup(c, path) : NULL;
    while (path[0] == '.' && path[1] == '/')
        for (path += 2; *path == '/'; path++)
            ;
    if (!strcmp(path, "."))
        path = "";
    size_t dl = strlen(dir), pl = strlen(path);
    if (dl + 1 + pl >= PATH_MAX - 64)
        return NULL;
    char *out = alloc(c, dl + pl + 2);
    memcpy(out, dir, dl);
    out[dl] = '/';
    memcpy(out + dl + (dl > 1 || dir[0] != '/'), path, pl + 1);   /* "/" + "a": "/a" */
    return out;
}

static int set_access_log(struct setter_args *a)
{
    const char *path = *a->value ? source_path(a->c, a->value) : "";
    if (!path)
        return WHY("access_log: path '%.100s...' is too long", a->value);
    a->c->access_log = path;
    a->c->access_log_from = a->from;
    return 0;
}

static int set_access_log_format(struct setter_args *a)
{
    if (!strcmp(a->value, "combined"))
        return a->c->access_log_format = ACCESS_LOG_COMBINED, 0;
    if (!strcmp(a->value, "json"))
        return a->c->access_log_format = ACCESS_LOG_JSON, 0;
    return WHY("access_log_format: '%s' is not combined or json", a->value);
}

static int set_log_level(struct setter_args *a)
{
    int l = log_level_parse(a->value);
    if (l < 0)
        return WHY("log_level: '%s' is not one of error, warn, info, debug", a->value);
    a->c->log_level = l;
    return 0;
}

/* A list of blocks ("10.0.0.0/8 2001:db8::/32 127.0.0.1", "all", "loopback") as rules. */
static int add_nets(struct setter_args *a, struct vec *rules, bool allow)
{
    char copy[2048];
    if (strlen(a->value) >= sizeof copy)
        return WHY("'%.100s...': too long", a->value);
    snprintf(copy, sizeof copy, "%s", a->value);
    int added = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
        const char *items[2] = { w, NULL };
        if (!strcmp(w, "loopback"))
            items[0] = "127.0.0.0/8", items[1] = "::1";
        for (int i = 0; i < 2 && items[i]; i++) {
            struct access_rule r = { .allow = allow };
            if (net_parse(items[i], &r.net, a->why, a->whylen))
                return -1;
            *(struct access_rule *)push(a->c, rules, sizeof r) = r;
            added++;
        }
    }
    if (!added)
        return WHY("expected addresses or blocks (10.0.0.0/8, 2001:db8::/32, all, loopback)");
    return 0;
}

static int set_allow(struct setter_args *a) { return add_nets(a, &a->s->access, true); }
static int set_deny(struct setter_args *a) { return add_nets(a, &a->s->access, false); }
static int set_real_ip_from(struct setter_args *a) { return add_nets(a, &a->c->parse->real_ip, true); }
/* builtin_routes_allow with no value: nobody (the line has cleared the list). */
static int set_builtin_allow(struct setter_args *a)
{
    return *a->value ? add_nets(a, &a->c->parse->builtin_allow, true) : 0;
}

static int set_real_ip_header(struct setter_args *a)
{
    static const char *const names[] = { "X-Forwarded-For", "Forwarded", "X-Real-IP" };
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(a->value, names[i]))
            return a->c->real_ip_header = (uint8_t)i, 0;
    return WHY("real_ip_header: '%s' is not X-Forwarded-For, Forwarded or X-Real-IP", a->value);
}

int config_set_path(struct setter_args *a, const char **dst, const char *what)
{
    if (!*a->value)
        return WHY("%s must not be empty", what);
    if (!(*dst = source_path(a->c, a->value)))
        return WHY("%s: path '%.100s...' is too long", what, a->value);
    return 0;
}

#define set_path config_set_path

static int set_cert_or_key(struct setter_args *a, struct vec *v, const char *what)
{
    struct named_path p = { NULL, a->from };
    if (set_path(a, &p.path, what))
        return -1;
    *(struct named_path *)push(a->c, v, sizeof p) = p;
    return 0;
}
/* A ticket's lifetime: whole seconds (OpenSSL counts them so), at most RFC 8446's 7 days. */
static int set_session_timeout(struct setter_args *a)
{
    double d;
    if (config_parse_duration(a->value, &d) || d < 1 || d > 7 * 86400)
        return WHY("ssl_session_timeout: '%s' is not a duration from 1s to 7 days (168h)", a->value);
    a->c->ssl_session_timeout = (double)(long)d;
    return 0;
}

/* An empty value: no key files (the process's own keys). */
static int set_ticket_key(struct setter_args *a)
{
    return *a->value ? set_cert_or_key(a, &a->c->parse->ticket_keys, "ssl_session_ticket_key") : 0;
}
static int set_cert(struct setter_args *a) { return set_cert_or_key(a, &a->s->certs, "cert"); }
static int set_keyfile(struct setter_args *a) { return set_cert_or_key(a, &a->s->keys, "key"); }

int config_set_flag(struct setter_args *a, bool *dst, const char *what)
{
    if (parse_bool(a->value, dst))
        return WHY("%s: '%s' is not on or off", what, a->value);
    return 0;
}
#define set_flag config_set_flag
static int set_https_redirect(struct setter_args *a) { return set_flag(a, &a->s->https_redirect, "https_redirect"); }
static int set_listing(struct setter_args *a) { return set_flag(a, &a->s->listing, "directory_listing"); }

static int set_root(struct setter_args *a)
{
    if (a->s->at[a->s->kind == SCOPE_LOCATION ? K_ALIAS : K_ROOT].src && a->s->alias)
        return WHY("root and alias both given");
    a->s->alias = false;
    a->s->root_from = a->c->parse->builtin ? CONFIG_BUILTIN : a->from;
    return set_path(a, &a->s->root, "root");
}

static int set_alias(struct setter_args *a)
{
    if (a->s->at[K_ROOT].src)
        return WHY("root and alias both given");
    a->s->alias = true;
    a->s->root_from = a->from;
    return set_path(a, &a->s->root, "alias");
}

static int set_index(struct setter_args *a)
{
    char copy[1024];
    if (strlen(a->value) >= sizeof copy)
        return WHY("index: too long");
    snprintf(copy, sizeof copy, "%s", a->value);
    a->s->index = (struct vec){ 0 };
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (strchr(w, '/') || !strcmp(w, ".") || !strcmp(w, ".."))
            return WHY("index: '%s' is not a file name", w);
        if (a->s->index.n == 8)
            return WHY("index: at most 8 names");
        *(const char **)push(a->c, &a->s->index, sizeof(char *)) = sdup(a->c, w);
    }
    return 0;                      /* empty: no index file (a directory is listed or 404) */
}

static bool tchar(int ch) { return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch)); }

/* "Name: value", or "always Name: value" for every status. */
static int set_header(struct setter_args *a)
{
    const char *v = a->value;
    struct added_header h = { 0 };
    if (!strncmp(v, "always", 6) && (v[6] == ' ' || v[6] == '\t')) {
        h.always = true;
        v += 7;
        while (*v == ' ' || *v == '\t')
            v++;
    }
    const char *colon = strchr(v, ':');
    if (!colon || colon == v)
        return WHY("header: expected 'Name: value', got '%.200s'", a->value);
    size_t nl = (size_t)(colon - v);
    char *name = dupn(a->c, v, nl);
    for (size_t i = 0; i < nl; i++) {
        if (!tchar((unsigned char)name[i]))
            return WHY("header: '%.100s' is not a field name", name);
        name[i] = (char)tolower((unsigned char)name[i]);
    }
    static const char *const framing[] = { "content-length", "transfer-encoding", "connection", "keep-alive",
                                           "upgrade", "te", "trailer", "proxy-connection", "date", "content-type" };
    for (size_t i = 0; i < sizeof framing / sizeof framing[0]; i++)
        if (!strcmp(name, framing[i]))
            return WHY("header: %s is the server's to send (framing, or set by each response)", name);
    const char *value = colon + 1;
    while (*value == ' ' || *value == '\t')
        value++;
    for (const char *p = value; *p; p++)
        if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
            return WHY("header: control character in the value of %s", name);
    h.name = name;
    h.value = sdup(a->c, value);
    h.name_len = (uint32_t)nl;
    h.value_len = (uint32_t)strlen(value);
    *(struct added_header *)push(a->c, &a->s->headers, sizeof h) = h;
    return 0;
}

static int set_max_body(struct setter_args *a)
{
    int rc = parse_size(a->value, &a->s->max_body);
    if (rc == -2)
        return WHY("max_body_size: '%s' is too large (at most %llug; 0: no limit)", a->value,
                   (unsigned long long)(SIZE_MAX_BYTES >> 30));
    if (rc)
        return WHY("max_body_size: '%s' is not a size (bytes, or with k, m, g; 0: no limit)", a->value);
    return 0;
}

/* "404 /404.html" or "500 502 503 /50x.html". */
static int set_error_page(struct setter_args *a)
{
    char copy[1100];
    if (strlen(a->value) >= sizeof copy)
        return WHY("error_page: too long");
    snprintf(copy, sizeof copy, "%s", a->value);
    const char *words[32];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w && n < 32; w = strtok_r(NULL, " \t", &save))
        words[n++] = w;
    if (n < 2 || words[n - 1][0] != '/')
        return WHY("error_page: expected 'STATUS... /path', got '%.200s'", a->value);
    const char *uri = sdup(a->c, words[n - 1]);
    for (int i = 0; i < n - 1; i++) {
        unsigned long long st;
        if (config_parse_uint(words[i], 599, &st) || st < 400)
            return WHY("error_page: '%s' is not an error status (400..599)", words[i]);
        struct error_page e = { (uint16_t)st, uri };
        *(struct error_page *)push(a->c, &a->s->errors, sizeof e) = e;
    }
    return 0;
}

/* limit_rate and limit_rate_after: sizes as max_body_size's (nginx's units), one a rate. */
static int set_limit(struct setter_args *a, uint64_t *dst, const char *key, const char *what)
{
    int rc = parse_size(a->value, dst);
    if (rc == -2)
        return WHY("%s: '%s' is too large (at most %llug; 0: no limit)", key, a->value,
                   (unsigned long long)(SIZE_MAX_BYTES >> 30));
    if (rc)
        return WHY("%s: '%s' is not %s (bytes, or with k, m, g: 100k; 0: no limit)", key, a->value, what);
    return 0;
}
static int set_limit_rate(struct setter_args *a)
{
    return set_limit(a, &a->s->limit_rate, "limit_rate", "a rate in bytes per second");
}
static int set_limit_rate_after(struct setter_args *a)
{
    return set_limit(a, &a->s->limit_rate_after, "limit_rate_after", "a size");
}

static int set_dotfiles(struct setter_args *a)
{
    if (!strcmp(a->value, "deny"))
        return a->s->dotfiles = DOTFILES_DENY, 0;
    if (!strcmp(a->value, "allow"))
        return a->s->dotfiles = DOTFILES_ALLOW, 0;
    return WHY("dotfiles: '%s' is not deny or allow", a->value);
}

static int set_fallback(struct setter_args *a)
{
    if (a->value[0] != '/' || strstr(a->value, "/.") || strchr(a->value, '?'))
        return WHY("fallback: '%s' is not a path under root (like /index.html)", a->value);
    a->s->fallback = sdup(a->c, a->value);
    return 0;
}

/* The variables a return may use, as nginx names them. */
static const char *const return_vars[] = { "scheme", "host", "request_uri", "uri", "args", "is_args",
                                           "query_string", "remote_addr", "server_port", NULL };

/* Checks the $variables of text; every "$name" or "${name}" must be one of return_vars. */
static int check_vars(struct setter_args *a, const char *text)
{
    for (const char *p = strchr(text, '$'); p; p = strchr(p + 1, '$')) {
        bool brace = p[1] == '{';
        const char *n = p + 1 + brace, *e = n;
        while (islower((unsigned char)*e) || *e == '_')
            e++;
        if (e == n && !brace)
            continue;              /* a '$' on its own is just a '$' */
        bool known = false;
        for (int i = 0; return_vars[i]; i++)
            known |= strlen(return_vars[i]) == (size_t)(e - n) && !strncmp(return_vars[i], n, (size_t)(e - n));
        if (brace && *e != '}')
            return WHY("return: '${' without its '}'");
        if (!known)
            return WHY("return: unknown variable '$%.*s' (scheme, host, request_uri, uri, args, is_args, "
                       "query_string, remote_addr, server_port)", (int)(e - n), n);
    }
    return 0;
}

/* "301 https://$host$request_uri", "404", "200 'text'" (quotes optional), or a URL
 * alone (302), as nginx's return. */
static int set_return(struct setter_args *a)
{
    const char *v = a->value;
    struct return_spec *r = alloc(a->c, sizeof *r);
    unsigned long long st = 302;
    const char *rest = v;
    if (isdigit((unsigned char)*v)) {
        char code[8];
        size_t n = strcspn(v, " \t");
        if (n >= sizeof code)
            return WHY("return: '%.20s' is not a status", v);
        memcpy(code, v, n);
        code[n] = 0;
        if (config_parse_uint(code, 599, &st) || st < 200)
            return WHY("return: '%s' is not a status (200..599)", code);
        rest = v + n;
        while (*rest == ' ' || *rest == '\t')
            rest++;
    } else if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8) && strncmp(v, "$scheme", 7)) {
        return WHY("return: expected 'STATUS [URL or text]' or a URL, got '%.200s'", v);
    }
    r->status = (uint16_t)st;
    r->is_url = st == 301 || st == 302 || st == 303 || st == 307 || st == 308;
    if (*rest) {
        size_t n = strlen(rest);
        if ((rest[0] == '"' || rest[0] == '\'') && n >= 2 && rest[n - 1] == rest[0])
            rest++, n -= 2;
        char *text = dupn(a->c, rest, n);
        /* \n, \t, \\ and the quote in a body */
        char *o = text;
        for (const char *p = text; *p; p++) {
            if (*p == '\\' && p[1]) {
                p++;
                *o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            } else {
                *o++ = *p;
            }
        }
        *o = 0;
        /* A URL goes in Location: no byte of it may end or split the field (a "\n" of
         * the text's escapes, a CR inside the line). */
        bool url_ok = *text;
        for (const char *p = text; *p && url_ok; p++)
            url_ok = (unsigned char)*p > 0x20 && *p != 0x7f;
        if (r->is_url && !url_ok)
            return WHY("return: '%s' is not a URL (no space or control byte: escape it as %%XX)", text);
        if (check_vars(a, text))
            return -1;
        r->text = text;
    } else if (r->is_url) {
        return WHY("return: a %llu needs the URL to send the client to", st);
    }
    a->s->ret = r;
    if (a->s->at[K_HANDLER].src || a->s->at[K_PROXY_PASS].src)
        return WHY("return and %s both given", a->s->at[K_HANDLER].src ? "handler" : "proxy_pass");
    return 0;
}

static int set_handler(struct setter_args *a)
{
    if (a->s->at[K_RETURN].src || a->s->at[K_PROXY_PASS].src)
        return WHY("%s and handler both given", a->s->at[K_RETURN].src ? "return" : "proxy_pass");
    if (!strcmp(a->value, "static")) {
        a->s->builtin_handler = false;
        a->s->route = NULL;
        return 0;
    }
    for (size_t i = 0; i < nknown_routes; i++)
        if (!strcmp(a->value, known_routes[i].name)) {
            a->s->builtin_handler = true;
            a->s->route = known_routes[i].route;
            return 0;
        }
    char names[400] = "static";
    for (size_t i = 0; i < nknown_routes; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), ", %s", known_routes[i].name);
    return WHY("handler: '%s' is not one of %s", a->value, names);
}

/* ---- authentication ---- */

/* A realm, quoted or not: it goes inside the challenge's quoted-string, so no quote,
 * backslash or control byte ("off" lifts an inherited auth_basic, as nginx's). */
static int set_auth_basic(struct setter_args *a)
{
    const char *v = a->value;
    size_t n = strlen(v);
    a->s->auth_basic_from = a->from;
    if (!strcmp(v, "off")) {
        a->s->auth_challenge = NULL;
        return 0;
    }
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0])
        v++, n -= 2;
    if (!n || n > 200)
        return WHY("auth_basic: expected a realm (at most 200 bytes) or off");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f || v[i] == '"' || v[i] == '\\')
            return WHY("auth_basic: the realm may not hold a quote, a backslash or a control byte");
    a->s->auth_challenge = fmt(a->c, "Basic realm=\"%.*s\", charset=\"UTF-8\"", (int)n, v);
    return 0;
}

static int set_auth_basic_user_file(struct setter_args *a)
{
    a->s->auth_file_from = a->from;
    return set_path(a, &a->s->auth_file, "auth_basic_user_file");
}

/* A path (and query) as a request line carries it, naming a location of the site as it is
 * written there: no escapes, nothing a request line cannot hold. */
static int set_auth_request(struct setter_args *a)
{
    const char *v = a->value;
    a->s->auth_request_from = a->from;
    if (!strcmp(v, "off")) {
        a->s->auth_request = NULL;
        return 0;
    }
    bool ok = v[0] == '/' && strlen(v) < 256;
    for (const char *p = v; *p && ok; p++)
        ok = (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f && !strchr("#%\"<>\\^`{|}", *p);
    if (!ok)
        return WHY("auth_request: '%.100s' is not off or a path of this site (like /auth; no %%, #, space or "
                   "control byte; at most 255 bytes)", v);
    a->s->auth_request = sdup(a->c, v);
    return 0;
}

static int set_auth_request_copy_headers(struct setter_args *a)
{
    char copy[1024];
    if (strlen(a->value) >= sizeof copy)
        return WHY("auth_request_copy_headers: too long");
    snprintf(copy, sizeof copy, "%s", a->value);
    /* Framing, and the fields the server reads itself (request.h's known fields), which
     * a copy would not change for it. */
    static const char *const framing[] = { "host", "content-length", "transfer-encoding", "connection", "keep-alive",
                                           "upgrade", "te", "trailer", "proxy-connection", "expect", "http2-settings",
                                           "accept-encoding", "if-match", "if-none-match", "if-modified-since",
                                           "if-unmodified-since", "range", "if-range", "user-agent", "referer" };
    a->s->auth_copy = (struct vec){ 0 };
    for (char *save = NULL, *w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
        for (char *p = w; *p; p++)
            if (!tchar((unsigned char)*p))
                return WHY("auth_request_copy_headers: '%.100s' is not a field name", w);
        for (char *p = w; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        for (size_t i = 0; i < sizeof framing / sizeof framing[0]; i++)
            if (!strcmp(w, framing[i]))
                return WHY("auth_request_copy_headers: %s is read by the server itself: it is not copied", w);
        if (a->s->auth_copy.n == 16)
            return WHY("auth_request_copy_headers: at most 16 names");
        *(const char **)push(a->c, &a->s->auth_copy, sizeof(char *)) = sdup(a->c, w);
    }
    if (!a->s->auth_copy.n)
        return WHY("auth_request_copy_headers: expected field names (X-User X-Email)");
    return 0;
}

/* ---- per-client limits ---- */

static uint32_t hash_bytes(uint32_t h, const char *p, size_t n);

static int set_conns_per_client(struct setter_args *a)
{
    unsigned long long n;
    if (config_parse_uint(a->value, UINT16_MAX, &n))
        return WHY("max_conns_per_client: '%s' is not a count of connections (0 for no limit, at most %u)", a->value,
                   UINT16_MAX);
    a->s->conns_per_client = (uint32_t)n;
    a->s->conns_per_client_from = a->from;
    return 0;
}

static int set_limit_status(struct setter_args *a)
{
    unsigned long long n;
    if (config_parse_uint(a->value, 599, &n) || n < 400)
        return WHY("limit_status: '%s' is not an error status (400..599; 429 or 503 as a rule)", a->value);
    a->s->limit_status = (uint16_t)n;
    return 0;
}

static int set_zone_size(struct setter_args *a)
{
    uint64_t n;
    int rc = parse_size(a->value, &n);
    if (rc || n < CLIENT_TABLE_MIN || n > CLIENT_TABLE_MAX)
        return WHY("limit_zone_size: '%s' is not a size from 64k to 64g (bytes, or with k, m, g)", a->value);
    a->c->limit_zone_size = n;
    return 0;
}

/* Where a scope is, in words that survive edits elsewhere in the file (unlike its line):
 * part of a limit_req rule's identity. */
static void scope_place(const struct scope *s, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    const struct scope *chain[3] = { NULL, NULL, NULL };
    int depth = 0;
    for (const struct scope *p = s; p && depth < 3; p = p->parent)
        chain[depth++] = p;
    for (int i = depth - 1; i >= 0 && n < cap; i--) {
        const struct scope *p = chain[i];
        if (p->kind == SCOPE_SITE)
            for (uint32_t k = 0; k < p->names.n && n < cap; k++)
                n += (size_t)snprintf(out + n, cap - n, "site %s ", ((const char **)p->names.v)[k]);
        else if (p->kind == SCOPE_LOCATION && n < cap)
            n += (size_t)snprintf(out + n, cap - n, "location %s%s ", p->exact ? "= " : "", p->path);
    }
}

/* "RATE [burst=N] [nodelay | delay=N] [key=realip|addr|host]": RATE as nginx's, 10r/s or
 * 600r/m; each option once. */
static int set_limit_req(struct setter_args *a)
{
    char copy[300];
    if (strlen(a->value) >= sizeof copy)
        return WHY("limit_req '%.100s...': too long", a->value);
    if (a->s->limit_req.n == 8)
        return WHY("limit_req: at most 8 in one scope");
    snprintf(copy, sizeof copy, "%s", a->value);
    struct limit_req_rule *r = alloc(a->c, sizeof *r);
    char *save = NULL, *w = strtok_r(copy, " \t", &save);
    const char *usage = "limit_req = RATE [burst=N] [nodelay | delay=N] [key=realip|addr|host], RATE as 10r/s or 600r/m";
    if (!w)
        return WHY("expected %s", usage);
    size_t wl = strlen(w);
    bool per_minute = wl > 3 && !strcmp(w + wl - 3, "r/m");
    if (wl <= 3 || (!per_minute && strcmp(w + wl - 3, "r/s")))
        return WHY("limit_req: '%s' is not a rate (like 10r/s or 600r/m)", w);
    w[wl - 3] = 0;
    unsigned long long n;
    if (config_parse_uint(w, 1000000, &n) || n == 0)
        return WHY("limit_req: the rate '%s' is not a count of requests from 1 to 1000000", w);
    r->rate = (uint32_t)(per_minute ? n * 1000 / 60 : n * 1000);
    if (!r->rate)
        r->rate = 1;
    bool burst = false, delay = false, nodelay = false, key = false;
    for (char *o; (o = strtok_r(NULL, " \t", &save));) {
        bool *seen = !strncmp(o, "burst=", 6) ? &burst : !strncmp(o, "delay=", 6) ? &delay
                   : !strcmp(o, "nodelay") ? &nodelay : !strncmp(o, "key=", 4) ? &key : NULL;
        if (!seen)
            return WHY("limit_req: unknown option '%s' (%s)", o, usage);
        if (*seen)
            return WHY("limit_req: '%.*s' given twice", (int)strcspn(o, "="), o);
        *seen = true;
        if (seen == &burst || seen == &delay) {
            if (config_parse_uint(o + 6, 1000000, &n))
                return WHY("limit_req: %s is not a count of requests (0 to 1000000)", o);
            *(seen == &burst ? &r->burst : &r->delay) = (uint32_t)n * 1000;
        } else if (seen == &key) {
            if (!strcmp(o + 4, "realip"))
                r->key = LIMIT_KEY_REALIP;
            else if (!strcmp(o + 4, "addr"))
                r->key = LIMIT_KEY_ADDR;
            else if (!strcmp(o + 4, "host"))
                r->key = LIMIT_KEY_HOST;
            else
                return WHY("limit_req: key '%s' is not realip, addr or host", o + 4);
        }
    }
    if (nodelay && delay)
        return WHY("limit_req: nodelay and delay= both given (nodelay is delay=burst)");
    if (delay && r->delay > r->burst)
        return WHY("limit_req: delay=%u is more than burst=%u", r->delay / 1000, r->burst / 1000);
    if (nodelay)
        r->delay = UINT32_MAX;
    r->from = a->from;
    r->refused_by = fmt(a->c, "limit_req = %s (%s)", a->value, a->from);
    char place[600];
    scope_place(a->s, place, sizeof place);
    uint32_t h = hash_bytes(hash_bytes(2166136261u, place, strlen(place)), a->value, strlen(a->value));
    r->id = (uint16_t)(h ^ h >> 16);
    *(struct limit_req_rule **)push(a->c, &a->s->limit_req, sizeof r) = r;
    return 0;
}

/* ---- the table ---- */

enum key_type { T_SECTION, T_BOOL, T_DURATION, T_U32, T_COUNT, T_STACK, T_FN };

struct key_def {
    uint8_t type;                  /* enum key_type */
    size_t off;                    /* the global value in struct config */
    unsigned long long lo, hi;
    const char *what;              /* what a bad value is not, for the error */
    int (*set)(struct setter_args *a);
};

#define TOP KEY_TOP
#define ANY (KEY_TOP | KEY_SITE | KEY_LOCATION)
#define SITE (KEY_TOP | KEY_SITE)
#define G(field) offsetof(struct config, field)

/* Every key the format takes.  config_keys[k] and defs[k] describe key k (enum key_id). */
struct config_key config_keys[K_COUNT] = {
    [K_LISTEN] = { "listen", SITE, true, false },
    [K_WORKERS] = { "workers", TOP, false, false },
    [K_USER] = { "user", TOP, false, false },
    [K_PARKING] = { "parking", TOP, false, false },
    [K_BUILTIN_ROUTES] = { "builtin_routes", TOP, false, false },
    [K_SERVER_HEADER] = { "server_header", TOP, false, false },
    [K_ACCESS_LOG] = { "access_log", TOP, false, false },
    [K_ACCESS_LOG_FORMAT] = { "access_log_format", TOP, false, false },
    [K_LOG_LEVEL] = { "log_level", TOP, false, false },
    [K_PREFACE_TIMEOUT] = { "preface_timeout", TOP, false, false },
    [K_HANDSHAKE_TIMEOUT] = { "handshake_timeout", TOP, false, false },
    [K_IDLE_TIMEOUT] = { "idle_timeout", TOP, false, false },
    [K_SSL_SESSION_TICKETS] = { "ssl_session_tickets", TOP, false, false },
    [K_SSL_SESSION_TICKET_KEY] = { "ssl_session_ticket_key", TOP, true, false },
    [K_SSL_SESSION_TIMEOUT] = { "ssl_session_timeout", TOP, false, false },
    [K_WRITE_TIMEOUT] = { "write_timeout", TOP, false, false },
    [K_BODY_TIMEOUT] = { "body_timeout", TOP, false, false },
    [K_SHUTDOWN_TIMEOUT] = { "shutdown_timeout", TOP, false, false },
    [K_SCAVENGE_INTERVAL] = { "scavenge_interval", TOP, false, false },
    [K_MAX_CONNS] = { "max_conns", TOP, false, false },
    [K_MAX_HANDLERS] = { "max_handlers", TOP, false, false },
    [K_MAX_CONCURRENT_STREAMS] = { "max_concurrent_streams", TOP, false, false },
    [K_MAX_HEADER_LIST_SIZE] = { "max_header_list_size", TOP, false, false },
    [K_INITIAL_WINDOW_SIZE] = { "initial_window_size", TOP, false, false },
    [K_CONNECTION_WINDOW_SIZE] = { "connection_window_size", TOP, false, false },
    [K_MAX_RESETS_PER_SECOND] = { "max_resets_per_second", TOP, false, false },
    [K_HPACK_ENCODER_TABLE_SIZE] = { "hpack_encoder_table_size", TOP, false, false },
    [K_CORO_STACK_SIZE] = { "coro_stack_size", TOP, false, false },
    [K_CORO_GUARD_PAGES] = { "coro_guard_pages", TOP, false, false },
    [K_REAL_IP_FROM] = { "real_ip_from", TOP, true, false },
    [K_REAL_IP_HEADER] = { "real_ip_header", TOP, false, false },
    [K_BUILTIN_ROUTES_ALLOW] = { "builtin_routes_allow", TOP, true, false },
    [K_SITE] = { "site", TOP, true, true },
    [K_LOCATION] = { "location", TOP | KEY_SITE, true, true },
    [K_CERT] = { "cert", SITE, true, false },
    [K_KEY] = { "key", SITE, true, false },
    [K_HTTPS_REDIRECT] = { "https_redirect", SITE, false, false },
    [K_ROOT] = { "root", ANY, false, false },
    [K_ALIAS] = { "alias", KEY_LOCATION, false, false },
    [K_INDEX] = { "index", ANY, false, false },
    [K_HEADER] = { "header", ANY, true, false },
    [K_ALLOW] = { "allow", ANY, true, false },
    [K_DENY] = { "deny", ANY, true, false },
    [K_MAX_BODY_SIZE] = { "max_body_size", ANY, false, false },
    [K_ERROR_PAGE] = { "error_page", ANY, true, false },
    [K_DOTFILES] = { "dotfiles", ANY, false, false },
    [K_DIRECTORY_LISTING] = { "directory_listing", ANY, false, false },
    [K_FALLBACK] = { "fallback", ANY, false, false },
    [K_LIMIT_RATE] = { "limit_rate", ANY, false, false },
    [K_LIMIT_RATE_AFTER] = { "limit_rate_after", ANY, false, false },
    [K_RETURN] = { "return", ANY, false, false },
    [K_HANDLER] = { "handler", KEY_LOCATION, false, false },
    [K_AUTH_BASIC] = { "auth_basic", ANY, false, false },
    [K_AUTH_BASIC_USER_FILE] = { "auth_basic_user_file", ANY, false, false },
    [K_AUTH_REQUEST] = { "auth_request", ANY, false, false },
    [K_AUTH_REQUEST_COPY_HEADERS] = { "auth_request_copy_headers", ANY, false, false },
    [K_UPSTREAM] = { "upstream", TOP, true, true },
    [K_MAX_CONNS_PER_CLIENT] = { "max_conns_per_client", SITE, false, false },
    [K_LIMIT_REQ] = { "limit_req", ANY, true, false },
    [K_LIMIT_STATUS] = { "limit_status", ANY, false, false },
    [K_LIMIT_ZONE_SIZE] = { "limit_zone_size", TOP, false, false },
    [K_LIMIT_PREFIX_V4] = { "limit_prefix_v4", TOP, false, false },
    [K_LIMIT_PREFIX_V6] = { "limit_prefix_v6", TOP, false, false },
};
const size_t config_nkeys = K_COUNT;

static struct key_def defs[K_COUNT] = {
    [K_LISTEN] = { T_FN, 0, 0, 0, NULL, set_listen },
    [K_WORKERS] = { T_COUNT, G(workers), 0, 1024, "a worker count (1..1024 or auto)", NULL },
    [K_USER] = { T_FN, 0, 0, 0, NULL, set_user },
    [K_PARKING] = { T_BOOL, G(parking), 0, 0, NULL, NULL },
    [K_BUILTIN_ROUTES] = { T_BOOL, G(builtin_routes), 0, 0, NULL, NULL },
    [K_SERVER_HEADER] = { T_BOOL, G(server_header), 0, 0, NULL, NULL },
    [K_ACCESS_LOG] = { T_FN, 0, 0, 0, NULL, set_access_log },
    [K_ACCESS_LOG_FORMAT] = { T_FN, 0, 0, 0, NULL, set_access_log_format },
    [K_LOG_LEVEL] = { T_FN, 0, 0, 0, NULL, set_log_level },
    [K_PREFACE_TIMEOUT] = { T_DURATION, G(preface_timeout), 0, 0, NULL, NULL },
    [K_HANDSHAKE_TIMEOUT] = { T_DURATION, G(handshake_timeout), 0, 0, NULL, NULL },
    [K_IDLE_TIMEOUT] = { T_DURATION, G(idle_timeout), 0, 0, NULL, NULL },
    [K_SSL_SESSION_TICKETS] = { T_BOOL, G(ssl_session_tickets), 0, 0, NULL, NULL },
    [K_SSL_SESSION_TICKET_KEY] = { T_FN, 0, 0, 0, NULL, set_ticket_key },
    [K_SSL_SESSION_TIMEOUT] = { T_FN, 0, 0, 0, NULL, set_session_timeout },
    [K_WRITE_TIMEOUT] = { T_DURATION, G(write_timeout), 0, 0, NULL, NULL },
    [K_BODY_TIMEOUT] = { T_DURATION, G(body_timeout), 0, 0, NULL, NULL },
    [K_SHUTDOWN_TIMEOUT] = { T_DURATION, G(shutdown_timeout), 0, 0, NULL, NULL },
    [K_SCAVENGE_INTERVAL] = { T_DURATION, G(scavenge_interval), 0, 0, NULL, NULL },
    [K_MAX_CONNS] = { T_COUNT, G(max_conns), 0, 10000000, "a connection count (or auto)", NULL },
    [K_MAX_HANDLERS] = { T_COUNT, G(max_handlers), 0, 10000000, "a handler count (or auto)", NULL },
    [K_MAX_CONCURRENT_STREAMS] = { T_U32, G(max_concurrent_streams), 1, 1u << 31, NULL, NULL },
    [K_MAX_HEADER_LIST_SIZE] = { T_U32, G(max_header_list_size), 1024, 16u << 20, NULL, NULL },
    [K_INITIAL_WINDOW_SIZE] = { T_U32, G(initial_window_size), 1, 0x7fffffff, NULL, NULL },
    [K_CONNECTION_WINDOW_SIZE] = { T_U32, G(connection_window_size), 65535, 0x7fffffff, NULL, NULL },
    [K_MAX_RESETS_PER_SECOND] = { T_U32, G(max_resets_per_second), 1, 1000000, NULL, NULL },
    [K_HPACK_ENCODER_TABLE_SIZE] = { T_U32, G(hpack_encoder_table_size), 0, 65536, NULL, NULL },
    [K_CORO_STACK_SIZE] = { T_STACK, G(coro_stack_size), CORO_MIN_STACK, 64u << 20,
                            "a stack size in bytes (8192 .. 64 MiB)", NULL },
    [K_CORO_GUARD_PAGES] = { T_BOOL, G(coro_guard_pages), 0, 0, NULL, NULL },
    [K_REAL_IP_FROM] = { T_FN, 0, 0, 0, NULL, set_real_ip_from },
    [K_REAL_IP_HEADER] = { T_FN, 0, 0, 0, NULL, set_real_ip_header },
    [K_BUILTIN_ROUTES_ALLOW] = { T_FN, 0, 0, 0, NULL, set_builtin_allow },
    [K_SITE] = { T_SECTION, 0, 0, 0, NULL, NULL },
    [K_LOCATION] = { T_SECTION, 0, 0, 0, NULL, NULL },
    [K_CERT] = { T_FN, 0, 0, 0, NULL, set_cert },
    [K_KEY] = { T_FN, 0, 0, 0, NULL, set_keyfile },
    [K_HTTPS_REDIRECT] = { T_FN, 0, 0, 0, NULL, set_https_redirect },
    [K_ROOT] = { T_FN, 0, 0, 0, NULL, set_root },
    [K_ALIAS] = { T_FN, 0, 0, 0, NULL, set_alias },
    [K_INDEX] = { T_FN, 0, 0, 0, NULL, set_index },
    [K_HEADER] = { T_FN, 0, 0, 0, NULL, set_header },
    [K_ALLOW] = { T_FN, 0, 0, 0, NULL, set_allow },
    [K_DENY] = { T_FN, 0, 0, 0, NULL, set_deny },
    [K_MAX_BODY_SIZE] = { T_FN, 0, 0, 0, NULL, set_max_body },
    [K_ERROR_PAGE] = { T_FN, 0, 0, 0, NULL, set_error_page },
    [K_DOTFILES] = { T_FN, 0, 0, 0, NULL, set_dotfiles },
    [K_DIRECTORY_LISTING] = { T_FN, 0, 0, 0, NULL, set_listing },
    [K_FALLBACK] = { T_FN, 0, 0, 0, NULL, set_fallback },
    [K_LIMIT_RATE] = { T_FN, 0, 0, 0, NULL, set_limit_rate },
    [K_LIMIT_RATE_AFTER] = { T_FN, 0, 0, 0, NULL, set_limit_rate_after },
    [K_RETURN] = { T_FN, 0, 0, 0, NULL, set_return },
    [K_HANDLER] = { T_FN, 0, 0, 0, NULL, set_handler },
    [K_AUTH_BASIC] = { T_FN, 0, 0, 0, NULL, set_auth_basic },
    [K_AUTH_BASIC_USER_FILE] = { T_FN, 0, 0, 0, NULL, set_auth_basic_user_file },
    [K_AUTH_REQUEST] = { T_FN, 0, 0, 0, NULL, set_auth_request },
    [K_AUTH_REQUEST_COPY_HEADERS] = { T_FN, 0, 0, 0, NULL, set_auth_request_copy_headers },
    [K_UPSTREAM] = { T_SECTION, 0, 0, 0, NULL, NULL },
    [K_MAX_CONNS_PER_CLIENT] = { T_FN, 0, 0, 0, NULL, set_conns_per_client },
    [K_LIMIT_REQ] = { T_FN, 0, 0, 0, NULL, set_limit_req },
    [K_LIMIT_STATUS] = { T_FN, 0, 0, 0, NULL, set_limit_status },
    [K_LIMIT_ZONE_SIZE] = { T_FN, 0, 0, 0, NULL, set_zone_size },
    [K_LIMIT_PREFIX_V4] = { T_U32, G(limit_prefix_v4), 1, 32, NULL, NULL },
    [K_LIMIT_PREFIX_V6] = { T_U32, G(limit_prefix_v6), 1, 128, NULL, NULL },
};

/* The modules whose keys are in the table too (config_tree.h): their setters, what
 * clears a repeating one, and their hooks. */
#define CONFIG_MODULES_MAX 4
static const struct config_module *modules[CONFIG_MODULES_MAX];
static size_t nmodules;
static void (*clears[K_COUNT])(struct scope *s);

void config_add_module(const struct config_module *m)
{
    if (nmodules == CONFIG_MODULES_MAX) {
        fprintf(stderr, "h2park: too many configuration modules\n");
        abort();
    }
    modules[nmodules++] = m;
    for (size_t i = 0; i < m->nkeys; i++) {
        const struct config_module_key *k = &m->keys[i];
        config_keys[k->id] = (struct config_key){ k->name, k->scopes, k->repeats, false };
        defs[k->id] = (struct key_def){ T_FN, 0, 0, 0, NULL, k->set };
        clears[k->id] = k->clear;
    }
}

/* A global value of a plain type: 0, or -1 with why. */
static int set_global(struct config *c, int k, const char *key, const char *value, char *why, size_t whylen)
{
    const struct key_def *d = &defs[k];
    char *field = (char *)c + d->off;
    unsigned long long n;
    double x;
    bool b;
    switch (d->type) {
    case T_BOOL:
        if (parse_bool(value, &b))
            return snprintf(why, whylen, "%s: '%s' is not on or off", key, value), -1;
        *(bool *)field = b;
        return 0;
    case T_DURATION:
        if (config_parse_duration(value, &x))
            return snprintf(why, whylen, "%s: '%s' is not a duration (like 10s, 250ms, 5m; at most 30 days)", key,
                            value), -1;
        *(double *)field = x;
        return 0;
    case T_U32:
        if (config_parse_uint(value, d->hi, &n) || n < d->lo)
            return snprintf(why, whylen, "%s: '%s' is out of range (%llu..%llu)", key, value, d->lo, d->hi), -1;
        *(uint32_t *)field = (uint32_t)n;
        return 0;
    case T_COUNT:
        if (!strcmp(value, "auto"))
            n = 0;
        else if (config_parse_uint(value, d->hi, &n) || n == 0)
            return snprintf(why, whylen, "%s: '%s' is not %s", key, value, d->what), -1;
        *(long *)field = (long)n;
        return 0;
    case T_STACK:
        if (config_parse_uint(value, d->hi, &n) || n < d->lo)
            return snprintf(why, whylen, "%s: '%s' is not %s", key, value, d->what), -1;
        *(size_t *)field = (size_t)n;
        return 0;
    default:
        return snprintf(why, whylen, "%s: not a value", key), -1;
    }
}

/* ---- reading a source ---- */

struct config *config_new(void)
{
    struct config *c = sc_calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "h2park: out of memory\n");
        abort();
    }
    atomic_init(&c->refs, 1);
    c->parse = alloc(c, sizeof *c->parse);
    struct scope *t = &c->parse->top;
    t->kind = SCOPE_TOP;
    t->sites_tail = &t->sites;
    t->locations_tail = &t->locations;
    t->upstreams_tail = &t->upstreams;
    for (size_t i = 0; i < nmodules; i++)
        if (modules[i]->top)
            modules[i]->top(t);
    t->root = "./www";
    t->root_from = CONFIG_BUILTIN;
    t->limit_status = 429;
    c->limit_zone_size = 10 << 20;
    c->limit_prefix_v4 = 32;
    c->limit_prefix_v6 = 64;
    c->parking = true;
    c->builtin_routes = true;
    c->server_header = true;
    c->access_log = "";
    c->access_log_from = CONFIG_BUILTIN;
    c->log_level = LOG_INFO;
    c->preface_timeout = 60;
    c->handshake_timeout = 60;
    c->ssl_session_tickets = true;
    c->ssl_session_timeout = 12 * 3600;
    c->idle_timeout = 300;
    c->write_timeout = 30;
    c->body_timeout = 30;
    c->shutdown_timeout = 10;
    c->scavenge_interval = 5;
    c->max_concurrent_streams = 100;
    c->max_header_list_size = 65536;
    c->initial_window_size = 65535;
    c->hpack_encoder_table_size = 4096;
    c->connection_window_size = 1 << 20;
    c->max_resets_per_second = 200;
    c->coro_stack_size = CORO_DEFAULT_STACK;
    c->parking_source = "default";
    for (int i = 0; i < MAX_LISTEN; i++)
        c->listen_of_slot[i] = -1;
    return c;
}

static const char *scope_name(const struct scope *s)
{
    return s->kind == SCOPE_TOP        ? "at the top level"
           : s->kind == SCOPE_SITE     ? "in this site"
           : s->kind == SCOPE_UPSTREAM ? "in this upstream"
                                       : "in this location";
}

/* Where a key was first set in the source being read (a key twice is an error only there). */
static const char *origin_text(const struct config *c, struct origin o)
{
    static __thread char text[200];
    snprintf(text, sizeof text, "%s:%u", c->parse->src_name, o.line);
    return text;
}

/* Clears what a repeating key listed in s, before a newer source's first line of it. */
static void clear_repeating(struct config_parse *p, struct scope *s, int k)
{
    switch (k) {
    case K_LISTEN: s->listens = (struct vec){ 0 }; break;
    case K_CERT: s->certs = (struct vec){ 0 }; break;
    case K_KEY: s->keys = (struct vec){ 0 }; break;
    case K_HEADER: s->headers = (struct vec){ 0 }; break;
    case K_ALLOW: case K_DENY: s->access = (struct vec){ 0 }; s->at[K_ALLOW].src = s->at[K_DENY].src = p->src; break;
    case K_ERROR_PAGE: s->errors = (struct vec){ 0 }; break;
    case K_REAL_IP_FROM: p->real_ip = (struct vec){ 0 }; break;
    case K_SSL_SESSION_TICKET_KEY: p->ticket_keys = (struct vec){ 0 }; break;
    case K_BUILTIN_ROUTES_ALLOW: p->builtin_allow = (struct vec){ 0 }; break;
    case K_LIMIT_REQ: s->limit_req = (struct vec){ 0 }; break;
    default:
        if (clears[k])
            clears[k](s);
        break;
    }
}

/* One "key = value" in scope s of the source being read. */
static void set_key(struct config *c, struct scope *s, const char *key, const char *value, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    int k = -1;
    for (int i = 0; i < K_COUNT && k < 0; i++)
        if (config_keys[i].name && !strcmp(config_keys[i].name, key))
            k = i;
    const char *where = p->line ? fmt(c, "%s:%u", p->src_name, p->line) : fmt(c, "%s", p->src_name);
    if (k < 0 || config_keys[k].section) {
        config_error(e, "%s: unknown key '%s'", where, key);
        return;
    }
    unsigned scope_bit = s->kind == SCOPE_TOP        ? KEY_TOP
                         : s->kind == SCOPE_SITE     ? KEY_SITE
                         : s->kind == SCOPE_UPSTREAM ? KEY_UPSTREAM
                                                     : KEY_LOCATION;
    if (!(config_keys[k].scopes & scope_bit)) {
        const char *only = config_keys[k].scopes == KEY_TOP        ? "only at the top level, for the whole daemon"
                           : config_keys[k].scopes == KEY_LOCATION ? "only in a location"
                           : config_keys[k].scopes == KEY_UPSTREAM ? "only in an upstream section"
                           : config_keys[k].scopes == ANY          ? "at the top level, in a site or in a location"
                                                                   : "at the top level or in a site";
        config_error(e, "%s: '%s' is not allowed %s: it goes %s", where, key, scope_name(s), only);
        return;
    }
    struct origin *at = &s->at[k];
    bool cli = !p->line;
    struct scope saved;
    struct vec saved_real_ip = p->real_ip, saved_builtin_allow = p->builtin_allow, saved_tickets = p->ticket_keys;
    bool replacing = config_keys[k].repeats && at->src != p->src;
    if (replacing) {
        saved = *s;                /* a line that fails replaces nothing */
        clear_repeating(p, s, k);
    } else if (!config_keys[k].repeats && at->src == p->src && !cli) {
        struct origin first = *at;
        config_error(e, "%s: '%s' given twice %s (first at %s)", where, key, scope_name(s), origin_text(c, first));
        return;
    }
    char why[1024];
    struct setter_args a = { c, s, value, where, why, sizeof why };
    int rc = defs[k].set ? defs[k].set(&a) : set_global(c, k, key, value, why, sizeof why);
    if (rc) {
        if (replacing) {
            *s = saved;
            p->real_ip = saved_real_ip;
            p->builtin_allow = saved_builtin_allow;
            p->ticket_keys = saved_tickets;
        }
        config_error(e, "%s: %s", where, why);
        return;
    }
    at->src = p->src;
    at->line = p->line;
    if (k == K_PARKING)
        c->parking_source = p->builtin ? "default" : cli ? "command line" : "config file";
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

/* A site's name: "*", "*.example.com", a host name or an IP address, in lower case. */
static int site_name_ok(const char *w, char *out, size_t cap)
{
    if (!strcmp(w, "*"))
        return snprintf(out, cap, "*"), 0;
    const char *h = w;
    bool wild = !strncmp(w, "*.", 2);
    if (wild)
        h += 2;
    size_t hl = strlen(h);
    /* One wildcard, leftmost; no port; an IPv6 address in brackets. */
    if (!hl || strchr(h, '*') || (h[0] != '[' && strchr(h, ':')) || (h[0] == '[' && h[hl - 1] != ']'))
        return -1;
    int n = host_normalize(h, out + (wild ? 2 : 0), cap - 2);
    if (n <= 0 || (wild && h[0] == '['))
        return -1;
    if (wild)
        memcpy(out, "*.", 2);
    return 0;
}

static struct scope *open_site(struct config *c, char *rest, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    struct scope *s = alloc(c, sizeof *s);
    s->kind = SCOPE_SITE;
    s->from = fmt(c, "%s:%u", p->src_name, p->line);
    s->locations_tail = &s->locations;
    int words = 0;
    for (char *save = NULL, *w = strtok_r(rest, " \t", &save); w; w = strtok_r(NULL, " \t", &save), words++) {
        char name[300];
        if (strlen(w) >= 256 || site_name_ok(w, name, sizeof name)) {
            config_error(e, "%s: site name '%.100s' is not a host name, *.domain, an IP address or *", s->from, w);
            continue;
        }
        *(const char **)push(c, &s->names, sizeof(char *)) = sdup(c, name);
    }
    if (!words)
        config_error(e, "%s: a site needs its names (example.com, *.example.com, or * for every other host)",
                     s->from);
    *p->top.sites_tail = s;
    p->top.sites_tail = &s->next;
    return s;
}

static struct scope *open_location(struct config *c, struct scope *parent, char *rest, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    struct scope *s = alloc(c, sizeof *s);
    s->kind = SCOPE_LOCATION;
    s->parent = parent;
    s->from = fmt(c, "%s:%u", p->src_name, p->line);
    char *save = NULL, *w = strtok_r(rest, " \t", &save);
    if (w && !strcmp(w, "=")) {
        s->exact = true;
        w = strtok_r(NULL, " \t", &save);
    } else if (w && w[0] == '=' && w[1]) {
        s->exact = true;
        w++;
    }
    const char *bad = NULL;
    /* nginx's other kinds of location, named for what an nginx user wrote. */
    if (w && !s->exact && (!strcmp(w, "~") || !strcmp(w, "~*")))
        bad = "regular-expression locations (location ~ and ~*) are not supported: use a prefix "
              "('location /images/ {') or an exact path ('location = /favicon.ico {'); dotfiles are denied already";
    else if (w && !s->exact && !strcmp(w, "^~"))
        bad = "'location ^~ /prefix/' is 'location /prefix/ {' here: there are no regular expressions for it to win over";
    else if (w && !s->exact && w[0] == '@')
        bad = "named locations (location @name) are not supported: a location is 'location /prefix/ {' or "
              "'location = /exact/path {'";
    else if (!w || w[0] != '/')
        bad = "a location is 'location /prefix/ {' or 'location = /exact/path {'";
    else if (strtok_r(NULL, " \t", &save))
        bad = "one path per location";
    else if (strchr(w, '?') || strchr(w, '#') || strchr(w, '%'))
        bad = "a location's path is matched against the decoded path: no '?', '#' or '%' escapes";
    else if (strstr(w, "//") || strstr(w, "/./") || strstr(w, "/../") || !strcmp(w + strlen(w) - 2, "/.") ||
             (strlen(w) >= 3 && !strcmp(w + strlen(w) - 3, "/..")))
        bad = "a location's path has no empty, '.' or '..' segments (requests never have them)";
    if (bad) {
        config_error(e, "%s: %s", s->from, bad);
        s->path = "/";
    } else {
        s->path = sdup(c, w);
    }
    for (struct scope *o = parent->locations; o && !bad; o = o->next)
        if (o->exact == s->exact && !strcmp(o->path, s->path))
            config_error(e, "%s: location %s%s is given twice in this %s (first at %s)", s->from, s->exact ? "= " : "",
                         s->path, parent->kind == SCOPE_TOP ? "file's top level" : "site", o->from);
    *parent->locations_tail = s;
    parent->locations_tail = &s->next;
    return s;
}

/* upstream NAME { server = ... }: a group of servers, at the top level, named once. */
static struct scope *open_upstream(struct config *c, char *rest, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    struct scope *s = alloc(c, sizeof *s);
    s->kind = SCOPE_UPSTREAM;
    s->from = fmt(c, "%s:%u", p->src_name, p->line);
    s->keepalive = 32;
    s->keepalive_timeout = 60;
    char *save = NULL, *w = strtok_r(rest, " \t", &save);
    bool ok = w && strtok_r(NULL, " \t", &save) == NULL && strlen(w) < 64;
    for (const char *q = w; ok && *q; q++)
        ok = isalnum((unsigned char)*q) || *q == '_' || *q == '-' || *q == '.';
    if (!ok) {
        config_error(e, "%s: an upstream is 'upstream NAME {', NAME letters, digits, '_', '-' or '.' (at most 63)",
                     s->from);
        s->path = "";
    } else {
        s->path = sdup(c, w);
        for (struct scope *o = p->top.upstreams; o; o = o->next)
            if (!strcmp(o->path, s->path))
                config_error(e, "%s: upstream %s is given twice (first at %s)", s->from, s->path, o->from);
    }
    *p->top.upstreams_tail = s;
    p->top.upstreams_tail = &s->next;
    return s;
}

/* The section a line opens ("site", "location", "upstream" and a '{' at its end): the
 * keyword's length, or 0. */
static size_t section_keyword(const char *s, size_t sl)
{
    static const char *const words[] = { "site", "location", "upstream" };
    if (s[sl - 1] != '{')
        return 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i]);
        if (!strncmp(s, words[i], n) && (isspace((unsigned char)s[n]) || s[n] == '{'))
            return n;
    }
    return 0;
}

int config_parse(struct config *c, const char *text, size_t len, const char *name, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    int before = e->count;
    p->src++;
    p->src_name = sdup(c, name);
    p->builtin = !strcmp(name, CONFIG_BUILTIN);
    struct scope *stack[3] = { &p->top, NULL, NULL };
    uint32_t opened_at[3] = { 0, 0, 0 };
    int depth = 0;
    size_t pos = 0;
    for (p->line = 1; pos < len; p->line++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        char line[2048];
        bool too_long = ll >= sizeof line;
        memcpy(line, text + pos, too_long ? 0 : ll);
        line[too_long ? 0 : ll] = 0;
        pos += ll + (nl ? 1 : 0);
        if (too_long) {
            config_error(e, "%s:%u: line too long", name, p->line);
            continue;
        }
        if (memchr(line, 0, ll)) {
            config_error(e, "%s:%u: a NUL byte in the line", name, p->line);
            continue;
        }
        /* A comment starts at a '#' that begins a word. */
        for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
            if (h == line || isspace((unsigned char)h[-1])) {
                *h = 0;
                break;
            }
        char *s = trim(line);
        if (!*s)
            continue;
        struct scope *cur = stack[depth];
        if (!strcmp(s, "}")) {
            if (depth == 0)
                config_error(e, "%s:%u: '}' with no section open", name, p->line);
            else
                depth--;
            continue;
        }
        size_t sl = strlen(s);
        char *eq = strchr(s, '=');
        size_t kw = section_keyword(s, sl);
        if (kw) {
            s[sl - 1] = 0;
            bool is_site = s[0] == 's', is_upstream = s[0] == 'u';
            char *rest = trim(s + kw);
            if ((is_site || is_upstream) && cur->kind != SCOPE_TOP) {
                config_error(e, "%s:%u: %s goes at the top level, not %s", name, p->line,
                             is_site ? "a site" : "an upstream", scope_name(cur));
            } else if (cur->kind == SCOPE_UPSTREAM) {
                config_error(e, "%s:%u: an upstream holds server lines, not locations", name, p->line);
            } else if (is_upstream) {
                stack[depth + 1] = open_upstream(c, rest, e);
                opened_at[++depth] = p->line;
            } else if (!is_site && cur->kind == SCOPE_LOCATION) {
                config_error(e, "%s:%u: locations do not nest: close this one first (opened at %s:%u)", name,
                             p->line, name, opened_at[depth]);
            } else if (is_site) {
                stack[depth + 1] = open_site(c, rest, e);
                opened_at[++depth] = p->line;
            } else {
                stack[depth + 1] = open_location(c, cur, rest, e);
                opened_at[++depth] = p->line;
            }
            continue;
        }
        if (!eq && sl > 1 && s[sl - 1] == ';') {
            /* nginx's "root www;": say how it is written here. */
            s[sl - 1] = 0;
            char *key = trim(s), *value = key + strcspn(key, " \t");
            if (*value)
                *value++ = 0;
            config_error(e, "%s:%u: '%.100s %.200s;' is nginx's syntax: write '%.100s = %.200s' (key = value, no ';')",
                         name, p->line, key, trim(value), key, trim(value));
            continue;
        }
        if (!eq) {
            config_error(e, "%s:%u: expected 'key = value', 'site NAMES {', 'location PATH {', 'upstream NAME {' "
                         "or '}', got '%.200s'",
                         name, p->line, s);
            continue;
        }
        *eq = 0;
        char *key = trim(s), *value = trim(eq + 1);
        size_t vl = strlen(value);
        /* A ';' ends nginx's lines, never a value of these keys (a header's value, a
         * return's text may end in one: "default-src 'self';"). */
        if (vl && value[vl - 1] == ';' && strcmp(key, "header") && strcmp(key, "return")) {
            value[vl - 1] = 0;
            config_error(e, "%s:%u: %.100s: drop the ';' at the end ('%.100s = %.200s'): this is not nginx's syntax",
                         name, p->line, key, key, trim(value));
            continue;
        }
        set_key(c, cur, key, value, e);
    }
    for (; depth > 0; depth--)
        config_error(e, "%s:%u: %s opened here is not closed with '}'", name, opened_at[depth],
                     stack[depth]->kind == SCOPE_SITE ? "site" : stack[depth]->kind == SCOPE_UPSTREAM ? "upstream" : "location");
    p->line = 0;
    return e->count > before ? CONFIG_ERROR : CONFIG_OK;
}

/* The directory path is in, absolute and without "." or ".." (realpath: the file was
 * just found there), or NULL. */
static const char *directory_of(struct config *c, const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return errno = ENAMETOOLONG, NULL;
    if (!realpath(dir, real))
        return NULL;
    return sdup(c, real);
}

int config_load_file(struct config *c, const char *path, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    struct buf b = { 0 };
    char why[300];
    if (read_regular_file(path, &b, why, sizeof why)) {
        config_error(e, "%s: cannot read: %s", path, why);
        return CONFIG_ERROR;
    }
    if (!(p->dir = directory_of(c, path))) {
        config_error(e, "%s: cannot resolve its directory: %s", path, strerror(errno));
        buf_free(&b);
        return CONFIG_ERROR;
    }
    /* A file's sites serve files only from a root it (or the command line) names: the
     * embedded default's ./www, in whatever directory h2park started, is not theirs. */
    if (p->top.root_from && !strcmp(p->top.root_from, CONFIG_BUILTIN))
        p->top.root = p->top.root_from = NULL;
    int rc = config_parse(c, b.data ? b.data : "", b.len, path, e);
    p->dir = NULL;
    buf_free(&b);
    return rc;
}

int config_set(struct config *c, const char *key, const char *value, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    int before = e->count;
    if (!p->src_name || strcmp(p->src_name, "command line")) {
        p->src++;
        p->src_name = "command line";
        p->builtin = false;
    }
    p->line = 0;
    if (!strcmp(key, "listen") && !p->cli_listen) {
        p->cli_listen = true;      /* a flag's addresses replace every listen line */
        for (struct scope *s = p->top.sites; s; s = s->next)
            s->listens = (struct vec){ 0 };
    }
    set_key(c, &p->top, key, value, e);
    return e->count > before ? CONFIG_ERROR : CONFIG_OK;
}

int config_apply_debug_env(struct config *c, const char *env, void (*warn)(const char *key), struct config_errors *e)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", env);
    int before = e->count;
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
            else
                config_error(e, "H2PARK_DEBUG: http2serveparking=%s: expected 0 or 1", value);
            c->parking_source = "H2PARK_DEBUG";
        } else if (!strcmp(key, "corostackpaint")) {
            c->coro_paint = !strcmp(value, "1");
        } else if (!strcmp(key, "parkhandlersatonce")) {
            c->park_handlers_at_once = !strcmp(value, "1");
        } else if (warn) {
            warn(key);
        }
    }
    return e->count > before ? CONFIG_ERROR : CONFIG_OK;
}

/* ---- the tree: what each location serves by ---- */

static void merge(struct config *c, struct merged *m, const struct scope *s)
{
    const struct origin *at = s->at;
    if (at[K_ROOT].src || at[K_ALIAS].src || (s->kind == SCOPE_TOP && s->root)) {
        m->root = s->root;
        m->root_from = s->root_from;
        m->alias = s->alias;
    }
    if (at[K_INDEX].src)
        m->index = s->index;
    /* Headers and error pages add to what is inherited, a name or status given again
     * replacing the inherited one; access rules replace the inherited list, since their
     * order decides. */
    if (s->headers.n) {
        const struct added_header *own = s->headers.v;
        struct vec kept = { 0 };
        for (uint32_t j = 0; j < m->headers.n; j++) {
            const struct added_header *o = (const struct added_header *)m->headers.v + j;
            bool replaced = false;
            for (uint32_t i = 0; i < s->headers.n; i++)
                replaced |= !strcmp(o->name, own[i].name);
            if (!replaced)
                *(struct added_header *)push(c, &kept, sizeof *o) = *o;
        }
        for (uint32_t i = 0; i < s->headers.n; i++)
            *(struct added_header *)push(c, &kept, sizeof *own) = own[i];
        m->headers = kept;
    }
    if (at[K_ALLOW].src || at[K_DENY].src) {
        m->access = s->access.v;
        m->naccess = s->access.n;
    }
    if (at[K_MAX_BODY_SIZE].src)
        m->max_body = s->max_body;
    for (uint32_t i = 0; i < s->errors.n; i++) {
        const struct error_page *p = (const struct error_page *)s->errors.v + i;
        struct vec kept = { 0 };
        for (uint32_t j = 0; j < m->errors.n; j++) {
            const struct error_page *o = (const struct error_page *)m->errors.v + j;
            if (o->status != p->status)
                *(struct error_page *)push(c, &kept, sizeof *o) = *o;
        }
        *(struct error_page *)push(c, &kept, sizeof *p) = *p;
        m->errors = kept;
    }
    if (at[K_DOTFILES].src)
        m->dotfiles = s->dotfiles;
    if (at[K_DIRECTORY_LISTING].src)
        m->listing = s->listing;
    if (at[K_FALLBACK].src)
        m->fallback = s->fallback;
    if (at[K_LIMIT_RATE].src)
        m->limit_rate = s->limit_rate;
    if (at[K_LIMIT_RATE_AFTER].src)
        m->limit_rate_after = s->limit_rate_after;
    if (at[K_RETURN].src) {
        m->handler = HANDLER_RETURN;
        m->ret = s->ret;
        m->route = NULL;
    }
    if (at[K_HANDLER].src) {
        m->handler = s->builtin_handler ? HANDLER_BUILTIN : HANDLER_STATIC;
        m->route = s->route;
        m->ret = NULL;
    }
    if (at[K_LIMIT_REQ].src)
        m->limit_req = s->limit_req;   /* replaces what is inherited, as nginx's limit_req does */
    if (at[K_LIMIT_STATUS].src || s->kind == SCOPE_TOP)
        m->limit_status = s->limit_status;
    if (at[K_AUTH_BASIC].src)
        m->auth_basic = (struct scope *)s;
    if (at[K_AUTH_BASIC_USER_FILE].src) {
        m->auth_file = s->auth_file;
        m->auth_file_from = s->auth_file_from;
    }
    if (at[K_AUTH_REQUEST].src)
        m->auth_request = (struct scope *)s;
    if (at[K_AUTH_REQUEST_COPY_HEADERS].src)
        m->auth_copy = s->auth_copy;
    for (size_t i = 0; i < nmodules; i++)
        if (modules[i]->merge)
            modules[i]->merge(c, m, s);
}

static bool same_strings(const struct vec *a, const char *const *b, uint32_t nb)
{
    if (a->n != nb)
        return false;
    for (uint32_t i = 0; i < nb; i++)
        if (strcmp(((const char **)a->v)[i], b[i]))
            return false;
    return true;
}

static uint64_t next_docroot_id(void)
{
    static _Atomic uint64_t id;
    return atomic_fetch_add(&id, 1) + 1;
}

/* The root a location serves files from; one whose path is NULL (no root anywhere above a
 * location of a file's site) serves none: every file is 404. */
static const struct docroot *docroot_for(struct config *c, struct vec *roots, const struct merged *m)
{
    bool builtin = m->root_from && !strcmp(m->root_from, CONFIG_BUILTIN);
    for (uint32_t i = 0; i < roots->n; i++) {
        struct docroot *d = ((struct docroot **)roots->v)[i];
        if (config_same_text(d->path, m->root) && same_strings(&m->index, d->index, d->nindex) && d->builtin_default == builtin)
            return d;
    }
    struct docroot *d = alloc(c, sizeof *d);
    d->path = m->root;
    d->from = m->root_from ? m->root_from : "no root";
    d->index = m->index.v;
    d->nindex = (uint8_t)m->index.n;
    d->builtin_default = builtin;
    d->fd = -1;
    d->id = next_docroot_id();
    *(struct docroot **)push(c, roots, sizeof d) = d;
    return d;
}

static uint32_t hash_bytes(uint32_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* A server into the configuration's one array: its index, or -1 past MAX_UPSTREAM_TOTAL. */
/* The file auth_basic_user_file names, one per path for the whole configuration. */
static const struct auth_file *auth_file_for(struct config *c, const char *path, const char *from)
{
    struct auth_file **tail = &c->auth_files;
    for (; *tail; tail = &(*tail)->next)
        if (!strcmp((*tail)->path, path))
            return *tail;
    struct auth_file *f = alloc(c, sizeof *f);
    f->path = path;
    f->from = from;
    *tail = f;
    return f;
}

/* A location's authentication, or NULL for none (auth_request's location is found once the
 * site's locations are: resolve_auth_requests). */
static const struct auth_conf *auth_for(struct config *c, const struct merged *m, struct config_errors *e)
{
    struct scope *b = m->auth_basic && m->auth_basic->auth_challenge ? m->auth_basic : NULL;
    struct scope *q = m->auth_request && m->auth_request->auth_request ? m->auth_request : NULL;
    if (!b && !q)
        return NULL;
    struct auth_conf *a = alloc(c, sizeof *a);
    if (b) {
        if (!m->auth_file) {
            if (!b->auth_reported)
                config_error(e, "%s: auth_basic without auth_basic_user_file (here or above it): the users' file is "
                             "needed", b->auth_basic_from);
            b->auth_reported = true;
        } else {
            a->challenge = b->auth_challenge;
            a->basic_from = b->auth_basic_from;
            a->file = auth_file_for(c, m->auth_file, m->auth_file_from);
        }
    }
    if (q) {
        a->request_uri = q->auth_request;
        a->request_from = q->auth_request_from;
        a->copy = m->auth_copy.v;
        a->ncopy = (uint8_t)m->auth_copy.n;
    }
    return a;
}

/* Each auth_request's location in its site: one that proxy_passes over HTTP/1.1, not the
 * location it protects; it then answers only subrequests (nginx's internal). */
static void resolve_auth_requests(struct config *c, struct site *site, const struct merged *merged,
                                  struct config_errors *e)
{
    for (uint32_t i = 0; i < site->nlocations; i++) {
        struct location *l = &site->locations[i];
        struct auth_conf *a = (struct auth_conf *)l->auth;
        if (!a || !a->request_uri)
            continue;
        size_t pl = strcspn(a->request_uri, "?");
        const struct location *t = location_lookup(site, a->request_uri, pl, true);
        const char *why = t == l ? "names the location it protects"
                          : t->handler != HANDLER_PROXY || !t->proxy
                              ? "names a location without proxy_pass: give the authentication server a location "
                                "of its own (location = /auth { proxy_pass = http://auth-server })"
                          : t->proxy->h2 ? "names a location that passes over HTTP/2: the subrequest speaks HTTP/1.1"
                                         : NULL;
        struct scope *q = merged[i].auth_request;
        if (why) {
            if (!q->auth_reported)
                config_error(e, "%s: auth_request = %s %s (the location at %s)", a->request_from, a->request_uri, why,
                             t->from);
            q->auth_reported = true;
            continue;
        }
        a->request = t;
    }
    for (uint32_t i = 0; i < site->nlocations; i++) {
        const struct auth_conf *a = site->locations[i].auth;
        if (!a || !a->request)
            continue;
        struct location *t = (struct location *)a->request;
        if (!t->auth)
            t->auth = alloc(c, sizeof(struct auth_conf));
        ((struct auth_conf *)t->auth)->internal = true;
    }
}

static void fill_location(struct config *c, struct vec *roots, struct location *l, const struct merged *m,
                          struct config_errors *e)
{
    l->handler = m->handler;
    for (size_t i = 0; i < nmodules; i++)
        if (modules[i]->location)
            modules[i]->location(c, l, m, e);
    l->route = m->route;
    l->ret = m->ret;
    l->alias = m->alias;
    l->dotfiles = m->dotfiles;
    l->listing = m->listing;
    l->fallback = m->fallback;
    l->max_body = m->max_body;
    l->limit_rate = m->limit_rate;
    l->limit_rate_after = m->limit_rate_after;
    l->headers = m->headers.v;
    l->nheaders = (uint16_t)m->headers.n;
    l->access = m->access;
    l->naccess = (uint16_t)m->naccess;
    l->errors = m->errors.v;
    l->nerrors = (uint16_t)m->errors.n;
    l->limit_req = m->limit_req.v;
    l->nlimit_req = (uint8_t)m->limit_req.n;
    l->limits = l->nlimit_req > 0;
    l->limit_status = m->limit_status;
    l->path_len = (uint32_t)strlen(l->path);
    l->auth = auth_for(c, m, e);
    /* An exact location aliased to a file: its directory is the root, its name the file
     * (the file itself is no root: opening it as one failed the whole configuration). */
    const char *slash = l->alias && l->exact && l->handler == HANDLER_STATIC ? strrchr(m->root, '/') : NULL;
    if (slash && slash[1]) {
        struct merged dir = *m;
        dir.root = slash == m->root ? "/" : dupn(c, m->root, (size_t)(slash - m->root));
        l->docroot = docroot_for(c, roots, &dir);
        l->alias_file = slash + 1;
    } else {
        l->docroot = docroot_for(c, roots, m);
    }
}

/* A site's locations: its own, the top level's it does not override, "/" if neither
 * has it, and the built-in routes at their paths unless something else is placed
 * there.  A built-in route takes its settings (access rules, headers) from the location
 * that would have answered its path without it, so "location /-/ { allow = ... }"
 * restricts the built-in routes under /-/ as it does any file there. */
static void build_locations(struct config *c, struct vec *roots, struct site *site, const struct scope *sites_scope,
                            const struct merged *site_m, const struct scope *top, struct config_errors *e)
{
    struct vec locs = { 0 }, merged = { 0 };
    const struct scope *lists[2] = { sites_scope ? sites_scope->locations : NULL, top->locations };
    bool has_root = false;
    for (int li = 0; li < 2; li++)
        for (const struct scope *s = lists[li]; s; s = s->next) {
            bool shadowed = false;
            for (uint32_t i = 0; i < locs.n && li == 1; i++) {
                const struct location *o = (const struct location *)locs.v + i;
                shadowed |= o->exact == s->exact && !strcmp(o->path, s->path);
            }
            if (shadowed)
                continue;
            struct merged *m = push(c, &merged, sizeof *m);
            *m = *site_m;
            merge(c, m, s);
            struct location *l = push(c, &locs, sizeof *l);
            l->path = s->path;
            l->exact = s->exact;
            l->from = s->from;
            has_root |= !s->exact && !strcmp(s->path, "/");
        }
    if (!has_root) {
        *(struct merged *)push(c, &merged, sizeof *site_m) = *site_m;
        struct location *l = push(c, &locs, sizeof *l);
        l->path = "/";
        l->from = site->from;
    }
    uint32_t placed_by_config = locs.n;
    for (size_t r = 0; c->builtin_routes && r < nknown_routes; r++) {
        const char *path = known_routes[r].path;
        size_t pl = strlen(path);
        int cover = -1;
        bool placed = false;
        for (uint32_t i = 0; i < placed_by_config; i++) {
            const struct location *o = (const struct location *)locs.v + i;
            size_t ol = strlen(o->path);
            placed |= o->exact && !strcmp(o->path, path);
            if (!o->exact && ol <= pl && !memcmp(o->path, path, ol) &&
                (cover < 0 || strlen(((const struct location *)locs.v)[cover].path) < ol))
                cover = (int)i;
        }
        if (placed)
            continue;
        struct merged *m = push(c, &merged, sizeof *m);
        *m = ((const struct merged *)merged.v)[cover];
        m->handler = HANDLER_BUILTIN;
        m->route = known_routes[r].route;
        m->ret = NULL;
        struct location *l = push(c, &locs, sizeof *l);
        l->path = path;
        l->exact = true;
        l->implicit = true;
        l->from = "built-in route";
    }
    for (uint32_t i = 0; i < locs.n; i++)
        fill_location(c, roots, (struct location *)locs.v + i, (const struct merged *)merged.v + i, e);
    site->locations = locs.v;
    site->nlocations = locs.n;
    uint32_t nexact = 0;
    for (uint32_t i = 0; i < locs.n; i++) {
        site->locations[i].site = site;
        nexact += site->locations[i].exact;
    }
    uint32_t slots = 8;
    while (slots < nexact * 2)
        slots *= 2;
    site->exact = alloc(c, slots * sizeof *site->exact);
    site->exact_mask = slots - 1;
    site->prefixes = alloc(c, (locs.n - nexact) * sizeof *site->prefixes + sizeof(void *));
    for (uint32_t i = 0; i < locs.n; i++) {
        struct location *l = &site->locations[i];
        if (l->exact) {
            uint32_t h = hash_bytes(2166136261u, l->path, l->path_len) & site->exact_mask;
            while (site->exact[h])
                h = (h + 1) & site->exact_mask;
            site->exact[h] = l;
            site->exact_sieve |= UINT64_C(1) << location_sieve_bit(l->path, l->path_len);
        } else {
            /* longest first; equal lengths keep their order */
            uint32_t j = site->nprefixes++;
            while (j > 0 && site->prefixes[j - 1]->path_len < l->path_len) {
                site->prefixes[j] = site->prefixes[j - 1];
                j--;
            }
            site->prefixes[j] = l;
        }
    }
    resolve_auth_requests(c, site, merged.v, e);
}

static void add_name(struct config *c, struct site_table *t, const char *name, const struct site *s,
                     const char *listen, struct config_errors *e)
{
    size_t n = strlen(name);
    uint32_t h = hash_bytes(2166136261u, name, n) & t->mask;
    for (; t->names[h].name; h = (h + 1) & t->mask)
        if (t->names[h].len == n && !memcmp(t->names[h].name, name, n)) {
            if (e && t->names[h].site != s)
                config_error(e, "%s: site name %s is taken already, on %s, by the site at %s", s->from, name, listen,
                             t->names[h].site->from);
            return;
        }
    (void)c;
    t->names[h] = (struct site_name){ name, (uint32_t)n, s };
}

static void build_table(struct config *c, struct site_table *t, uint32_t bit, const char *listen,
                        struct config_errors *e)
{
    uint32_t names = 0;
    for (uint32_t i = 0; i < c->nsites; i++)
        if (c->sites[i].listen_mask & bit) {
            t->nsites++;
            names += c->sites[i].nnames;
        }
    uint32_t slots = 8;
    while (slots < names * 2)
        slots *= 2;
    t->names = alloc(c, slots * sizeof *t->names);
    t->mask = slots - 1;
    const struct site *first = NULL, *catch_all = NULL;
    for (uint32_t i = 0; i < c->nsites; i++) {
        const struct site *s = &c->sites[i];
        if (!(s->listen_mask & bit))
            continue;
        if (s->catch_all && catch_all && e)
            config_error(e, "%s: two sites for every other host on %s: this one and the one at %s", s->from, listen,
                         catch_all->from);
        if (s->catch_all && !catch_all)
            catch_all = s;
        if (!first)
            first = s;
        for (uint16_t k = 0; k < s->nnames; k++)
            if (strcmp(s->names[k], "*"))
                add_name(c, t, s->names[k], s, listen, e);
    }
    /* No site for every other host: the first site of the listener, as nginx. */
    t->dflt = catch_all ? catch_all : first;
}

static bool same_pairs(const struct tls_identity *t, const struct vec *certs, const struct vec *keys)
{
    if (t->npairs != certs->n)
        return false;
    for (uint32_t i = 0; i < certs->n; i++)
        if (strcmp(t->pairs[i].cert, ((const struct named_path *)certs->v)[i].path) ||
            strcmp(t->pairs[i].key, ((const struct named_path *)keys->v)[i].path))
            return false;
    return true;
}

/* A site's max_conns_per_client on each of its listeners: counted at accept, before the
 * site is known (a TLS client names it in its handshake), so the sites of one address
 * must agree.  seen[j]: a site has given listener j its limit (or none). */
static void limit_listeners(struct config *c, const struct site *site, uint32_t n, const char *from, bool *seen,
                            struct config_errors *e)
{
    for (int j = 0; j < c->nlisten; j++) {
        struct listen_addr *l = &c->listen[j];
        if (!(site->listen_mask >> j & 1))
            continue;
        if (!seen[j]) {
            seen[j] = true;
            l->max_conns_per_client = n;
            l->max_conns_per_client_from = site->from;
            l->max_conns_per_client_refused = fmt(c, "max_conns_per_client = %u (%s)", n, from ? from : site->from);
        } else if (l->max_conns_per_client != n) {
            config_error(e, "%s: max_conns_per_client %u on %s, where the site at %s has %u: the sites of one address "
                         "share its limit", site->from, n, l->text, l->max_conns_per_client_from,
                         l->max_conns_per_client);
        }
    }
}

static bool rule_id_taken(const struct vec *rules, uint16_t id)
{
    for (uint32_t q = 0; q < rules->n; q++)
        if (((struct limit_req_rule **)rules->v)[q]->id == id)
            return true;
    return false;
}

/* Every limit_req rule once, each with an id no other rule of the configuration has, and
 * which locations any limit may apply to. */
static void finish_limits(struct config *c)
{
    struct vec rules = { 0 };
    for (uint32_t i = 0; i < c->nsites; i++) {
        struct site *site = &c->sites[i];
        bool by_request = false;      /* behind a trusted proxy, connections count by request */
        for (int j = 0; j < c->nlisten; j++)
            by_request |= (site->listen_mask >> j & 1) && c->listen[j].max_conns_per_client && c->nreal_ip_from;
        for (uint32_t k = 0; k < site->nlocations; k++) {
            struct location *l = &site->locations[k];
            l->limits = l->nlimit_req || by_request;
            for (uint8_t r = 0; r < l->nlimit_req; r++) {
                struct limit_req_rule *rule = (struct limit_req_rule *)l->limit_req[r];
                bool known = false;
                for (uint32_t q = 0; q < rules.n && !known; q++)
                    known = ((struct limit_req_rule **)rules.v)[q] == rule;
                if (known)
                    continue;
                while (!rule->id || rule_id_taken(&rules, rule->id))
                    rule->id++;
                *(struct limit_req_rule **)push(c, &rules, sizeof rule) = rule;
            }
        }
    }
    c->limit_rules = rules.v;
    c->nlimit_rules = rules.n;
}

bool config_has_limits(const struct config *c)
{
    if (c->nlimit_rules)
        return true;
    for (int j = 0; j < c->nlisten; j++)
        if (c->listen[j].max_conns_per_client)
            return true;
    return false;
}

int config_finish(struct config *c, struct config_errors *e)
{
    struct config_parse *p = c->parse;
    int before = e->count;
    const struct scope *top = &p->top;
    c->real_ip_from = p->real_ip.v;
    c->nreal_ip_from = (uint16_t)p->real_ip.n;
    c->ticket_key_files = p->ticket_keys.v;
    c->nticket_key_files = (uint32_t)p->ticket_keys.n;
    c->builtin_allow = p->builtin_allow.v;
    c->nbuiltin_allow = (uint16_t)p->builtin_allow.n;
    /* The sites: the file's, or the top level as the one site for every host. */
    uint32_t nsites = 0;
    for (const struct scope *s = top->sites; s; s = s->next)
        nsites++;
    c->nsites = nsites ? nsites : 1;
    c->sites = alloc(c, c->nsites * sizeof *c->sites);
    for (size_t i = 0; i < nmodules; i++)
        if (modules[i]->tree)
            modules[i]->tree(c, top, e);
    struct merged top_m = { .dotfiles = DOTFILES_DENY, .handler = HANDLER_STATIC };
    *(const char **)push(c, &top_m.index, sizeof(char *)) = "index.html";
    merge(c, &top_m, top);
    struct vec roots = { 0 }, tls = { 0 };
    bool conns_limited[MAX_LISTEN] = { false };
    const struct scope *s = top->sites;
    for (uint32_t i = 0; i < c->nsites; i++, s = s ? s->next : NULL) {
        struct site *site = &c->sites[i];
        const struct scope *own = nsites ? s : NULL;
        site->from = own ? own->from : "the top level";
        site->names = own ? own->names.v : NULL;
        site->nnames = own ? (uint16_t)own->names.n : 0;
        site->catch_all = !own;
        for (uint16_t k = 0; k < site->nnames; k++) {
            if (!strcmp(site->names[k], "*"))
                site->catch_all = true;
            else if (!site->name && site->names[k][0] != '*')
                site->name = site->names[k];
        }
        /* Its listen addresses: its own, else the top level's. */
        const struct vec *ls = own && own->listens.n ? &own->listens : &top->listens;
        for (uint32_t k = 0; k < ls->n; k++) {
            const struct listen_addr *a = (const struct listen_addr *)ls->v + k;
            int idx = -1;
            for (int j = 0; j < c->nlisten && idx < 0; j++)
                if (same_listen_addr(&c->listen[j], a)) {
                    idx = j;
                    if (c->listen[j].tls != a->tls || c->listen[j].proxy_protocol != a->proxy_protocol ||
                        c->listen[j].dual != a->dual)
                        config_error(e, "%s: listen %s is also given at %s with other options: one address, one "
                                     "set of options", a->from, a->text, c->listen[j].from);
                }
            if (idx < 0 && c->nlisten == MAX_LISTEN) {
                config_error(e, "%s: too many listen addresses (at most %d)", a->from, MAX_LISTEN);
                continue;
            }
            if (idx < 0) {
                idx = c->nlisten++;
                c->listen[idx] = *a;
            }
            site->listen_mask |= 1u << idx;
        }
        const struct scope *ls_ = own && own->at[K_MAX_CONNS_PER_CLIENT].src ? own : top;
        limit_listeners(c, site, ls_->conns_per_client, ls_->conns_per_client_from, conns_limited, e);
        struct merged m = top_m;
        if (own) {
            merge(c, &m, own);
            site->https_redirect = own->at[K_HTTPS_REDIRECT].src ? own->https_redirect : top->https_redirect;
        } else {
            site->https_redirect = top->https_redirect;
        }
        build_locations(c, &roots, site, own, &m, top, e);
        /* Its certificates: its own, else the top level's; none: the self-signed one. */
        const struct scope *cs = own && (own->certs.n || own->keys.n) ? own : top;
        site->tls = -1;
        bool on_tls = false;
        for (int j = 0; j < c->nlisten; j++)
            on_tls |= (site->listen_mask >> j & 1) && c->listen[j].tls;
        if (cs->certs.n != cs->keys.n) {
            if (cs != top || i == 0)
                config_error(e, "%s: %u cert and %u key %s: each certificate needs its key (they pair in order), or "
                             "give neither for a self-signed certificate",
                             cs->certs.n ? ((const struct named_path *)cs->certs.v)[0].from
                                         : ((const struct named_path *)cs->keys.v)[0].from,
                             cs->certs.n, cs->keys.n, scope_name(cs));
            continue;
        }
        if (!on_tls)
            continue;
        for (uint32_t t = 0; t < tls.n && site->tls < 0; t++)
            if (same_pairs((const struct tls_identity *)tls.v + t, &cs->certs, &cs->keys))
                site->tls = (int)t;
        if (site->tls < 0) {
            struct tls_identity *id = push(c, &tls, sizeof *id);
            struct tls_pair *pairs = alloc(c, (cs->certs.n + 1) * sizeof *pairs);
            for (uint32_t k = 0; k < cs->certs.n; k++) {
                const struct named_path *cp = (const struct named_path *)cs->certs.v + k;
                const struct named_path *kp = (const struct named_path *)cs->keys.v + k;
                pairs[k] = (struct tls_pair){ cp->path, kp->path, cp->from, kp->from };
            }
            id->pairs = pairs;
            id->npairs = (uint8_t)cs->certs.n;
            site->tls = (int)(tls.n - 1);
        }
    }
    c->tls = tls.v;
    c->ntls = tls.n;
    c->docroots = roots.v;
    c->ndocroots = roots.n;
    if (c->nlisten == 0)
        config_error(e, "no listen address");
    for (int j = 0; j < c->nlisten; j++)
        build_table(c, &c->listen_sites[j], 1u << j, c->listen[j].text, e);
    build_table(c, &c->all_sites, ~0u, "any address", NULL);
    finish_limits(c);
    for (size_t i = 0; i < nmodules; i++)
        if (modules[i]->finish)
            modules[i]->finish(c);
    return e->count > before ? CONFIG_ERROR : CONFIG_OK;
}

/* ---- derived values that depend on the machine ---- */

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
 * response it got ahead of the peer by (REQUEST_OUTPUT_MAX), with the stream itself.
 * (Wide output, up to REQUEST_OUTPUT_WIDE, comes from a budget of its own per worker.) */
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
