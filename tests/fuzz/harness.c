/* The fuzzers' daemon: one worker's loop run in the fuzzer's thread, a site under a
 * temporary root, and a connection per input fed through a socketpair - the same
 * accept-to-close path a peer's bytes take (conn_new, the serve loop, protocol
 * detection, nghttp2 or HTTP/1.1, handlers, routes), minus the listening socket.
 *
 * Each input is written, then the peer's side is shut so the daemon sees its end; the
 * loop runs until the connection (and any lingering close) is gone, reading and
 * dropping what the daemon answers.  Anything left after that many turns is closed by
 * force, so no state carries over from one input to the next. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "app/app.h"
#include "config.h"
#include "core/conn.h"
#include "log.h"
#include "mem.h"
#include "proto/detect.h"
#include "runtime/runtime.h"

static struct worker worker;

static void write_file(const char *dir, const char *name, size_t size)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; f && i < size; i++)
        fputc('a' + (int)(i % 26), f);
    if (f)
        fclose(f);
}

/* The daemon's configuration: the embedded default, then sites and locations that route
 * every kind of answer - returns with variables, access rules, a listing, a fallback, a
 * body limit, error pages, a redirect to https, clients named by a proxy's header - so
 * that the fuzzers' requests reach them by Host and path. */
static const char site_conf[] =
    "log_level = error\n"
    "body_timeout = 50ms\n"
    "write_timeout = 50ms\n"
    "real_ip_from = 0.0.0.0/8\n"
    "header = X-Fuzz: 1\n"
    "site a.test *.b.test {\n"
    "    error_page = 404 /index.html\n"
    "    location /r {\n        return = 301 https://$host$request_uri\n    }\n"
    "    location /u/ {\n        return = 302 $uri?$args\n    }\n"
    "    location /t/ {\n        return = 200 \"$scheme $host $uri $args$is_args $remote_addr $server_port\"\n    }\n"
    "    location /deny/ {\n        deny = all\n    }\n"
    "    location /list/ {\n        alias = @ROOT@/\n        directory_listing = on\n        dotfiles = allow\n    }\n"
    "    location /spa/ {\n        alias = @ROOT@/sub/\n        fallback = /index.html\n    }\n"
    "    location /up/ {\n        max_body_size = 10\n        handler = echo\n    }\n"
    "    location = /f {\n        alias = @ROOT@/index.html\n    }\n"
    "}\n"
    "site redirect.test {\n    https_redirect = on\n}\n"
    "site * {\n    root = @ROOT@\n}\n";

static char root[] = "/tmp/h2park-fuzz-XXXXXX";

/* The site's files go when the process ends: a test program runs this many times. */
static void remove_root(void)
{
    static const char *const names[] = { "index.html", "big.bin", ".hidden", "sub/index.html", "sub" };
    char path[1100];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, names[i]);
        if (unlink(path))
            rmdir(path);
    }
    rmdir(root);
}

void fuzz_daemon_init(void)
{
    static int done;
    if (done++)
        return;
    mem_install_hooks();
    if (!mkdtemp(root))
        abort();
    atexit(remove_root);
    write_file(root, "index.html", 40);
    write_file(root, "big.bin", 100000);
    write_file(root, ".hidden", 10);
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/sub", root);
    mkdir(sub, 0755);
    write_file(sub, "index.html", 10);
    char text[4096] = "";
    for (const char *p = site_conf; *p;) {
        const char *at = strstr(p, "@ROOT@");
        size_t n = at ? (size_t)(at - p) : strlen(p);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%.*s%s", (int)n, p, at ? root : "");
        p += n + (at ? 6 : 0);
    }
    app_register_routes();
    static struct config_errors e;
    struct config *c = config_new();
    config_parse(c, default_conf_text, default_conf_size, CONFIG_BUILTIN, &e);
    config_parse(c, text, strlen(text), "fuzz-site.conf", &e);
    config_finish(c, &e);
    /* Every handler that waits is parked, its stack poisoned: a fuzzed exchange that made
     * anything touch a waiting handler's frames is reported. */
    c->park_handlers_at_once = true;
    if (e.count || static_open_roots(c, &e)) {
        fprintf(stderr, "%s", e.text);
        abort();
    }
    log_set_level(c->log_level);
    app_init();
    char why[200];
    if (access_log_open("", why, sizeof why))
        abort();
    conn_protocols.cleartext = &detect_proto;
    conn_runtime = request_runtime;
    /* The fuzzers run under ASan, whose frames are larger: twice the default stack, as
     * the daemon's sanitizer builds take (core/worker.c). */
    struct coro_options co = { .stack_size = 2 * c->coro_stack_size };
    coro_configure(&co);
    workers = &worker;
    nworkers = 1;
    if (worker_use_config(&worker, c) || worker_init_loop(&worker))
        abort();
    config_unref(c);               /* the worker holds it */
}

static void drain(int fd)
{
    char sink[65536];
    while (read(fd, sink, sizeof sink) > 0) {
    }
}

void fuzz_connection(const uint8_t *data, size_t size, bool half_close)
{
    fuzz_connection_flags(data, size, half_close, 0);
}

void fuzz_connection_flags(const uint8_t *data, size_t size, bool half_close, unsigned flags)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
        abort();
    struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(1) };
    struct conn *c = conn_new(&worker, sv[0], flags, NO_LISTENER, (struct sockaddr *)&peer, sizeof peer);
    if (!c)
        abort();
    size_t off = 0;
    for (int turn = 0; turn < 200 && off < size; turn++) {
        ssize_t n = write(sv[1], data + off, size - off);
        if (n > 0)
            off += (size_t)n;
        ev_run(worker.loop, EVRUN_NOWAIT);
        drain(sv[1]);
    }
    if (half_close)
        shutdown(sv[1], SHUT_WR);
    for (int turn = 0; turn < 200 && workers_live_conns() > 0; turn++) {
        ev_run(worker.loop, EVRUN_NOWAIT);
        drain(sv[1]);
    }
    while (worker.conns) {     /* what the input left open (waiting handlers, timers) */
        conn_force_close(worker.conns);
        ev_run(worker.loop, EVRUN_NOWAIT);
    }
    close(sv[1]);
    for (int turn = 0; turn < 20 && workers_live_conns() > 0; turn++)
        ev_run(worker.loop, EVRUN_NOWAIT);    /* lingering closes see the end */
}
