/* Unit tests of the configuration: the embedded default, every kind of value, the errors
 * (file, line and problem, every one of them at once; a key given twice), listen
 * replacement and options, where root came from, user, H2PARK_DEBUG; sites (names,
 * wildcards, the default of a listener, names taken twice), locations (exact, longest
 * prefix, what each inherits, the built-in routes), and the inputs a request brings to
 * them: hosts, paths, addresses, and proxies' headers. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "app/app.h"
#include "check.h"
#include "config.h"
#include "coro.h"
#include "log.h"

static struct config *c;
static struct config_errors e;
#define err (e.text)

/* The embedded default, then text as test.conf, then the tree. */
static int parse(const char *text)
{
    config_unref(c);
    c = config_new();
    memset(&e, 0, sizeof e);
    config_parse(c, default_conf_text, default_conf_size, CONFIG_BUILTIN, &e);
    config_parse(c, text, strlen(text), "test.conf", &e);
    config_finish(c, &e);
    return e.count ? CONFIG_ERROR : CONFIG_OK;
}

static const struct site *site_of(const char *host, int listen)
{
    char h[256];
    int n = host_normalize(host, h, sizeof h);
    return site_for_host(listen < 0 ? &c->all_sites : &c->listen_sites[listen], h, n > 0 ? (size_t)n : 0);
}

static const struct location *loc_of(const struct site *s, const char *path)
{
    return location_for_path(s, path, strlen(path), false);
}

static void embedded_default_parses(void)
{
    CHECKF(parse("") == CONFIG_OK, "%s", err);
    CHECK(c->nlisten == 2 && !c->listen[0].tls && c->listen[1].tls);
    CHECK(!strcmp(c->listen[0].text, "127.0.0.1:8080") && !strcmp(c->listen[1].text, "127.0.0.1:8443"));
    CHECK(c->nsites == 1 && c->sites[0].catch_all && c->parking && c->builtin_routes && c->workers == 0);
    const struct location *root = loc_of(&c->sites[0], "/index.html");
    CHECK(root && !root->exact && root->handler == HANDLER_STATIC && !strcmp(root->docroot->path, "./www"));
    CHECK(root->docroot->builtin_default && !strcmp(root->docroot->from, CONFIG_BUILTIN));
    CHECK(loc_of(&c->sites[0], "/-/healthz")->handler == HANDLER_BUILTIN && loc_of(&c->sites[0], "/metrics")->implicit);
    CHECK(c->preface_timeout == 60 && c->handshake_timeout == 60 && c->idle_timeout == 300 && c->write_timeout == 30 && c->shutdown_timeout == 10);
    CHECK(c->max_concurrent_streams == 100 && c->max_header_list_size == 65536);
    /* The size is the file's: it ends in its last newline, not in a NUL or padding. */
    CHECK(strlen(default_conf_text) == default_conf_size && default_conf_text[default_conf_size - 1] == '\n');
}

static void values_and_units(void)
{
    CHECKF(parse("workers = 3\nroot = /srv/www # comment\nparking = off\nidle_timeout = 250ms\n"
                 "write_timeout = 2m\nmax_conns = 5000\ncoro_stack_size = 65536\ncoro_guard_pages = on\n"
                 "  max_concurrent_streams=7  \nlog_level = debug\naccess_log = /tmp/a.log\n") == CONFIG_OK, "%s", err);
    CHECK(c->workers == 3 && !strcmp(loc_of(&c->sites[0], "/")->docroot->path, "/srv/www") && !c->parking);
    CHECK(c->idle_timeout > 0.2499 && c->idle_timeout < 0.2501 && c->write_timeout == 120);
    CHECK(c->max_conns == 5000 && c->coro_stack_size == 65536 && c->coro_guard_pages && c->max_concurrent_streams == 7);
    CHECK(c->log_level == LOG_DEBUG && !strcmp(c->access_log, "/tmp/a.log"));
    CHECK(!strcmp(c->parking_source, "config file"));
}

/* The limits that bound what clients can pin: parsed, and auto resolved to something
 * that fits the machine. */
static void deadlines_and_caps(void)
{
    CHECKF(parse("body_timeout = 2500ms\nmax_handlers = 50\n") == CONFIG_OK, "%s", err);
    CHECK(c->body_timeout > 2.4999 && c->body_timeout < 2.5001 && config_max_handlers(c) == 50);
    CHECKF(parse("max_handlers = auto\n") == CONFIG_OK, "%s", err);
    long auto_handlers = config_max_handlers(c);
    CHECK(auto_handlers >= 16);
    /* A quarter of memory, at the worst a handler can hold, over the workers. */
    double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    double workers = (double)sysconf(_SC_NPROCESSORS_ONLN);
    CHECKF((double)auto_handlers * (double)config_handler_worst_bytes(c) * workers <= mem / 4 + 1e6, "%ld", auto_handlers);
    CHECK(config_handler_worst_bytes(c) >= c->coro_stack_size + c->max_header_list_size + c->initial_window_size);
    CHECK(parse("body_timeout = never\n") == CONFIG_ERROR && strstr(err, "test.conf:1: body_timeout"));
    CHECK(parse("max_handlers = 0\n") == CONFIG_ERROR && strstr(err, "max_handlers: '0' is not a handler count"));
    /* max_conns = auto leaves room for every worker's open-file cache. */
    CHECKF(parse("workers = 2\n") == CONFIG_OK, "%s", err);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur > 2000 && rl.rlim_cur != RLIM_INFINITY)
        CHECKF(config_max_conns(c) == (long)rl.rlim_cur - 64 - 2 * OPEN_FILE_SLOTS, "%ld", config_max_conns(c));
}

/* Every number a value holds: one too large for its field, or one its unit carries past
 * 64 bits, is an error naming its line, never a wrapped value (17179869184g wrapped to
 * 0, which is "no limit"). */
static void numbers_never_wrap(void)
{
    const char *bad[][2] = {
        { "max_body_size = 17179869184g", "too large" }, { "max_body_size = 1073741825m", "too large" },
        { "max_body_size = 1048577g", "too large" }, { "max_body_size = 18446744073709551616", "too large" },
        { "max_body_size = 99999999999999999999k", "too large" }, { "max_body_size = -1", "not a size" },
        { "max_concurrent_streams = 4294967297", "out of range" }, { "initial_window_size = 4294967296", "out of range" },
        { "hpack_encoder_table_size = 18446744073709551616", "out of range" },
        { "workers = 18446744073709551617", "not a worker count" }, { "max_conns = 9223372036854775808", "not a connection count" },
        { "coro_stack_size = 18446744073709559808", "not a stack size" },
        { "idle_timeout = 1e400", "not a duration" }, { "idle_timeout = 0x10", "not a duration" },
        { "idle_timeout = 99999999999999999999999h", "not a duration" }, { "shutdown_timeout = 721h", "not a duration" },
        { "listen = 127.0.0.1:4294967376", "bad port" }, { "error_page = 4294967700 /x", "not an error status" },
        { "return = 65836 /x", "not a status" }, { "allow = 10.0.0.0/4294967304", "prefix length" },
        { "proxy_next_upstream_tries = 18446744073709551617", "not a count" },
        { "proxy_read_timeout = 1e308h", "not a duration" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "\n%s\n", bad[i][0]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "test.conf:2: ") && strstr(err, bad[i][1]), "%s: %s", bad[i][0],
               err);
    }
    const char *upstream_bad[] = { "max_conns=18446744073709551616", "weight=4294967297", "fail_timeout=1e300",
                                   "max_fails=4294967296" };
    for (size_t i = 0; i < sizeof upstream_bad / sizeof upstream_bad[0]; i++) {
        char text[300];
        snprintf(text, sizeof text, "upstream u {\nserver = 127.0.0.1:1 %s\n}\nlocation /u/ {\nproxy_pass = http://u\n}\n",
                 upstream_bad[i]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "test.conf:2: server: bad value"), "%s: %s", upstream_bad[i], err);
    }
    CHECK(parse("upstream u {\nserver = 127.0.0.1:1\nkeepalive = 18446744073709551616\nhealth_check = / fails=4294967297\n"
                "keepalive_timeout = 1e300\n}\n") == CONFIG_ERROR && strstr(err, "test.conf:3: keepalive") &&
          strstr(err, "test.conf:4: health_check: bad value") && strstr(err, "test.conf:5: keepalive_timeout"));
    /* The largest of each still parses. */
    CHECKF(parse("max_body_size = 1048576g\nidle_timeout = 720h\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/")->max_body == UINT64_C(1) << 50 && c->idle_timeout == 720 * 3600);
}

/* limit_rate and limit_rate_after: nginx's sizes, top level -> site -> location, 0 for none;
 * a value that is not a size, is negative or is carried past 64 bits by its unit is an
 * error naming its line, never a wrapped rate (17179869184g is 2^64: 0, no limit). */
static void limit_rate_values(void)
{
    CHECKF(parse("limit_rate = 100k\nsite a.test {\nlimit_rate_after = 1m\nlocation /big/ {\nlimit_rate = 2M\n}\n"
                 "location /free/ {\nlimit_rate = 0\n}\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    const struct location *r = loc_of(s, "/"), *big = loc_of(s, "/big/x"), *free_ = loc_of(s, "/free/x");
    CHECK(r->limit_rate == 100 << 10 && r->limit_rate_after == 1 << 20);
    CHECK(big->limit_rate == 2 << 20 && big->limit_rate_after == 1 << 20);
    CHECK(free_->limit_rate == 0);
    CHECKF(parse("root = /srv\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/")->limit_rate == 0 && loc_of(&c->sites[0], "/")->limit_rate_after == 0);
    CHECKF(parse("limit_rate = 1048576g\nlimit_rate_after = 1048576g\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/")->limit_rate == UINT64_C(1) << 50);
    const char *bad[][2] = {
        { "limit_rate = abc", "limit_rate: 'abc' is not a rate" }, { "limit_rate = -1", "limit_rate: '-1' is not a rate" },
        { "limit_rate = -100k", "is not a rate" }, { "limit_rate = 17179869184g", "limit_rate: '17179869184g' is too large" },
        { "limit_rate = 18446744073709551616", "too large" }, { "limit_rate = 1048577g", "too large" },
        { "limit_rate = 100kb", "is not a rate" }, { "limit_rate = 1.5m", "is not a rate" }, { "limit_rate = k", "is not a rate" },
        { "limit_rate = 100 k", "is not a rate" }, { "limit_rate = 0x10", "is not a rate" },
        { "limit_rate_after = garbage", "limit_rate_after: 'garbage' is not a size" },
        { "limit_rate_after = -5", "is not a size" }, { "limit_rate_after = 17179869184g", "too large" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "\n%s\n", bad[i][0]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "test.conf:2: ") && strstr(err, bad[i][1]), "%s: %s", bad[i][0],
               err);
    }
    CHECK(parse("limit_rate =\n") == CONFIG_ERROR && strstr(err, "test.conf:1: "));
    CHECK(parse("limit_rate = 1k\nlimit_rate = 2k\n") == CONFIG_ERROR && strstr(err, "given twice"));
}

static void listen_lines(void)
{
    CHECKF(parse("listen = 127.0.0.1:9000\nlisten = [::1]:9443 tls\nlisten = *:80\n") == CONFIG_OK, "%s", err);
    CHECK(c->nlisten == 3 && c->listen[1].tls && c->listen[1].addr.ss_family == AF_INET6);   /* the default's went */
    CHECK(!strcmp(c->listen[1].from, "test.conf:2"));
    CHECK(parse("listen = 127.0.0.1:9000\nlisten = 127.0.0.1:9000\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: listen 127.0.0.1:9000: given twice at the top level (first at test.conf:1)"));
}

/* Listen options in any order; "*" is one dual-stack IPv6 socket, "[::]" IPv6 alone. */
static void listen_options_and_dual_stack(void)
{
    CHECKF(parse("listen = 127.0.0.1:80 proxy_protocol tls\nlisten = *:8080 tls\nlisten = [::]:8081\n"
                 "listen = 0.0.0.0:8082\tproxy_protocol\n") == CONFIG_OK, "%s", err);
    CHECK(c->nlisten == 4 && c->listen[0].tls && c->listen[0].proxy_protocol && !c->listen[0].dual);
    CHECK(c->listen[1].dual && c->listen[1].addr.ss_family == AF_INET6 && c->listen[1].tls && !c->listen[1].proxy_protocol);
    CHECK(!c->listen[2].dual && c->listen[2].addr.ss_family == AF_INET6);
    CHECK(!c->listen[3].dual && c->listen[3].addr.ss_family == AF_INET && c->listen[3].proxy_protocol);
    CHECK(parse("listen = 127.0.0.1:80 tls tls\n") == CONFIG_ERROR && strstr(err, "test.conf:1: listen '127.0.0.1:80 tls tls': 'tls' given twice"));
    CHECK(parse("listen = 127.0.0.1:80 proxy\n") == CONFIG_ERROR && strstr(err, "unknown option 'proxy' (tls, proxy_protocol)"));
    CHECK(parse("listen =\n") == CONFIG_ERROR && strstr(err, "expected ADDR:PORT [tls] [proxy_protocol]"));
    /* One address, one set of options, whichever site names it. */
    CHECK(parse("site a {\nlisten = 127.0.0.1:80\n}\nsite b {\nlisten = 127.0.0.1:80 tls\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:5: listen 127.0.0.1:80 is also given at test.conf:2 with other options"));
}

/* root says where it came from; user must exist. */
static void origins_and_user(void)
{
    CHECKF(parse("# site\nroot = /srv\nuser = root\n") == CONFIG_OK, "%s", err);
    CHECKF(!strcmp(loc_of(&c->sites[0], "/")->docroot->from, "test.conf:2") && !strcmp(c->user, "root"), "%s",
           loc_of(&c->sites[0], "/")->docroot->from);
    CHECK(parse("user = nosuchuser-h2park\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: user 'nosuchuser-h2park': no such user"));
    CHECK(parse("user =\n") == CONFIG_OK && !c->user[0]);
}

static void errors_name_file_line_problem(void)
{
    CHECK(parse("workers = 2\nbogus = 1\n") == CONFIG_ERROR);
    CHECKF(!strcmp(err, "test.conf:2: unknown key 'bogus'\n"), "%s", err);
    CHECK(parse("\n\nworkers = many\n") == CONFIG_ERROR && strstr(err, "test.conf:3: workers: 'many' is not a worker count"));
    CHECK(parse("parking = maybe\n") == CONFIG_ERROR && strstr(err, "test.conf:1: parking: 'maybe' is not on or off"));
    CHECK(parse("idle_timeout = 5 parsecs\n") == CONFIG_ERROR && strstr(err, "test.conf:1: idle_timeout"));
    CHECK(parse("listen = 127.0.0.1\n") == CONFIG_ERROR && strstr(err, "not ADDR:PORT"));
    CHECK(parse("listen = 127.0.0.1:99999\n") == CONFIG_ERROR && strstr(err, "bad port"));
    CHECK(parse("listen = example.org:80\n") == CONFIG_ERROR && strstr(err, "not an IP address"));
    CHECK(parse("listen = 127.0.0.1:80 quic\n") == CONFIG_ERROR && strstr(err, "unknown option 'quic'"));
    CHECK(parse("just words\n") == CONFIG_ERROR && strstr(err, "test.conf:1: expected 'key = value'"));
    CHECK(parse("coro_stack_size = 100\n") == CONFIG_ERROR && strstr(err, "coro_stack_size"));
    CHECK(parse("max_header_list_size = 10\n") == CONFIG_ERROR && strstr(err, "out of range"));
    config_unref(c);
    c = config_new();
    memset(&e, 0, sizeof e);
    CHECK(config_load_file(c, "/nonexistent/h2park.conf", &e) == CONFIG_ERROR &&
          strstr(err, "/nonexistent/h2park.conf: cannot read"));
}

static bool allowed(const char *text)
{
    struct sockaddr_storage ss = { 0 };
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &in->sin_addr) == 1)
        in->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1)
        in6->sin6_family = AF_INET6;
    uint8_t a[16];
    if (!net_address((const struct sockaddr *)&ss, a))
        return false;
    for (uint16_t i = 0; i < c->nbuiltin_allow; i++)
        if (net_contains(&c->builtin_allow[i].net, a))
            return true;
    return false;
}

/* builtin_routes_allow: loopback by default (IPv4-mapped IPv6 counting as IPv4), lists
 * of addresses and networks that a file's first line replaces and later lines extend,
 * "all", none, and errors that name the line. */
static void builtin_routes_allow_lists(void)
{
    CHECKF(parse("") == CONFIG_OK, "%s", err);
    CHECK(allowed("127.0.0.1") && allowed("127.9.9.9") && allowed("::1") && allowed("::ffff:127.0.0.1"));
    CHECK(!allowed("10.0.0.1") && !allowed("::2") && !allowed("::ffff:10.0.0.1") && !allowed("128.0.0.1"));
    CHECKF(parse("builtin_routes_allow = 192.0.2.10\nbuiltin_routes_allow = 10.1.0.0/16, 2001:db8::/32\n") == CONFIG_OK,
           "%s", err);
    CHECK(c->nbuiltin_allow == 3 && !allowed("127.0.0.1") && !allowed("::1"));
    CHECK(allowed("192.0.2.10") && !allowed("192.0.2.11") && allowed("10.1.255.3") && !allowed("10.2.0.1"));
    CHECK(allowed("::ffff:10.1.0.1") && allowed("2001:db8:ffff::1") && !allowed("2001:db9::1"));
    CHECKF(parse("builtin_routes_allow = all\n") == CONFIG_OK, "%s", err);
    CHECK(allowed("203.0.113.7") && allowed("2001:db8::1") && allowed("::1"));
    CHECKF(parse("builtin_routes_allow =\n") == CONFIG_OK, "%s", err);
    CHECK(c->nbuiltin_allow == 0 && !allowed("127.0.0.1"));
    CHECK(parse("builtin_routes_allow = localhost\n") == CONFIG_ERROR && strstr(err, "test.conf:1: "));
    CHECK(parse("builtin_routes_allow = 10.0.0.0/33\n") == CONFIG_ERROR && strstr(err, "test.conf:1: "));
    CHECK(parse("site a.test {\nbuiltin_routes_allow = all\n}\n") == CONFIG_ERROR && strstr(err, "test.conf:2: "));
}

/* Every error of a file at once, in order, each with its line; parsing goes on after
 * each, so one typo does not hide the next. */
static void every_error_at_once(void)
{
    CHECK(parse("workers = many\nlisten = 1.2.3.4:99999\nroot = /srv\nbogus = 1\nsite x..y {\n}\n"
                "location nopath {\n}\n}\nmax_conns = -3\n") == CONFIG_ERROR);
    CHECKF(e.count == 7, "%d: %s", e.count, err);
    const char *want[] = { "test.conf:1: workers", "test.conf:2: listen", "test.conf:4: unknown key 'bogus'",
                           "test.conf:5: site name 'x..y'", "test.conf:7: a location is", "test.conf:9: '}' with no",
                           "test.conf:10: max_conns" };
    const char *p = err;
    for (int i = 0; i < 7; i++) {
        CHECKF(!strncmp(p, want[i], strlen(want[i])), "line %d: %s", i, p);
        p = strchr(p, '\n') + 1;
    }
    CHECK(parse("site a {\nlocation /x {\n") == CONFIG_ERROR && strstr(err, "test.conf:2: location opened here is not closed") &&
          strstr(err, "test.conf:1: site opened here is not closed"));
    /* A value quoted in an error keeps the error on its line: a quoted string's \n and a
     * control byte are shown escaped (a raw newline made a line no reader could place). */
    CHECK(parse("location = /old {\nreturn = 301 https://$host/?\"a: ${host}$uri\\ny\x01z\"\n}\nbogus = 1\n") == CONFIG_ERROR);
    CHECKF(e.count == 2 && !strncmp(err, "test.conf:2: ", 13) && strstr(err, "$uri\\ny\\x01z") &&
           !strncmp(strchr(err, '\n') + 1, "test.conf:4: ", 13), "%s", err);
}

/* A single-valued key twice in one scope of one file: an error naming both lines.  In a
 * later source (the command line after the file) it overrides, and keys that repeat
 * repeat. */
static void repeated_keys(void)
{
    CHECK(parse("cert = /a.pem\nkey = /a.key\nroot = /srv\n\nroot = /srv2\n") == CONFIG_ERROR);
    CHECKF(strstr(err, "test.conf:5: 'root' given twice at the top level (first at test.conf:3)"), "%s", err);
    CHECK(parse("site a {\nhttps_redirect = on\nhttps_redirect = off\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: 'https_redirect' given twice in this site (first at test.conf:2)"));
    CHECK(parse("location /x {\nindex = a.html\nindex = b.html\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: 'index' given twice in this location (first at test.conf:2)"));
    /* root in the file overrides the default's; in a site and at the top it is two scopes */
    CHECKF(parse("root = /srv\nsite a {\nroot = /a\n}\n") == CONFIG_OK, "%s", err);
    CHECKF(parse("header = X-A: 1\nheader = X-B: 2\nallow = 10.0.0.0/8\ndeny = all\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/")->nheaders == 2 && loc_of(&c->sites[0], "/")->naccess == 2);
    CHECKF(config_set(c, "root", "/cli", &e) == CONFIG_OK && config_set(c, "root", "/cli2", &e) == CONFIG_OK, "%s", err);
}

static void keys_and_scopes(void)
{
    CHECK(parse("site a {\nworkers = 2\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: 'workers' is not allowed in this site: it goes only at the top level"));
    CHECK(parse("location /a {\nlisten = 127.0.0.1:1\n}\n") == CONFIG_ERROR &&
          strstr(err, "'listen' is not allowed in this location: it goes at the top level or in a site"));
    CHECK(parse("alias = /x\n") == CONFIG_ERROR && strstr(err, "'alias' is not allowed at the top level"));
    CHECK(parse("site a {\nsite b {\n}\n}\n") == CONFIG_ERROR && strstr(err, "test.conf:2: a site goes at the top level"));
    CHECK(parse("location /a {\nlocation /b {\n}\n}\n") == CONFIG_ERROR && strstr(err, "locations do not nest"));
    /* Every key of the table has a name of its own. */
    for (size_t i = 0; i < config_nkeys; i++)
        for (size_t j = i + 1; j < config_nkeys; j++)
            CHECK(strcmp(config_keys[i].name, config_keys[j].name));
}

static void sites_by_name(void)
{
    CHECKF(parse("listen = 127.0.0.1:80\nlisten = 127.0.0.1:443 tls\n"
                 "site example.com www.example.com {\nroot = /srv/ex\n}\n"
                 "site *.example.com {\nroot = /srv/wild\n}\n"
                 "site *.b.example.com {\nroot = /srv/wildb\n}\n"
                 "site * {\nroot = /srv/other\n}\n"
                 "site only80.example {\nlisten = 127.0.0.1:80\n}\n") == CONFIG_OK, "%s", err);
    CHECK(c->nsites == 5 && c->nlisten == 2);
    CHECK(site_of("example.com", 0) == &c->sites[0] && site_of("WWW.Example.COM.:443", 1) == &c->sites[0]);
    CHECK(site_of("a.example.com", 0) == &c->sites[1] && site_of("x.y.example.com", 0) == &c->sites[1]);
    CHECK(site_of("a.b.example.com", 0) == &c->sites[2]);     /* the longest wildcard */
    CHECK(site_of("b.example.com", 0) == &c->sites[1]);       /* *.b.example.com is not b.example.com */
    CHECK(site_of("nobody.test", 0) == &c->sites[3] && site_of("", 1) == &c->sites[3]);   /* "*" is the default */
    CHECK(site_of("only80.example", 0) == &c->sites[4] && site_of("only80.example", 1) == &c->sites[3]);
    /* A TLS client's server name is a name: no port, no IP literal, else the default. */
    const struct site_table *t1 = &c->listen_sites[1];
    CHECK(site_for_sni(t1, "A.Example.COM.") == &c->sites[1] && site_for_sni(t1, "www.example.com") == &c->sites[0]);
    CHECK(site_for_sni(t1, "example.com:443") == &c->sites[3] && site_for_sni(t1, "[::1]") == &c->sites[3]);
    CHECK(site_for_sni(t1, "x/../example.com") == &c->sites[3] && site_for_sni(t1, NULL) == &c->sites[3]);
    /* No "*": the first site of each listener is its default, as nginx. */
    CHECKF(parse("site a.test {\n}\nsite b.test {\n}\n") == CONFIG_OK, "%s", err);
    CHECK(site_of("c.test", 0) == &c->sites[0] && site_of("b.test", 0) == &c->sites[1]);
    /* A name twice on one listener is an error naming both sites; on two it is not. */
    CHECK(parse("site a.test {\n}\nsite b.test A.TEST {\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: site name a.test is taken already, on 127.0.0.1:8080, by the site at test.conf:1"));
    CHECKF(parse("site a.test {\nlisten = 127.0.0.1:80\n}\nsite a.test {\nlisten = 127.0.0.1:443 tls\n}\n") == CONFIG_OK,
           "%s", err);
    CHECK(parse("site * {\n}\nsite * {\n}\n") == CONFIG_ERROR && strstr(err, "two sites for every other host"));
    CHECK(parse("site {\n}\n") == CONFIG_ERROR && strstr(err, "a site needs its names"));
    /* ... even after another error (every error of a file is reported), and only once
     * for a site whose names were all refused. */
    CHECKF(parse("bogus = 1\nsite {\n}\n") == CONFIG_ERROR && e.count == 2 &&
           strstr(err, "test.conf:2: a site needs its names"), "%d: %s", e.count, err);
    CHECKF(parse("site a/b {\n}\n") == CONFIG_ERROR && e.count == 1, "%d: %s", e.count, err);
    const char *bad[] = { "a/b", "a b:80", "*.*.x", "x.*.y", "a:80", "[::1", "[zz]", "a\\b", "*.[::1]", "é.test" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[100];
        snprintf(text, sizeof text, "site %s {\n}\n", bad[i]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "is not a host name"), "%s: %s", bad[i], err);
    }
    CHECKF(parse("site 192.0.2.1 [2001:db8::1] {\n}\n") == CONFIG_OK, "%s", err);
    CHECK(site_of("[2001:DB8::1]:8443", 0) == &c->sites[0]);
}

/* The host of a request, as hostile input: only reg-names and IP literals get through. */
static void hosts(void)
{
    char h[256];
    CHECK(host_normalize("Example.COM", h, sizeof h) == 11 && !strcmp(h, "example.com"));
    CHECK(host_normalize("example.com.:8443", h, sizeof h) == 11 && !strcmp(h, "example.com"));
    CHECK(host_normalize("[::1]:443", h, sizeof h) == 5 && !strcmp(h, "[::1]"));
    CHECK(host_normalize("", h, sizeof h) == 0);
    const char *bad[] = { "a/b", "a b", "a\tb", "a:b", "a:99999999", "[::1", "[::1]x", "[g::]", "a\"b", "a<b",
                          "a@b", ".", "a:80:80", "\x7f", "a\\b", "a?b", "a#b" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(host_normalize(bad[i], h, sizeof h) < 0 && host_length(bad[i]) < 0, "'%s' got through", bad[i]);
    /* host_length checks as host_normalize does (a one-site listener asks only it). */
    const char *more_bad[] = { ".example", "a..b", "a.b..", "\x80.test", "a:123456", "[::1]:80x", "[::1" };
    for (size_t i = 0; i < sizeof more_bad / sizeof more_bad[0]; i++)
        CHECKF(host_normalize(more_bad[i], h, sizeof h) < 0 && host_length(more_bad[i]) < 0, "'%s' got through",
               more_bad[i]);
    CHECK(host_length("Example.COM.:443") == 11 && host_length("[::1]:80") == 5 && host_length("a:") == 1 &&
          host_length("") == 0 && host_length(NULL) == 0);
    /* host_span, HTTP/1.1's check of Host and of an absolute-form authority, judges as
     * host_length does, and only the bytes it is given. */
    const char *all[] = { "Example.COM", "example.com.:8443", "[::1]:443", "", "a:", "a.b.c:1", "[::1]:80",
                          "127.0.0.1:12345", "a.", "a.:1" };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CHECKF(host_span(all[i], strlen(all[i])) == host_length(all[i]) && host_length(all[i]) >= 0, "'%s'", all[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(host_span(bad[i], strlen(bad[i])) < 0, "'%s' got through host_span", bad[i]);
    for (size_t i = 0; i < sizeof more_bad / sizeof more_bad[0]; i++)
        CHECKF(host_span(more_bad[i], strlen(more_bad[i])) < 0, "'%s' got through host_span", more_bad[i]);
    CHECK(host_span("a.test/x", 6) == 6 && host_span("a.test:80/x", 9) == 6 && host_span("[::1]", 4) < 0 &&
          host_span("a..", 2) == 1 && host_span("a.b", 0) == 0 && host_span(":80", 3) < 0);
    CHECK(host_normalize("[2001:DB8::A]", h, sizeof h) == 13 && !strcmp(h, "[2001:db8::a]"));
    CHECK(host_normalize("example.com", h, 11) < 0 && host_normalize("example.com", h, 12) == 11);
    char longest[300];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = 0;
    CHECK(host_normalize(longest, h, sizeof h) < 0);
}

static void locations_match(void)
{
    CHECKF(parse("root = /srv\n"
                 "location /a/ {\nroot = /a\n}\n"
                 "location /a/b/ {\nroot = /ab\n}\n"
                 "location = /a/b/c {\nroot = /exact\n}\n"
                 "location /a {\nroot = /a-noslash\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    CHECK(!strcmp(loc_of(s, "/a/b/c")->docroot->path, "/exact"));
    CHECK(!strcmp(loc_of(s, "/a/b/c/d")->docroot->path, "/ab"));
    CHECK(!strcmp(loc_of(s, "/a/b/")->docroot->path, "/ab"));
    CHECK(!strcmp(loc_of(s, "/a/x")->docroot->path, "/a"));
    CHECK(!strcmp(loc_of(s, "/abc")->docroot->path, "/a-noslash"));   /* a prefix is a string prefix, as nginx */
    CHECK(!strcmp(loc_of(s, "/b")->docroot->path, "/srv"));
    CHECK(parse("location /a/ {\n}\nlocation /a/ {\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: location /a/ is given twice in this file's top level (first at test.conf:1)"));
    const char *bad[] = { "a", "/a?b", "/a%2f", "/a//b", "/./a", "/a/..", "/a /b" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[100];
        snprintf(text, sizeof text, "location %s {\n}\n", bad[i]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "test.conf:1:"), "%s", bad[i]);
    }
}

/* Settings flow top -> site -> location; headers and error pages add up (a name given
 * again replaces), access rules replace the inherited list. */
static void inheritance(void)
{
    CHECKF(parse("header = X-Top: 1\nheader = Cache-Control: no-cache\nallow = 10.0.0.0/8\ndeny = all\n"
                 "error_page = 404 /404.html\nmax_body_size = 1m\n"
                 "site a.test {\nheader = X-Site: 2\nroot = /a\n"
                 "location /s/ {\nheader = Cache-Control: max-age=60\ndeny = 10.1.0.0/16\nerror_page = 500 /500.html\n}\n"
                 "}\nlocation /top/ {\ndotfiles = allow\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    const struct location *l = loc_of(s, "/s/x"), *r = loc_of(s, "/"), *t = loc_of(s, "/top/x");
    CHECK(r->nheaders == 3 && l->nheaders == 3 && !strcmp(r->docroot->path, "/a") && !strcmp(l->docroot->path, "/a"));
    bool seen60 = false, seen_no_cache = false;
    for (int i = 0; i < l->nheaders; i++) {
        seen60 |= !strcmp(l->headers[i].name, "cache-control") && !strcmp(l->headers[i].value, "max-age=60");
        seen_no_cache |= !strcmp(l->headers[i].value, "no-cache");
    }
    CHECK(seen60 && !seen_no_cache);
    CHECK(r->naccess == 2 && l->naccess == 1 && !l->access[0].allow && l->max_body == 1 << 20);
    CHECK(l->nerrors == 2 && r->nerrors == 1);
    CHECK(t->dotfiles == DOTFILES_ALLOW && r->dotfiles == DOTFILES_DENY && !strcmp(t->docroot->path, "/a"));
}

/* The reverse proxy in the tree: proxy_pass makes a location HANDLER_PROXY, naming a group
 * (an upstream section: every server in the configuration's one array, with the group's
 * pool settings) or one address (a group of its own, shared by the locations that give
 * it); the proxy_* limits are inherited top -> site -> location, the built-in routes stay
 * built-in under a proxied "/"; and the mistakes name their lines. */
static void reverse_proxy_locations(void)
{
    CHECKF(parse("proxy_read_timeout = 30s\n"
                 "upstream app {\nserver = 127.0.0.1:3000 weight=3\nserver = 127.0.0.1:3001 backup\n"
                 "balance = least_conn\nkeepalive = 4\nkeepalive_timeout = 5s\n}\n"
                 "site a.test {\nproxy_read_timeout = 10s\nproxy_set_host = in.test\n"
                 "location / {\nproxy_pass = http://app/v2/\n}\n"
                 "location /one/ {\nproxy_pass = http://127.0.0.1:4000\nproxy_read_timeout = 5s\n}\n"
                 "location = /two {\nproxy_pass = http://127.0.0.1:4000\n}\n"
                 "location /files/ {\n}\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    const struct location *root = loc_of(s, "/x"), *one = loc_of(s, "/one/x"), *two = loc_of(s, "/two");
    CHECK(root->handler == HANDLER_PROXY && one->handler == HANDLER_PROXY && two->handler == HANDLER_PROXY);
    CHECK(loc_of(s, "/files/a")->handler == HANDLER_STATIC && loc_of(s, "/-/healthz")->handler == HANDLER_BUILTIN);
    const struct proxy_conf *p = root->proxy;
    CHECK(!strcmp(p->group->name, "app") && p->group->nservers == 2 && p->group->balance == BALANCE_LEAST_CONN);
    CHECK(!strcmp(p->uri, "/v2/") && !strcmp(p->host, "in.test") && p->read_timeout == 10 && p->connect_timeout == 60);
    CHECK(p->group->servers[0].weight == 3 && p->group->servers[1].backup && p->group->servers[1].keepalive == 4 &&
          p->group->servers[1].keepalive_timeout == 5 && !strcmp(p->group->servers[0].group, "app"));
    CHECK(one->proxy->read_timeout == 5 && two->proxy->read_timeout == 10 && one->proxy->group == two->proxy->group);
    CHECK(c->nupstream_servers == 3 && c->nupstreams == 2 && !one->proxy->group->name[0] &&
          !strcmp(one->proxy->group->servers[0].text, "127.0.0.1:4000") && one->proxy->group->servers[0].index == 2);
    CHECK(parse("location / {\nproxy_pass = http://none\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: proxy_pass names upstream 'none', which no upstream section defines"));
    CHECK(parse("upstream b {\nserver = 127.0.0.1:1 backup\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: upstream b has only backup servers"));
    CHECK(parse("upstream b {\n}\nupstream b {\nserver = 127.0.0.1:1\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: upstream b has no server lines") && strstr(err, "test.conf:3: upstream b is given twice"));
    CHECK(parse("site a.test {\nupstream b {\n}\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: an upstream goes at the top level, not in this site"));
    CHECK(parse("upstream b {\nserver = 127.0.0.1:1\nlocation / {\n}\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: an upstream holds server lines, not locations"));
    CHECK(parse("location / {\nhandler = healthz\nproxy_pass = http://127.0.0.1:1\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: proxy_pass and handler both given"));
    CHECK(parse("keepalive = 3\nlocation / {\nproxy_pass = http://127.0.0.1:1\nproxy_read_timeout = 0\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: 'keepalive' is not allowed at the top level: it goes only in an upstream section") &&
          strstr(err, "test.conf:4: proxy_read_timeout: '0' is not a duration"));
    CHECK(parse("upstream x y {\nserver = 127.0.0.1:1\n}\n") == CONFIG_ERROR && strstr(err, "test.conf:1: an upstream is 'upstream NAME {'"));
}

/* proxy_pass https:// and the proxy_ssl_* keys: inherited as the other proxy_* keys, the
 * name to verify proxy_pass's host by default, verification and SNI on by default, one
 * settings block shared by locations that have the same, TLS or not for each upstream. */
static void tls_upstreams(void)
{
    CHECKF(parse("proxy_ssl_trusted_certificate = /etc/ca.pem\n"
                 "upstream app {\nserver = 127.0.0.1:3000\n}\n"
                 "site a.test {\nproxy_ssl_name = in.test\n"
                 "location / {\nproxy_pass = https://app/\n}\n"
                 "location /same/ {\nproxy_pass = https://app/\n}\n"
                 "location /own/ {\nproxy_pass = https://localhost:8443\nproxy_ssl_verify = off\n"
                 "proxy_ssl_server_name = off\nproxy_ssl_certificate = /c.pem\nproxy_ssl_certificate_key = /k.pem\n}\n"
                 "location /dflt/ {\nproxy_pass = https://localhost\n}\n"
                 "location /plain/ {\nproxy_pass = http://127.0.0.1:4000\n}\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    const struct proxy_conf *root = loc_of(s, "/x")->proxy, *same = loc_of(s, "/same/x")->proxy;
    const struct proxy_conf *own = loc_of(s, "/own/x")->proxy, *dflt = loc_of(s, "/dflt/x")->proxy;
    CHECK(root->tls && root->tls == same->tls && !strcmp(root->tls->name, "in.test") && root->tls->verify &&
          root->tls->server_name && !strcmp(root->tls->trusted, "/etc/ca.pem") && !root->tls->cert);
    CHECK(root->group->servers[0].tls && own->group->servers[0].tls && !loc_of(s, "/plain/x")->proxy->tls);
    CHECK(!strcmp(own->tls->name, "in.test") && !own->tls->verify && !own->tls->server_name &&
          !strcmp(own->tls->cert, "/c.pem") && !strcmp(own->tls->key, "/k.pem"));
    CHECK(!strcmp(own->group->servers[0].text, "127.0.0.1:8443") || !strcmp(own->group->servers[0].text, "[::1]:8443"));
    CHECK(!strcmp(dflt->tls->name, "in.test") && strstr(dflt->group->servers[0].text, ":443"));
    CHECKF(parse("location / {\nproxy_pass = https://localhost:8443/\n}\n") == CONFIG_OK, "%s", err);
    CHECK(!strcmp(loc_of(&c->sites[0], "/x")->proxy->tls->name, "localhost"));
    CHECK(parse("location / {\nproxy_pass = https://127.0.0.1\nproxy_ssl_verify = maybe\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: proxy_ssl_verify: 'maybe' is not on or off"));
    CHECK(parse("location / {\nproxy_pass = https://127.0.0.1\nproxy_ssl_name = a b\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: proxy_ssl_name: 'a b' is not a host name or an IP address"));
    CHECK(parse("location / {\nproxy_pass = https://127.0.0.1\nproxy_ssl_certificate_key = /k.pem\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: proxy_ssl_certificate_key without proxy_ssl_certificate"));
    CHECK(parse("upstream b {\nserver = 127.0.0.1:1\n}\nlocation /a/ {\nproxy_pass = http://b\n}\n"
                "location /b/ {\nproxy_pass = https://b\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:8: upstream b is passed to over https:// here but over http:// at test.conf:5"));
    CHECK(parse("upstream b {\nserver = 127.0.0.1:1\nproxy_ssl_verify = off\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: 'proxy_ssl_verify' is not allowed in this upstream"));
    /* h2:// is TLS offering h2 alone by ALPN: settings of its own beside https://'s
     * (another context, so neither takes the other's pooled connections), the same group
     * allowed under both, never with a cleartext scheme. */
    CHECKF(parse("upstream g {\nserver = 127.0.0.1:50051\n}\n"
                 "location /a/ {\nproxy_pass = h2://g\nproxy_ssl_name = g.test\n}\n"
                 "location /b/ {\nproxy_pass = https://g\nproxy_ssl_name = g.test\n}\n"
                 "location /c/ {\nproxy_pass = h2://g\nproxy_ssl_name = g.test\n}\n"
                 "location /d/ {\nproxy_pass = h2://127.0.0.1\n}\n") == CONFIG_OK, "%s", err);
    const struct proxy_conf *a = loc_of(&c->sites[0], "/a/x")->proxy, *b = loc_of(&c->sites[0], "/b/x")->proxy;
    CHECK(a->h2 && a->tls && a->tls->h2 && !b->h2 && b->tls && !b->tls->h2 && a->tls != b->tls && a->group == b->group);
    CHECK(loc_of(&c->sites[0], "/c/x")->proxy->tls == a->tls);
    CHECK(strstr(loc_of(&c->sites[0], "/d/x")->proxy->group->servers[0].text, ":443"));
    CHECK(parse("upstream g {\nserver = 127.0.0.1:1\n}\nlocation /a/ {\nproxy_pass = h2c://g\n}\n"
                "location /b/ {\nproxy_pass = h2://g\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:8: upstream g is passed to over h2:// here but over h2c:// at test.conf:5"));
    /* proxy_ssl_session_reuse: on by default, inherited, and part of what makes a context. */
    CHECKF(parse("proxy_ssl_session_reuse = off\nlocation /a/ {\nproxy_pass = https://127.0.0.1\n}\n"
                 "location /b/ {\nproxy_pass = https://127.0.0.1\nproxy_ssl_session_reuse = on\n}\n") == CONFIG_OK, "%s", err);
    a = loc_of(&c->sites[0], "/a/x")->proxy, b = loc_of(&c->sites[0], "/b/x")->proxy;
    CHECK(!a->tls->session_reuse && b->tls->session_reuse && a->tls != b->tls);
    CHECKF(parse("location / {\nproxy_pass = https://127.0.0.1\n}\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/x")->proxy->tls->session_reuse);
    CHECK(parse("location / {\nproxy_pass = https://127.0.0.1\nproxy_ssl_session_reuse = maybe\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: proxy_ssl_session_reuse: 'maybe' is not on or off"));
    CHECK(parse("location / {\nproxy_pass = grpcs://127.0.0.1\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: proxy_pass 'grpcs://127.0.0.1': expected SCHEME://ADDRESS[/PATH]") &&
          strstr(err, "SCHEME http, https, h2c or h2"));
}

/* health_check: nginx Plus's defaults, every option, on the group; over TLS the first
 * location's settings are the checks'. */
static void health_checks(void)
{
    CHECKF(parse("upstream a {\nserver = 127.0.0.1:1\nhealth_check = /healthz\n}\n"
                 "upstream b {\nserver = 127.0.0.1:2\nhealth_check = tcp interval=250ms timeout=1s fails=3 passes=2 "
                 "host=app.test\n}\n"
                 "upstream n {\nserver = 127.0.0.1:3\n}\n"
                 "location /a/ {\nproxy_pass = https://a\nproxy_ssl_name = one.test\n}\n"
                 "location /a2/ {\nproxy_pass = https://a\nproxy_ssl_name = two.test\n}\n"
                 "location /b/ {\nproxy_pass = h2c://b\n}\n") == CONFIG_OK, "%s", err);
    const struct upstream_group *a = loc_of(&c->sites[0], "/a/x")->proxy->group;
    const struct upstream_group *b = loc_of(&c->sites[0], "/b/x")->proxy->group;
    CHECK(a->check && !strcmp(a->check->path, "/healthz") && !a->check->host && a->check->interval == 5 &&
          a->check->timeout == 5 && a->check->fails == 1 && a->check->passes == 1 && strstr(a->check->from, ":3"));
    CHECK(a->check_tls && !strcmp(a->check_tls->name, "one.test"));
    CHECK(b->check && !b->check->path && !strcmp(b->check->host, "app.test") && b->check->interval == 0.25 &&
          b->check->timeout == 1 && b->check->fails == 3 && b->check->passes == 2 && !b->check_tls);
    CHECK(!c->upstreams[2].check);
    CHECK(parse("upstream a {\nserver = 127.0.0.1:1\nhealth_check = /a b\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: health_check: unknown option 'b'"));
    CHECK(parse("upstream a {\nserver = 127.0.0.1:1\nhealth_check = /x host=a,b\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: health_check: bad value 'a,b' for host"));
    CHECK(parse("upstream a {\nserver = 127.0.0.1:1\nhealth_check = /x interval=10ms\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: health_check: bad value '10ms' for interval"));
    CHECK(parse("location / {\nhealth_check = /x\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: 'health_check' is not allowed in this location: it goes only in an upstream section"));
}

/* What the configuration puts in an upstream's request line or head, or in a response's
 * fields, can neither end nor split them: every byte a request line or a field cannot carry
 * is an error naming its line (a space in proxy_pass's path went into the request line). */
static void values_reaching_heads_are_clean(void)
{
    const char *bad[][2] = {
        { "proxy_pass = http://127.0.0.1:1/a b", "'http://127.0.0.1:1/a b': the path cannot go in a request line as it is: the byte 0x20 at byte 3: write it as %20" },
        { "proxy_pass = http://127.0.0.1:1/a\tb", "the byte 0x09 at byte 3: write it as %09" },
        { "proxy_pass = http://127.0.0.1:1/a\x7f", "the byte 0x7f at byte 3" },
        { "proxy_pass = http://127.0.0.1:1/a\x01", "the byte 0x01 at byte 3" },
        { "proxy_pass = http://127.0.0.1:1/a\rX: y", "the byte 0x0d at byte 3" },
        { "proxy_pass = http://127.0.0.1:1/a#b", "'#' at byte 3: write it as %23" },
        { "proxy_pass = http://127.0.0.1:1/v2?x=1", "'?' at byte 4" },
        { "proxy_pass = http://127.0.0.1:1/caf\xc3\xa9", "the byte 0xc3 at byte 5" },
        { "proxy_pass = http://127.0.0.1:1/100%", "a '%' without two hex digits after it, at byte 5" },
        { "proxy_pass = http://app/a<b>", "'<' at byte 3" },
        { "proxy_pass = http://unix:/run/a.sock:/a b", "0x20 at byte 3" },
        { "proxy_pass = h2c://app/a\\b", "'\\' at byte 3" },
        { "proxy_set_host = a\x01" "b", "proxy_set_host: 'a\\x01b' is not a host" },
        { "proxy_set_host = caf\xc3\xa9.test", "is not a host" },
        { "proxy_set_host = a b", "is not a host" },
        { "header = X-A: a\x7f" "b", "control character in the value of x-a" },
        { "header = X-A: a\rb", "control character in the value of x-a" },
        { "return = 301 http://x/\\nSet-Cookie:a=1", "is not a URL" },
        { "return = 302 http://x/\rSet-Cookie:a=1", "is not a URL" },
        { "return = 307 /a\tb", "is not a URL" },
        { "return = 308 /a\x7f", "is not a URL" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[300];
        snprintf(text, sizeof text, "location /x/ {\n%s\n}\n", bad[i][0]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "test.conf:2: ") && strstr(err, bad[i][1]), "%s: %s",
               bad[i][0], err);
    }
    CHECK(parse("upstream u {\nserver = 127.0.0.1:1\nhealth_check = /h\xc3\xa9\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: health_check: '/h\xc3\xa9' cannot go in a request line as it is: the byte 0xc3"));
    CHECK(parse("upstream u {\nserver = 127.0.0.1:1\nhealth_check = /h host=a\x7f\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:3: health_check: bad value"));
    /* What a request line and a field carry stays allowed. */
    CHECKF(parse("location /x/ {\nproxy_pass = http://127.0.0.1:1/a%20b/~u/x;p=1/@:!$&'()*+,=\n"
                 "proxy_set_host = [::1]:8080\nheader = X-A: caf\xc3\xa9\tb\n}\n"
                 "location /r {\nreturn = 200 \"a\\nb\\x01\"\n}\n"
                 "upstream u {\nserver = 127.0.0.1:1\nhealth_check = /h?x=1/y?z host=app.internal:81\n}\n"
                 "location /u/ {\nproxy_pass = http://u\n}\n") == CONFIG_OK, "%s", err);
    CHECK(!strcmp(loc_of(&c->sites[0], "/x/y")->proxy->uri, "/a%20b/~u/x;p=1/@:!$&'()*+,="));
}

/* The built-in routes are locations: in every site at their paths, placed elsewhere by
 * name, gone with builtin_routes = off, and restricted by the location that covers
 * their path. */
static void builtin_routes_are_locations(void)
{
    CHECKF(parse("location /-/ {\nallow = loopback\ndeny = all\n}\nlocation = /status {\nhandler = stats\n}\n") ==
           CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    const struct location *st = loc_of(s, "/-/stats");
    CHECK(st->implicit && st->handler == HANDLER_BUILTIN && st->naccess == 3);
    CHECK(loc_of(s, "/status")->handler == HANDLER_BUILTIN && !loc_of(s, "/status")->implicit);
    CHECK(!location_for_path(s, "/-/stats", 8, true)->exact);     /* without it, /-/ answers */
    CHECK(loc_of(s, "/metrics")->naccess == 0);
    CHECKF(parse("builtin_routes = off\nlocation = /m {\nhandler = metrics\n}\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/-/healthz")->handler == HANDLER_STATIC && loc_of(&c->sites[0], "/m")->route);
    CHECKF(parse("location = /-/stats {\nreturn = 404\n}\n") == CONFIG_OK, "%s", err);
    CHECK(loc_of(&c->sites[0], "/-/stats")->handler == HANDLER_RETURN);
    CHECK(parse("location /x {\nhandler = nosuch\n}\n") == CONFIG_ERROR && strstr(err, "handler: 'nosuch' is not one of static"));
    CHECK(parse("location /x {\nhandler = stats\nreturn = 404\n}\n") == CONFIG_ERROR && strstr(err, "return and handler both given"));
}

static void values_of_rules(void)
{
    CHECKF(parse("location /r {\nreturn = 301 https://$host$request_uri\n}\nlocation /t {\nreturn = 200 \"hi\\n\"\n}\n"
                 "location /u {\nreturn = https://example.org/\n}\nlocation = /f {\nalias = /srv/icons/fav.ico\n}\n"
                 "location /al/ {\nalias = /srv/assets/\nindex = main.html index.html\ndirectory_listing = on\n"
                 "fallback = /index.html\nmax_body_size = 10k\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    CHECK(loc_of(s, "/r")->ret->status == 301 && loc_of(s, "/r")->ret->is_url);
    CHECK(loc_of(s, "/t")->ret->status == 200 && !strcmp(loc_of(s, "/t")->ret->text, "hi\n"));
    CHECK(loc_of(s, "/u")->ret->status == 302);
    const struct location *f = loc_of(s, "/f"), *al = loc_of(s, "/al/x");
    CHECK(!strcmp(f->alias_file, "fav.ico") && !strcmp(f->docroot->path, "/srv/icons"));
    CHECK(al->alias && al->docroot->nindex == 2 && al->listing && !strcmp(al->fallback, "/index.html") &&
          al->max_body == 10240);
    const char *bad[][2] = {
        { "return = 301", "needs the URL" }, { "return = 999 x", "not a status" }, { "return = nope", "expected 'STATUS" },
        { "return = 302 /$nosuch", "unknown variable '$nosuch'" }, { "return = 200 ${host", "without its '}'" },
        { "header = Content-Length: 5", "the server's to send" }, { "header = Bad Name: x", "not a field name" },
        { "header = X-A", "expected 'Name: value'" }, { "allow = 10.1.2.3/8", "did you mean 10.0.0.0/8?" },
        { "deny = 2001:db8::1/200", "prefix length must be 0..128" }, { "allow = 300.1.1.1", "not an address" },
        { "allow = ", "expected addresses" }, { "max_body_size = 5q", "not a size" },
        { "error_page = 404", "expected 'STATUS... /path'" }, { "error_page = 200 /x", "not an error status" },
        { "dotfiles = maybe", "not deny or allow" }, { "fallback = index.html", "not a path under root" },
        { "index = a/b", "not a file name" }, { "root =", "must not be empty" },
        { "real_ip_header = Via", "not X-Forwarded-For, Forwarded or X-Real-IP" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "location /x {\n%s\n}\n", bad[i][0]);
        if (!strncmp(bad[i][0], "real_ip", 7))
            snprintf(text, sizeof text, "%s\n", bad[i][0]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
    }
    CHECK(parse("location /x {\nroot = /a\nalias = /b\n}\n") == CONFIG_ERROR && strstr(err, "root and alias both given"));
}

/* limit_req, max_conns_per_client and the table's keys: values, inheritance, each
 * listener's limit from its sites, rule ids stable across reloads, and every error. */
static void per_client_limits(void)
{
    CHECKF(parse("limit_req = 600r/m\nmax_conns_per_client = 7\nlocation /a/ {\nlimit_req = 10r/s burst=20 nodelay\n"
                 "limit_req = 1r/m key=host\n}\nlocation /d/ {\nlimit_req = 5r/s burst=4 delay=2 key=addr\n"
                 "limit_status = 503\n}\nlocation /none/ {\nlimit_req = 2r/s\n}\n") == CONFIG_OK, "%s", err);
    const struct site *s = &c->sites[0];
    const struct location *top = loc_of(s, "/x"), *a = loc_of(s, "/a/x"), *d = loc_of(s, "/d/x");
    CHECK(top->nlimit_req == 1 && top->limit_req[0]->rate == 10000 && top->limit_req[0]->burst == 0 &&
          top->limit_req[0]->delay == 0 && top->limit_req[0]->key == LIMIT_KEY_REALIP && top->limit_status == 429);
    CHECK(a->nlimit_req == 2 && a->limit_req[0]->rate == 10000 && a->limit_req[0]->burst == 20000 &&
          a->limit_req[0]->delay == UINT32_MAX && a->limit_req[1]->rate == 16 && a->limit_req[1]->key == LIMIT_KEY_HOST);
    CHECK(d->nlimit_req == 1 && d->limit_req[0]->delay == 2000 && d->limit_req[0]->key == LIMIT_KEY_ADDR &&
          d->limit_status == 503);
    CHECK(!strcmp(a->limit_req[0]->refused_by, "limit_req = 10r/s burst=20 nodelay (test.conf:4)"));
    CHECK(c->nlimit_rules == 5 && config_has_limits(c));
    for (uint32_t i = 0; i < c->nlimit_rules; i++)
        for (uint32_t j = 0; j < i; j++)
            CHECK(c->limit_rules[i]->id && c->limit_rules[i]->id != c->limit_rules[j]->id);
    CHECK(c->listen[0].max_conns_per_client == 7 && c->listen[1].max_conns_per_client == 7);
    CHECK(top->limits && a->limits);
    /* The same rule in the same place keeps its id when the file changes elsewhere; the
     * same words elsewhere are another rule. */
    CHECK(parse("location /a/ {\nlimit_req = 10r/s\n}\nlocation /b/ {\nlimit_req = 10r/s\n}\n") == CONFIG_OK);
    uint16_t ida = loc_of(&c->sites[0], "/a/")->limit_req[0]->id, idb = loc_of(&c->sites[0], "/b/")->limit_req[0]->id;
    CHECK(ida != idb);
    CHECK(parse("# moved down\n\nlocation /b/ {\nlimit_req = 10r/s\n}\nlocation /a/ {\nlimit_req = 10r/s\n}\n") ==
          CONFIG_OK);
    CHECK(loc_of(&c->sites[0], "/a/")->limit_req[0]->id == ida && loc_of(&c->sites[0], "/b/")->limit_req[0]->id == idb);
    /* No limit: no location pays for one, and no table is asked for. */
    CHECK(parse("location /a/ {\nroot = /tmp\n}\n") == CONFIG_OK && !config_has_limits(c) &&
          !loc_of(&c->sites[0], "/a/")->limits && !loc_of(&c->sites[0], "/")->limits);
    /* Behind a trusted proxy a per-client connection limit is counted by request. */
    CHECK(parse("real_ip_from = 127.0.0.1\nmax_conns_per_client = 3\n") == CONFIG_OK && loc_of(&c->sites[0], "/")->limits);
    /* Each listener's limit from its sites: agreeing, or an error naming both. */
    CHECKF(parse("listen = 127.0.0.1:1\nlisten = 127.0.0.1:2\nsite a {\nmax_conns_per_client = 4\n}\n"
                 "site b {\nlisten = 127.0.0.1:2\nmax_conns_per_client = 4\n}\n") == CONFIG_OK, "%s", err);
    CHECK(c->listen[0].max_conns_per_client == 4 && c->listen[1].max_conns_per_client == 4);
    CHECKF(parse("listen = 127.0.0.1:1\nsite a {\nmax_conns_per_client = 4\n}\nsite b {\n}\n") == CONFIG_ERROR &&
           strstr(err, "test.conf:5: max_conns_per_client 0 on 127.0.0.1:1, where the site at test.conf:2 has 4"),
           "%s", err);
    const char *bad[][2] = {
        { "limit_req = 10", "not a rate" }, { "limit_req = 0r/s", "from 1 to 1000000" },
        { "limit_req = 10r/h", "not a rate" }, { "limit_req = r/s", "not a rate" },
        { "limit_req = -1r/s", "from 1 to 1000000" }, { "limit_req = 2000000r/s", "from 1 to 1000000" },
        { "limit_req = 10r/s burst=x", "burst=x is not a count" }, { "limit_req = 10r/s burst=2000000", "not a count" },
        { "limit_req = 10r/s burst=-1", "not a count" }, { "limit_req = 10r/s nodelay delay=1", "both given" },
        { "limit_req = 10r/s burst=2 delay=5", "delay=5 is more than burst=2" },
        { "limit_req = 10r/s key=cookie", "not realip, addr or host" }, { "limit_req = 10r/s zone=a", "unknown option" },
        { "limit_req = 10r/s burst=1 burst=2", "'burst' given twice" }, { "limit_req = 10r/s nodelay nodelay", "given twice" },
        { "limit_req =", "expected limit_req" }, { "limit_status = 200", "not an error status" },
        { "limit_status = 4290", "not an error status" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "location /x {\n%s\n}\n", bad[i][0]);
        CHECKF(parse(text) == CONFIG_ERROR && strstr(err, "test.conf:2: ") && strstr(err, bad[i][1]), "%s: %s",
               bad[i][0], err);
    }
    const char *top_bad[][2] = {
        { "limit_zone_size = 1k", "from 64k to 64g" }, { "limit_zone_size = 65g", "from 64k to 64g" },
        { "limit_zone_size = 17179869184g", "from 64k to 64g" }, { "limit_zone_size = ten", "from 64k to 64g" },
        { "limit_prefix_v4 = 33", "out of range (1..32)" }, { "limit_prefix_v4 = 0", "out of range" },
        { "limit_prefix_v6 = 129", "out of range (1..128)" }, { "max_conns_per_client = 65536", "at most 65535" },
        { "max_conns_per_client = -1", "not a count" }, { "max_conns_per_client = 1e3", "not a count" },
        { "location /x {\nmax_conns_per_client = 1\n}", "not allowed in this location" },
        { "site a {\nlimit_zone_size = 1m\n}", "not allowed in this site" },
    };
    for (size_t i = 0; i < sizeof top_bad / sizeof top_bad[0]; i++)
        CHECKF(parse(top_bad[i][0]) == CONFIG_ERROR && strstr(err, top_bad[i][1]), "%s: %s", top_bad[i][0], err);
    CHECK(parse("location /x {\nlimit_req = 1r/s\nlimit_req = 1r/s\nlimit_req = 1r/s\nlimit_req = 1r/s\nlimit_req = 1r/s\n"
                "limit_req = 1r/s\nlimit_req = 1r/s\nlimit_req = 1r/s\nlimit_req = 1r/s\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:10: limit_req: at most 8"));
    CHECK(parse("limit_zone_size = 64k\nlimit_prefix_v4 = 24\nlimit_prefix_v6 = 48\n") == CONFIG_OK &&
          c->limit_zone_size == 65536 && c->limit_prefix_v4 == 24 && c->limit_prefix_v6 == 48);
}

/* What an nginx user writes by habit gets an error that says how it is written here. */
static void nginx_habits_named(void)
{
    CHECK(parse("root www;\n") == CONFIG_ERROR);
    CHECKF(strstr(err, "test.conf:1: 'root www;' is nginx's syntax: write 'root = www' (key = value, no ';')"), "%s", err);
    CHECK(parse("\nroot = /srv/www;\n") == CONFIG_ERROR);
    CHECKF(strstr(err, "test.conf:2: root: drop the ';' at the end ('root = /srv/www'): this is not nginx's syntax"), "%s",
           err);
    CHECK(parse("site a {\n    gzip on;\n}\n") == CONFIG_ERROR && strstr(err, "test.conf:2: 'gzip on;' is nginx's syntax"));
    /* A header's value and a return's text may end in ';'. */
    CHECKF(parse("header = Content-Security-Policy: default-src 'self';\nlocation /t {\nreturn = 200 a;\n}\n") ==
           CONFIG_OK, "%s", err);
    CHECK(!strcmp(loc_of(&c->sites[0], "/")->headers[0].value, "default-src 'self';"));
    CHECK(parse("location ~ \\.php$ {\n}\n") == CONFIG_ERROR);
    CHECKF(strstr(err, "test.conf:1: regular-expression locations (location ~ and ~*) are not supported: use a prefix"),
           "%s", err);
    CHECK(parse("site a {\nlocation ~* \\.(png|jpg)$ {\n}\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: regular-expression locations"));
    CHECK(parse("location ^~ /images/ {\n}\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: 'location ^~ /prefix/' is 'location /prefix/ {' here"));
    CHECK(parse("location @fallback {\n}\n") == CONFIG_ERROR && strstr(err, "test.conf:1: named locations"));
}

static void certificates_pair(void)
{
    CHECKF(parse("listen = 127.0.0.1:443 tls\ncert = /e.pem\nkey = /e.key\ncert = /r.pem\nkey = /r.key\n"
                 "site a.test {\n}\nsite b.test {\ncert = /b.pem\nkey = /b.key\n}\nsite c.test {\n}\n") == CONFIG_OK, "%s", err);
    CHECK(c->ntls == 2 && c->sites[0].tls == 0 && c->sites[2].tls == 0 && c->sites[1].tls == 1);
    CHECK(c->tls[0].npairs == 2 && !strcmp(c->tls[0].pairs[1].key, "/r.key") && !strcmp(c->tls[0].pairs[1].key_from, "test.conf:5"));
    CHECK(parse("listen = 127.0.0.1:443 tls\ncert = /a.pem\ncert = /b.pem\nkey = /a.key\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:2: 2 cert and 1 key at the top level: each certificate needs its key"));
    CHECKF(parse("listen = 127.0.0.1:443 tls\nsite a.test {\n}\n") == CONFIG_OK && c->ntls == 1 && !c->tls[0].npairs,
           "%s", err);
}

static void addresses(void)
{
    struct net n;
    char why[200];
    uint8_t a[16];
    struct sockaddr_in in = { .sin_family = AF_INET };
    struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
    CHECK(!net_parse("10.0.0.0/8", &n, why, sizeof why));
    inet_pton(AF_INET, "10.9.8.7", &in.sin_addr);
    CHECK(net_address((struct sockaddr *)&in, a) && net_contains(&n, a));
    inet_pton(AF_INET6, "::ffff:10.9.8.7", &in6.sin6_addr);           /* a dual-stack socket's IPv4 client */
    CHECK(net_address((struct sockaddr *)&in6, a) && net_contains(&n, a));
    inet_pton(AF_INET6, "::a09:807", &in6.sin6_addr);                 /* IPv4-compatible is not mapped */
    CHECK(net_address((struct sockaddr *)&in6, a) && !net_contains(&n, a));
    CHECK(!net_parse("2001:db8::/32", &n, why, sizeof why));
    inet_pton(AF_INET6, "2001:db8:ffff::1", &in6.sin6_addr);
    CHECK(net_address((struct sockaddr *)&in6, a) && net_contains(&n, a));
    inet_pton(AF_INET6, "2001:db9::1", &in6.sin6_addr);
    CHECK(net_address((struct sockaddr *)&in6, a) && !net_contains(&n, a));
    CHECK(!net_parse("all", &n, why, sizeof why) && net_contains(&n, a));
    struct access_rule rules[2] = { { .allow = true }, { .allow = false } };
    CHECK(!net_parse("192.0.2.0/25", &rules[0].net, why, sizeof why) && !net_parse("all", &rules[1].net, why, sizeof why));
    inet_pton(AF_INET, "192.0.2.127", &in.sin_addr);
    net_address((struct sockaddr *)&in, a);
    CHECK(access_allows(rules, 2, a));
    inet_pton(AF_INET, "192.0.2.128", &in.sin_addr);
    net_address((struct sockaddr *)&in, a);
    CHECK(!access_allows(rules, 2, a) && access_allows(rules, 0, a));
    const char *bad[] = { "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/", "10.0.0.1/8", "::1/129", "x", "/8",
                          "1.2.3", "10.0.0.0/8/8", "::ffff:1.2.3.4/97x" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(net_parse(bad[i], &n, why, sizeof why), "'%s' parsed", bad[i]);
}

static const char *resolve(const char *const *values, size_t n, const char *peer)
{
    static char text[64];
    uint8_t p[16];
    struct sockaddr_storage ss = { 0 }, out;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, peer, &in->sin_addr) == 1)
        in->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, peer, &in6->sin6_addr) == 1)
        in6->sin6_family = AF_INET6;
    net_address((struct sockaddr *)&ss, p);
    if (!realip_resolve(c, p, values, n, &out))
        return "-";
    const void *a = out.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&out)->sin_addr
                                             : (const void *)&((struct sockaddr_in6 *)&out)->sin6_addr;
    inet_ntop(out.ss_family, a, text, sizeof text);
    return text;
}

/* What a trusted proxy says of the client, and what anyone else may try. */
static void real_client_address(void)
{
    CHECKF(parse("real_ip_from = 127.0.0.1 10.0.0.0/8\nreal_ip_from = ::1\n") == CONFIG_OK, "%s", err);
    const char *one[] = { "203.0.113.5" };
    CHECK(!strcmp(resolve(one, 1, "127.0.0.1"), "203.0.113.5"));
    CHECK(!strcmp(resolve(one, 1, "::1"), "203.0.113.5"));
    CHECK(!strcmp(resolve(one, 1, "198.51.100.9"), "-"));           /* not a trusted peer: not believed */
    /* The client wrote the left part: the first untrusted address from the right wins. */
    const char *spoof[] = { "6.6.6.6, 203.0.113.5" };
    CHECK(!strcmp(resolve(spoof, 1, "127.0.0.1"), "203.0.113.5"));
    const char *chain[] = { "6.6.6.6, 203.0.113.5, 10.1.1.1, 10.2.2.2" };
    CHECK(!strcmp(resolve(chain, 1, "127.0.0.1"), "203.0.113.5"));
    const char *lines[] = { "6.6.6.6", "203.0.113.5:4711", " 10.1.1.1 " };   /* several lines, ports, spaces */
    CHECK(!strcmp(resolve(lines, 3, "127.0.0.1"), "203.0.113.5"));
    const char *v6[] = { "[2001:db8::7]:443" }, *bare6[] = { "2001:db8::7" }, *mapped[] = { "::ffff:203.0.113.5" };
    CHECK(!strcmp(resolve(v6, 1, "127.0.0.1"), "2001:db8::7") && !strcmp(resolve(bare6, 1, "127.0.0.1"), "2001:db8::7"));
    CHECK(!strcmp(resolve(mapped, 1, "127.0.0.1"), "203.0.113.5"));
    /* Garbage ends the walk: the client is the last hop that could be named. */
    const char *garbage[] = { "203.0.113.5, unknown, 10.1.1.1" }, *junk[] = { "<script>" }, *empty[] = { "" };
    CHECK(!strcmp(resolve(garbage, 1, "127.0.0.1"), "10.1.1.1"));
    CHECK(!strcmp(resolve(junk, 1, "127.0.0.1"), "-") && !strcmp(resolve(empty, 1, "127.0.0.1"), "-"));
    const char *all_trusted[] = { "10.0.0.1, 10.0.0.2" };
    CHECK(!strcmp(resolve(all_trusted, 1, "127.0.0.1"), "10.0.0.1"));
    /* A long list: only the rightmost hops are read. */
    static char many[40 * 20];
    many[0] = 0;
    for (int i = 0; i < 40; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s10.0.0.%d", i ? "," : "", i + 1);
    snprintf(many + strlen(many), sizeof many - strlen(many), ",203.0.113.5");
    const char *long_list[] = { many };
    CHECK(!strcmp(resolve(long_list, 1, "127.0.0.1"), "203.0.113.5"));
    /* Forwarded (RFC 7239), its quoted forms, and what is not an address there. */
    CHECKF(parse("real_ip_from = 127.0.0.1\nreal_ip_header = forwarded\n") == CONFIG_OK, "%s", err);
    const char *fwd[] = { "for=6.6.6.6;proto=https, for=\"[2001:db8:cafe::17]:4711\";by=10.0.0.1" };
    CHECK(!strcmp(resolve(fwd, 1, "127.0.0.1"), "2001:db8:cafe::17"));
    const char *fwd2[] = { "For=\"203.0.113.5:80\", proto=http;for=127.0.0.1" };
    CHECK(!strcmp(resolve(fwd2, 1, "127.0.0.1"), "203.0.113.5"));
    const char *hidden[] = { "for=203.0.113.5, for=_hidden" }, *comma[] = { "for=\"1.2.3.4,5.6.7.8\"" };
    CHECK(!strcmp(resolve(hidden, 1, "127.0.0.1"), "-") && !strcmp(resolve(comma, 1, "127.0.0.1"), "-"));
    const char *unterminated[] = { "for=\"203.0.113.5" };
    CHECK(!strcmp(resolve(unterminated, 1, "127.0.0.1"), "203.0.113.5"));
}

static const char *warned;
static void warn(const char *key) { warned = key; }

static void debug_env(void)
{
    config_unref(c);
    c = config_new();
    memset(&e, 0, sizeof e);
    CHECK(config_apply_debug_env(c, "http2serveparking=0", warn, &e) == CONFIG_OK && !c->parking);
    CHECK(!strcmp(c->parking_source, "H2PARK_DEBUG"));
    CHECK(config_apply_debug_env(c, "foo=1, http2serveparking=1", warn, &e) == CONFIG_OK && c->parking);
    CHECK(warned && !strcmp(warned, "foo"));
    CHECK(config_apply_debug_env(c, "http2serveparking=yes", warn, &e) == CONFIG_ERROR);
    CHECK(config_apply_debug_env(c, "corostackpaint=1", warn, &e) == CONFIG_OK && c->coro_paint);
}

/* A --listen replaces every listen line, the sites' too. */
static void command_line(void)
{
    config_unref(c);
    c = config_new();
    memset(&e, 0, sizeof e);
    const char *file = "site a.test {\nlisten = 127.0.0.1:1\n}\nsite b.test {\nlisten = 127.0.0.1:2\n}\n";
    config_parse(c, default_conf_text, default_conf_size, CONFIG_BUILTIN, &e);
    config_parse(c, file, strlen(file), "f.conf", &e);
    CHECK(config_set(c, "listen", "127.0.0.1:9", &e) == CONFIG_OK && config_set(c, "listen", "127.0.0.1:10 tls", &e) == CONFIG_OK);
    CHECK(config_set(c, "workers", "lots", &e) == CONFIG_ERROR && strstr(err, "command line: workers: 'lots'"));
    memset(&e, 0, sizeof e);
    CHECKF(config_finish(c, &e) == CONFIG_OK, "%s", err);
    CHECK(c->nlisten == 2 && c->sites[0].listen_mask == 3 && c->sites[1].listen_mask == 3);
}

int main(void)
{
    app_register_routes();
    RUN(embedded_default_parses);
    RUN(values_and_units);
    RUN(deadlines_and_caps);
    RUN(numbers_never_wrap);
    RUN(limit_rate_values);
    RUN(listen_lines);
    RUN(listen_options_and_dual_stack);
    RUN(origins_and_user);
    RUN(builtin_routes_allow_lists);
    RUN(errors_name_file_line_problem);
    RUN(every_error_at_once);
    RUN(repeated_keys);
    RUN(keys_and_scopes);
    RUN(sites_by_name);
    RUN(hosts);
    RUN(locations_match);
    RUN(inheritance);
    RUN(reverse_proxy_locations);
    RUN(tls_upstreams);
    RUN(health_checks);
    RUN(values_reaching_heads_are_clean);
    RUN(builtin_routes_are_locations);
    RUN(values_of_rules);
    RUN(per_client_limits);
    RUN(nginx_habits_named);
    RUN(certificates_pair);
    RUN(addresses);
    RUN(real_client_address);
    RUN(debug_env);
    RUN(command_line);
    config_unref(c);
    CHECK_DONE();
}
