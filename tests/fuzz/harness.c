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

void fuzz_daemon_init(void)
{
    static int done;
    if (done++)
        return;
    mem_install_hooks();
    char err[1024];
    config_defaults(&cfg);
    if (config_parse(&cfg, default_conf_text, default_conf_size, CONFIG_BUILTIN, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    cfg.log_level = LOG_ERROR;
    cfg.body_timeout = cfg.write_timeout = 0.05;
    /* Every handler that waits is parked, its stack poisoned: a fuzzed exchange that made
     * anything touch a waiting handler's frames is reported. */
    cfg.park_handlers_at_once = true;
    char root[] = "/tmp/h2park-fuzz-XXXXXX";
    if (!mkdtemp(root))
        abort();
    write_file(root, "index.html", 40);
    write_file(root, "big.bin", 100000);
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/sub", root);
    mkdir(sub, 0755);
    write_file(sub, "index.html", 10);
    snprintf(cfg.root, sizeof cfg.root, "%s", root);
    app_init();
    if (access_log_open(""))
        abort();
    conn_protocols.cleartext = &detect_proto;
    conn_runtime = request_runtime;
    /* The fuzzers run under ASan, whose frames are larger: twice the default stack, as
     * the daemon's sanitizer builds take (core/worker.c). */
    struct coro_options co = { .stack_size = 2 * cfg.coro_stack_size };
    coro_configure(&co);
    workers = &worker;
    nworkers = 1;
    if (worker_init_loop(&worker))
        abort();
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
    struct conn *c = conn_new(&worker, sv[0], flags, (struct sockaddr *)&peer, sizeof peer);
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
