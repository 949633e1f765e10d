/* Unit tests of configuration parsing: the embedded default, every kind of value, the
 * errors (naming file, line and problem), listen replacement and options, where root
 * came from, user, and H2PARK_DEBUG. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "coro.h"
#include "log.h"

static struct config c;
static char err[1024];

static int parse(const char *text)
{
    config_defaults(&c);
    err[0] = 0;
    return config_parse(&c, text, strlen(text), "test.conf", err, sizeof err);
}

static void embedded_default_parses(void)
{
    config_defaults(&c);
    CHECKF(config_parse(&c, default_conf_text, default_conf_size, CONFIG_BUILTIN, err, sizeof err) == CONFIG_OK, "%s", err);
    CHECK(c.nlisten == 2 && !c.listen[0].tls && c.listen[1].tls);
    CHECK(!strcmp(c.listen[0].text, "127.0.0.1:8080") && !strcmp(c.listen[1].text, "127.0.0.1:8443"));
    CHECK(!strcmp(c.root, "./www") && c.parking && c.builtin_routes && c.workers == 0);
    CHECK(c.preface_timeout == 10 && c.idle_timeout == 300 && c.write_timeout == 30 && c.shutdown_timeout == 10);
    CHECK(c.max_concurrent_streams == 100 && c.max_header_list_size == 65536);
    /* The size is the file's: it ends in its last newline, not in a NUL or padding. */
    CHECK(strlen(default_conf_text) == default_conf_size && default_conf_text[default_conf_size - 1] == '\n');
}

static void values_and_units(void)
{
    CHECKF(parse("workers = 3\nroot = /srv/www # comment\nparking = off\nidle_timeout = 250ms\n"
                 "write_timeout = 2m\nmax_conns = 5000\ncoro_stack_size = 65536\ncoro_guard_pages = on\n"
                 "  max_concurrent_streams=7  \nlog_level = debug\naccess_log = /tmp/a.log\n") == CONFIG_OK, "%s", err);
    CHECK(c.workers == 3 && !strcmp(c.root, "/srv/www") && !c.parking);
    CHECK(c.idle_timeout > 0.2499 && c.idle_timeout < 0.2501 && c.write_timeout == 120);
    CHECK(c.max_conns == 5000 && c.coro_stack_size == 65536 && c.coro_guard_pages && c.max_concurrent_streams == 7);
    CHECK(c.log_level == LOG_DEBUG && !strcmp(c.access_log, "/tmp/a.log"));
    CHECK(!strcmp(c.parking_source, "config file"));
}

/* The limits that bound what clients can pin: parsed, and auto resolved to something
 * that fits the machine. */
static void deadlines_and_caps(void)
{
    CHECKF(parse("body_timeout = 2500ms\nmax_handlers = 50\n") == CONFIG_OK, "%s", err);
    CHECK(c.body_timeout > 2.4999 && c.body_timeout < 2.5001 && config_max_handlers(&c) == 50);
    CHECKF(parse("max_handlers = auto\n") == CONFIG_OK, "%s", err);
    long auto_handlers = config_max_handlers(&c);
    CHECK(auto_handlers >= 16);
    /* A quarter of memory, at the worst a handler can hold, over the workers. */
    double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    double workers = (double)sysconf(_SC_NPROCESSORS_ONLN);
    CHECKF((double)auto_handlers * (double)config_handler_worst_bytes(&c) * workers <= mem / 4 + 1e6, "%ld", auto_handlers);
    CHECK(config_handler_worst_bytes(&c) >= c.coro_stack_size + c.max_header_list_size + c.initial_window_size);
    CHECK(parse("body_timeout = never\n") == CONFIG_ERROR && strstr(err, "test.conf:1: body_timeout"));
    CHECK(parse("max_handlers = 0\n") == CONFIG_ERROR && strstr(err, "max_handlers: '0' is not a handler count"));
    /* max_conns = auto leaves room for every worker's open-file cache. */
    CHECKF(parse("workers = 2\n") == CONFIG_OK, "%s", err);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur > 2000 && rl.rlim_cur != RLIM_INFINITY)
        CHECKF(config_max_conns(&c) == (long)rl.rlim_cur - 64 - 2 * OPEN_FILE_SLOTS, "%ld", config_max_conns(&c));
}

static void listen_lines(void)
{
    CHECKF(parse("listen = 127.0.0.1:9000\nlisten = [::1]:9443 tls\nlisten = *:80\n") == CONFIG_OK, "%s", err);
    CHECK(c.nlisten == 3 && c.listen[1].tls && c.listen[1].addr.ss_family == AF_INET6);
    struct config d;
    config_defaults(&d);
    config_parse(&d, default_conf_text, default_conf_size, "default", err, sizeof err);
    const char *file = "listen = 10.0.0.1:1\n";
    CHECK(config_parse(&d, file, strlen(file), "f", err, sizeof err) == CONFIG_OK);
    CHECK(d.nlisten == 1);     /* a file's listen lines replace the default's */
}

/* Listen options in any order; "*" is one dual-stack IPv6 socket, "[::]" IPv6 alone. */
static void listen_options_and_dual_stack(void)
{
    CHECKF(parse("listen = 127.0.0.1:80 proxy_protocol tls\nlisten = *:8080 tls\nlisten = [::]:8081\n"
                 "listen = 0.0.0.0:8082\tproxy_protocol\n") == CONFIG_OK, "%s", err);
    CHECK(c.nlisten == 4 && c.listen[0].tls && c.listen[0].proxy_protocol && !c.listen[0].dual);
    CHECK(c.listen[1].dual && c.listen[1].addr.ss_family == AF_INET6 && c.listen[1].tls && !c.listen[1].proxy_protocol);
    CHECK(!c.listen[2].dual && c.listen[2].addr.ss_family == AF_INET6);
    CHECK(!c.listen[3].dual && c.listen[3].addr.ss_family == AF_INET && c.listen[3].proxy_protocol);
    CHECK(parse("listen = 127.0.0.1:80 tls tls\n") == CONFIG_ERROR && strstr(err, "test.conf:1: listen '127.0.0.1:80 tls tls': 'tls' given twice"));
    CHECK(parse("listen = 127.0.0.1:80 proxy\n") == CONFIG_ERROR && strstr(err, "unknown option 'proxy' (tls, proxy_protocol)"));
    CHECK(parse("listen =\n") == CONFIG_ERROR && strstr(err, "expected ADDR:PORT [tls] [proxy_protocol]"));
}

/* root says where it came from; user must exist. */
static void origins_and_user(void)
{
    config_defaults(&c);
    CHECK(!strcmp(c.root_from, CONFIG_BUILTIN));
    CHECKF(config_parse(&c, default_conf_text, default_conf_size, CONFIG_BUILTIN, err, sizeof err) == CONFIG_OK, "%s", err);
    CHECK(!strcmp(c.root_from, CONFIG_BUILTIN) && !c.user[0]);
    const char *file = "# site\nroot = /srv\nuser = root\n";
    CHECK(config_parse(&c, file, strlen(file), "site.conf", err, sizeof err) == CONFIG_OK);
    CHECKF(!strcmp(c.root_from, "site.conf:2") && !strcmp(c.user, "root"), "%s %s", c.root_from, c.user);
    CHECK(parse("user = nosuchuser-h2park\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: user 'nosuchuser-h2park': no such user"));
    CHECK(parse("user =\n") == CONFIG_OK && !c.user[0]);
}

static void errors_name_file_line_problem(void)
{
    CHECK(parse("workers = 2\nbogus = 1\n") == CONFIG_ERROR);
    CHECKF(!strcmp(err, "test.conf:2: unknown key 'bogus'"), "%s", err);
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
    CHECK(config_load_file(&c, "/nonexistent/h2park.conf", err, sizeof err) == CONFIG_ERROR &&
          strstr(err, "/nonexistent/h2park.conf: cannot read"));
}

static struct sockaddr_storage ss;
static const struct sockaddr *addr(const char *text)
{
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &in->sin_addr) == 1)
        in->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1)
        in6->sin6_family = AF_INET6;
    return (const struct sockaddr *)&ss;
}
static bool allowed(const char *text) { return cidr_match(c.builtin_allow, c.nbuiltin_allow, addr(text)); }

/* builtin_routes_allow: loopback by default (IPv4-mapped IPv6 counting as IPv4), lists
 * of addresses and networks that a file's first line replaces and later lines extend,
 * "all", and errors that name the entry. */
static void builtin_routes_allow_lists(void)
{
    config_defaults(&c);
    CHECK(allowed("127.0.0.1") && allowed("127.9.9.9") && allowed("::1") && allowed("::ffff:127.0.0.1"));
    CHECK(!allowed("10.0.0.1") && !allowed("::2") && !allowed("::ffff:10.0.0.1") && !allowed("128.0.0.1"));
    CHECKF(config_parse(&c, default_conf_text, default_conf_size, CONFIG_BUILTIN, err, sizeof err) == CONFIG_OK, "%s", err);
    CHECK(c.nbuiltin_allow == 2 && allowed("127.0.0.1") && allowed("::1") && !allowed("192.0.2.1"));
    const char *file = "builtin_routes_allow = 192.0.2.10\nbuiltin_routes_allow = 10.1.0.0/16, 2001:db8::/32\n";
    CHECKF(config_parse(&c, file, strlen(file), "site.conf", err, sizeof err) == CONFIG_OK, "%s", err);
    CHECK(c.nbuiltin_allow == 3 && !allowed("127.0.0.1") && !allowed("::1"));
    CHECK(allowed("192.0.2.10") && !allowed("192.0.2.11") && allowed("10.1.255.3") && !allowed("10.2.0.1"));
    CHECK(allowed("::ffff:10.1.0.1") && allowed("2001:db8:ffff::1") && !allowed("2001:db9::1"));
    CHECKF(parse("builtin_routes_allow = 10.0.0.0/9 0.0.0.0/0\n") == CONFIG_OK, "%s", err);
    CHECK(allowed("203.0.113.7") && !allowed("::1"));
    CHECKF(parse("builtin_routes_allow = all\n") == CONFIG_OK, "%s", err);
    CHECK(allowed("203.0.113.7") && allowed("2001:db8::1") && allowed("::1"));
    CHECKF(parse("builtin_routes_allow =\n") == CONFIG_OK, "%s", err);
    CHECK(c.nbuiltin_allow == 0 && !allowed("127.0.0.1"));
    CHECK(parse("builtin_routes_allow = localhost\n") == CONFIG_ERROR &&
          strstr(err, "test.conf:1: builtin_routes_allow: 'localhost' is not an IP address or network"));
    CHECK(parse("builtin_routes_allow = 10.0.0.0/33\n") == CONFIG_ERROR && strstr(err, "bad prefix length '33'"));
    CHECK(parse("builtin_routes_allow = 10.0.0.0/+8\n") == CONFIG_ERROR && strstr(err, "bad prefix length '+8'"));
    CHECK(parse("builtin_routes_allow = 10.0.0.1/8\n") == CONFIG_ERROR && strstr(err, "'10.0.0.1/8' has bits set past its prefix"));
    CHECK(parse("builtin_routes_allow = 2001:db8::1/64\n") == CONFIG_ERROR && strstr(err, "bits set past its prefix"));
    char many[2048] = "builtin_routes_allow =";
    for (int i = 0; i < 65; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), " 10.0.0.%d", i);
    strcat(many, "\n");
    CHECK(parse(many) == CONFIG_ERROR && strstr(err, "more than 64 entries"));
}

static const char *warned;
static void warn(const char *key) { warned = key; }

static void debug_env(void)
{
    config_defaults(&c);
    CHECK(config_apply_debug_env(&c, "http2serveparking=0", warn, err, sizeof err) == CONFIG_OK && !c.parking);
    CHECK(!strcmp(c.parking_source, "H2PARK_DEBUG"));
    CHECK(config_apply_debug_env(&c, "foo=1, http2serveparking=1", warn, err, sizeof err) == CONFIG_OK && c.parking);
    CHECK(warned && !strcmp(warned, "foo"));
    CHECK(config_apply_debug_env(&c, "http2serveparking=yes", warn, err, sizeof err) == CONFIG_ERROR);
    CHECK(config_apply_debug_env(&c, "corostackpaint=1", warn, err, sizeof err) == CONFIG_OK && c.coro_paint);
}

int main(void)
{
    RUN(embedded_default_parses);
    RUN(values_and_units);
    RUN(deadlines_and_caps);
    RUN(listen_lines);
    RUN(listen_options_and_dual_stack);
    RUN(origins_and_user);
    RUN(builtin_routes_allow_lists);
    RUN(errors_name_file_line_problem);
    RUN(debug_env);
    CHECK_DONE();
}
