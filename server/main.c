/* h2park's entry point: settings in order of precedence (command line > H2PARK_DEBUG >
 * config file > embedded default), the allocator hooks before any library runs, the
 * wiring of the layers (the connection core learns its protocols, the request runtime
 * its application), the listening sockets, the workers, and the signals (TERM/INT:
 * graceful stop; HUP: reopen the access log and reload the certificate). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "core/conn.h"
#include "mem.h"
#include "proto/detect.h"
#include "proto/h1.h"
#include "proto/h2.h"
#include "scalloc.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage: h2park [options]\n"
            "  -c, --config FILE        read FILE instead of the embedded default config\n"
            "      --listen ADDR:PORT   serve HTTP/1.1 and h2c here (repeatable; replaces every configured listen)\n"
            "      --tls-listen ADDR:PORT  serve h2 and HTTP/1.1 over TLS here (repeatable; same)\n"
            "      --cert FILE          TLS certificate chain (PEM)\n"
            "      --key FILE           TLS private key (PEM)\n"
            "      --root DIR           serve static files from DIR\n"
            "      --workers N          worker threads (default: number of CPUs)\n"
            "      --parking on|off     park idle serve loops (default on)\n"
            "      --access-log FILE    one line per stream\n"
            "      --log-level LEVEL    error, warn, info or debug\n"
            "      --check              check the configuration and exit\n"
            "      --print-default-config  print the embedded default config and exit\n"
            "  -V, --version            print version and build options\n"
            "  -h, --help               this text\n"
            "environment: H2PARK_DEBUG=http2serveparking=0|1[,corostackpaint=1]\n");
}

static void version(void)
{
    struct sc_config sc;
    sc_get_config(&sc);
    printf("h2park %s\n", H2PARK_VERSION);
    printf("  allocator: scalloc, size-specialized malloc %s%s\n", sc.size_specialized ? "on" : "off",
           sc.size_specialized ? "" : " (-X:nosizespecializedmalloc)");
    printf("  coroutines: %s switch\n", coro_switch_kind());
    printf("  nghttp2 %s, llhttp %d.%d.%d, %s, libev %d.%d\n", nghttp2_version(0)->version_str, LLHTTP_VERSION_MAJOR,
           LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH, OpenSSL_version(OPENSSL_VERSION), ev_version_major(),
           ev_version_minor());
}

/* After a TLS handshake: the protocol ALPN chose; a client without ALPN speaks HTTP/1.1. */
static const struct conn_proto *proto_after_tls(const unsigned char *alpn, unsigned len)
{
    return len == 2 && !memcmp(alpn, "h2", 2) ? &h2_proto : &h1_proto;
}

static void tick(int worker, ev_tstamp now, const struct worker_counters *n) { app_tick(worker, now, n); }

static void config_die(const char *msg)
{
    fprintf(stderr, "h2park: %s\n", msg);
    exit(CONFIG_ERROR);
}

static void warn_unknown_debug(const char *key)
{
    fprintf(stderr, "h2park: H2PARK_DEBUG: unknown setting '%s' ignored\n", key);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    if (w->signum == SIGHUP) {
        char err[512];
        if (access_log_open(cfg.access_log))
            log_msg(LOG_ERROR, "SIGHUP: cannot reopen access log %s: %s", cfg.access_log, strerror(errno));
        bool any_tls = false;
        for (int i = 0; i < cfg.nlisten; i++)
            any_tls |= cfg.listen[i].tls;
        if (any_tls && tls_reload(err, sizeof err))
            log_msg(LOG_ERROR, "SIGHUP: keeping the old certificate: %s", err);
        else
            log_msg(LOG_INFO, "SIGHUP: access log reopened%s", any_tls ? ", certificate reloaded" : "");
        return;
    }
    if (shutting_down)
        return;
    log_msg(LOG_INFO, "%s: stopping (GOAWAY to every connection, up to %.0fs for streams in flight)",
            w->signum == SIGTERM ? "SIGTERM" : "SIGINT", cfg.shutdown_timeout);
    shutting_down = 1;
    workers_shutdown();
    ev_break(loop, EVBREAK_ALL);
}

enum { OPT_LISTEN = 256, OPT_TLS_LISTEN, OPT_CERT, OPT_KEY, OPT_ROOT, OPT_WORKERS, OPT_PARKING, OPT_ACCESS_LOG,
       OPT_LOG_LEVEL, OPT_CHECK, OPT_PRINT_DEFAULT };

int main(int argc, char **argv)
{
    mem_install_hooks();
    signal(SIGPIPE, SIG_IGN);

    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' }, { "listen", required_argument, NULL, OPT_LISTEN },
        { "tls-listen", required_argument, NULL, OPT_TLS_LISTEN }, { "cert", required_argument, NULL, OPT_CERT },
        { "key", required_argument, NULL, OPT_KEY }, { "root", required_argument, NULL, OPT_ROOT },
        { "workers", required_argument, NULL, OPT_WORKERS }, { "parking", required_argument, NULL, OPT_PARKING },
        { "access-log", required_argument, NULL, OPT_ACCESS_LOG },
        { "log-level", required_argument, NULL, OPT_LOG_LEVEL }, { "check", no_argument, NULL, OPT_CHECK },
        { "print-default-config", no_argument, NULL, OPT_PRINT_DEFAULT },
        { "version", no_argument, NULL, 'V' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    const char *config_file = NULL;
    bool check_only = false;
    /* First pass: where the config comes from; flags apply after it. */
    int opt;
    while ((opt = getopt_long(argc, argv, "c:Vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': config_file = optarg; break;
        case 'V': version(); return 0;
        case 'h': usage(stdout); return 0;
        case OPT_PRINT_DEFAULT: fwrite(default_conf_text, 1, default_conf_size, stdout); return 0;
        case '?': usage(stderr); return CONFIG_ERROR;
        default: break;
        }
    }
    char err[1024];
    config_defaults(&cfg);
    if (config_parse(&cfg, default_conf_text, default_conf_size, "(embedded default)", err, sizeof err))
        config_die(err);
    cfg.parking_source = "default";
    if (config_file && config_load_file(&cfg, config_file, err, sizeof err))
        config_die(err);
    const char *debug = getenv("H2PARK_DEBUG");
    if (debug && config_apply_debug_env(&cfg, debug, warn_unknown_debug, err, sizeof err))
        config_die(err);

    bool listen_flag_seen = false;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:Vh", longopts, NULL)) != -1) {
        const char *key = NULL;
        char value[1100];
        snprintf(value, sizeof value, "%s", optarg ? optarg : "");
        switch (opt) {
        case OPT_LISTEN:
        case OPT_TLS_LISTEN:
            if (!listen_flag_seen)
                cfg.nlisten = 0;
            listen_flag_seen = true;
            key = "listen";
            if (opt == OPT_TLS_LISTEN)
                snprintf(value, sizeof value, "%s tls", optarg);
            break;
        case OPT_CERT: key = "cert"; break;
        case OPT_KEY: key = "key"; break;
        case OPT_ROOT: key = "root"; break;
        case OPT_WORKERS: key = "workers"; break;
        case OPT_PARKING: key = "parking"; cfg.parking_source = "command line"; break;
        case OPT_ACCESS_LOG: key = "access_log"; break;
        case OPT_LOG_LEVEL: key = "log_level"; break;
        case OPT_CHECK: check_only = true; break;
        default: break;
        }
        if (key && config_set(&cfg, key, value, err, sizeof err)) {
            char msg[1200];
            snprintf(msg, sizeof msg, "command line: %s", err);
            config_die(msg);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "h2park: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return CONFIG_ERROR;
    }
    if (cfg.nlisten == 0)
        config_die("no listen address");

    bool any_tls = false;
    for (int i = 0; i < cfg.nlisten; i++)
        any_tls |= cfg.listen[i].tls;
    if (any_tls && tls_init(err, sizeof err))
        config_die(err);
    if (app_init(err, sizeof err))
        config_die(err);
    conn_protocols.cleartext = &detect_proto;
    conn_protocols.after_tls = proto_after_tls;
    worker_tick_hook = tick;
    if (access_log_open(cfg.access_log)) {
        snprintf(err, sizeof err, "access_log %.900s: %s", cfg.access_log, strerror(errno));
        config_die(err);
    }
    if (check_only) {
        printf("configuration ok\n");
        return 0;
    }
    if (workers_listen(err, sizeof err))
        config_die(err);

    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old);     /* workers inherit this: signals go to main */
    if (workers_start()) {
        fprintf(stderr, "h2park: cannot start workers\n");
        return 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    ev_signal sigs[3];
    int signums[3] = { SIGINT, SIGTERM, SIGHUP };
    for (int i = 0; i < 3; i++) {
        ev_signal_init(&sigs[i], on_signal, signums[i]);
        ev_signal_start(loop, &sigs[i]);
    }
    for (int i = 0; i < cfg.nlisten; i++)
        log_msg(LOG_INFO, "listening on %s (%s)", cfg.listen[i].text,
                cfg.listen[i].tls ? "h2 and HTTP/1.1 over TLS" : "HTTP/1.1 and h2c");
    struct sc_config sc;
    sc_get_config(&sc);
    log_msg(LOG_INFO, "h2park %s: %d workers, parking %s (from %s), size-specialized malloc %s, root %s",
            H2PARK_VERSION, nworkers, cfg.parking ? "on" : "off", cfg.parking_source,
            sc.size_specialized ? "on" : "off", cfg.root);
    ev_run(loop, 0);
    workers_join();
    if (cfg.coro_paint) {
        struct coro_counters k;
        coro_read_counters(&k);
        log_msg(LOG_INFO, "deepest coroutine stack use: %llu bytes of %zu", (unsigned long long)k.deepest,
                cfg.coro_stack_size);
    }
    log_msg(LOG_INFO, "stopped");
    return 0;
}
