/* h2park's entry point and its life as a process.
 *
 * Settings come in order of precedence (command line > H2PARK_DEBUG > config file >
 * embedded default), loaded the same way at start and on every SIGHUP (load_settings)
 * into a new configuration tree.  It is applied in steps that can fail - the listening
 * sockets, the TLS contexts, the roots, the access log - and only then committed and
 * published whole to the workers, who take it between two events of their loops
 * (apply_config, core/worker.c); requests in flight finish on the tree they began
 * under.  At start any failure ends the process with status 2 and every problem found,
 * each naming file, line and problem; on a reload they leave the running configuration
 * as it was, and are logged.  A reload is not begun while the workers are still taking the
 * last one: a SIGHUP meanwhile is carried out once they have.
 *
 * Signals arrive on the main thread's loop: HUP reloads; USR1 reopens the access log (as
 * nginx does, for logrotate's postrotate); TERM and INT stop (GOAWAY to
 * every connection, streams in flight finish for up to shutdown_timeout), and a second
 * TERM or INT exits at once.  systemd hears READY=1 once every worker serves, RELOADING=1
 * and READY=1 around a reload, and STOPPING=1 (notify.c).  Also here: the allocator
 * hooks before any library runs, and the wiring of the layers (the connection core
 * learns its protocols, the request runtime its application). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <llhttp.h>
#include <nghttp2/nghttp2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/app.h"
#include "app/htpasswd.h"
#include "clienttable.h"
#include "core/conn.h"
#include "mem.h"
#include "notify.h"
#include "pathreport.h"
#include "privileges.h"
#include "proto/detect.h"
#include "proto/h1.h"
#include "proto/h2.h"
#include "runtime/runtime.h"
#include "scalloc.h"
#include "upstream/upstream.h"

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
            "      --access-log FILE    one line per request\n"
            "      --log-level LEVEL    error, warn, info or debug\n"
            "      --check              check the configuration (and bind each address, load the certificate,\n"
            "                           open root and the access log) and exit\n"
            "      --print-default-config  print the embedded default config and exit\n"
            "  -V, --version            print version and build options\n"
            "  -h, --help               this text\n"
            "signals: HUP reloads the configuration; USR1 reopens the access log; TERM or INT stops gracefully,\n"
            "  a second one at once\n"
            "environment: H2PARK_DEBUG=http2serveparking=0|1[,corostackpaint=1]; from systemd:\n"
            "  LISTEN_FDS/LISTEN_PID (socket activation), NOTIFY_SOCKET (readiness)\n");
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

static void tick(int worker, ev_tstamp now, const struct worker_counters *n, const struct config *cfg)
{
    app_tick(worker, now, n, cfg);
}

static void warn_unknown_debug(const char *key)
{
    fprintf(stderr, "h2park: H2PARK_DEBUG: unknown setting '%s' ignored\n", key);
}

enum { OPT_LISTEN = 256, OPT_TLS_LISTEN, OPT_CERT, OPT_KEY, OPT_ROOT, OPT_WORKERS, OPT_PARKING, OPT_ACCESS_LOG,
       OPT_LOG_LEVEL, OPT_CHECK, OPT_PRINT_DEFAULT };
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

static int saved_argc;
static char **saved_argv;
static const char *config_file;
static struct config *running;       /* what the workers were last given (the main thread's reference) */

/* Every setting, from the embedded default up to the command line, as a new tree; NULL
 * with every problem in e. */
static struct config *load_settings(bool *check_only, struct config_errors *e)
{
    struct config *c = config_new();
    config_parse(c, default_conf_text, default_conf_size, CONFIG_BUILTIN, e);
    if (config_file)
        config_load_file(c, config_file, e);
    const char *debug = getenv("H2PARK_DEBUG");
    if (debug)
        config_apply_debug_env(c, debug, warn_unknown_debug, e);
    optind = 0;                      /* glibc: start over, permutation state included */
    int opt;
    while ((opt = getopt_long(saved_argc, saved_argv, "c:Vh", longopts, NULL)) != -1) {
        const char *key = NULL;
        char value[1100];
        snprintf(value, sizeof value, "%s", optarg ? optarg : "");
        switch (opt) {
        case OPT_LISTEN: key = "listen"; break;
        case OPT_TLS_LISTEN: key = "listen"; snprintf(value, sizeof value, "%.1000s tls", optarg); break;
        case OPT_CERT: key = "cert"; break;
        case OPT_KEY: key = "key"; break;
        case OPT_ROOT: key = "root"; break;
        case OPT_WORKERS: key = "workers"; break;
        case OPT_PARKING: key = "parking"; break;
        case OPT_ACCESS_LOG: key = "access_log"; break;
        case OPT_LOG_LEVEL: key = "log_level"; break;
        case OPT_CHECK: if (check_only) *check_only = true; break;
        default: break;
        }
        if (key)
            config_set(c, key, value, e);
    }
    if (optind < saved_argc)
        config_error(e, "unexpected argument '%.200s' (see --help)", saved_argv[optind]);
    config_finish(c, e);
    if (e->count) {
        config_unref(c);
        return NULL;
    }
    return c;
}

enum apply_mode { APPLY_START, APPLY_RELOAD, APPLY_CHECK };

/* What cannot change while workers run is kept as it is, and said so. */
static void keep_restart_only(struct config *next)
{
#define KEEP(field, fmt)                                                                                          \
    if (next->field != running->field) {                                                                          \
        log_msg(LOG_WARN, "reload: " #field " " fmt " -> " fmt " takes a restart; still " fmt, running->field,    \
                next->field, running->field);                                                                     \
        next->field = running->field;                                                                             \
    }
    KEEP(workers, "%ld")
    KEEP(coro_stack_size, "%zu")
    KEEP(coro_guard_pages, "%d")
    KEEP(limit_zone_size, "%llu")
    KEEP(limit_prefix_v4, "%u")
    KEEP(limit_prefix_v6, "%u")
#undef KEEP
    if (strcmp(next->user, running->user)) {
        log_msg(LOG_WARN, "reload: user '%s' -> '%s' takes a restart; still '%s'", running->user, next->user,
                running->user);
        snprintf(next->user, sizeof next->user, "%s", running->user);
    }
}

static unsigned pending_gen;         /* published, not yet taken by every worker */

/* The per-client table: made for the first configuration that asks for a limit, then
 * given to every later one - the same table, so that a connection counted under one
 * configuration is let go of in it under the next, and clients' buckets outlive a
 * reload (its size and prefixes take a restart).  Never freed: the process's. */
static struct client_table *clients;

static void give_client_table(struct config *next, struct config_errors *e)
{
    if (!clients && config_has_limits(next) &&
        !(clients = client_table_new(next->limit_zone_size, next->limit_prefix_v4, next->limit_prefix_v6)))
        config_error(e, "limit_zone_size: cannot map %llu bytes for the client table",
                     (unsigned long long)next->limit_zone_size);
    next->clients = clients;
}

/* Checks next against the machine (sockets, TLS, roots, access log) and, unless only
 * checking, makes it the running configuration (it takes next's reference).  -1 with
 * every problem in e: nothing changed. */
static int apply_config(struct config *next, enum apply_mode mode, struct config_errors *e)
{
    if (mode == APPLY_RELOAD)
        keep_restart_only(next);
    struct listener plan[MAX_LISTEN];
    char err[1024];
    if (listeners_prepare(next, plan, next->listen_of_slot, mode == APPLY_CHECK, err, sizeof err)) {
        config_error(e, "%s", err);
        config_unref(next);
        return -1;
    }
    tls_prepare(next, e);
    upstream_tls_prepare(next, e);
    if (mode == APPLY_START && !e->count && privileges_drop(next->user, err, sizeof err))
        config_error(e, "%s", err);
    if (!e->count)
        static_open_roots(next, e);
    if (!e->count)
        htpasswd_load_all(next, e);
    if (!e->count && access_log_open(next->access_log, err, sizeof err))
        config_error(e, "%s: access_log %.700s: %s", next->access_log_from, next->access_log, err);
    if (!e->count && mode == APPLY_CHECK)
        print_paths(next, stdout);
    if (!e->count && mode != APPLY_CHECK)
        give_client_table(next, e);
    if (e->count || mode == APPLY_CHECK) {
        listeners_abort(plan);       /* (--check exits next: nothing to keep) */
        config_unref(next);
        return e->count ? -1 : 0;
    }
    listeners_commit(plan);
    log_set_level(next->log_level);
    struct config *old = running;
    running = next;
    pending_gen = workers_publish(next);
    upstream_health_use(next);
    config_unref(old);
    return 0;
}

static void config_die(const struct config_errors *e)
{
    for (const char *p = e->text; *p;) {
        const char *nl = strchr(p, '\n');
        fprintf(stderr, "h2park: %.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
        p = nl ? nl + 1 : p + strlen(p);
    }
    exit(CONFIG_ERROR);
}

static struct ev_loop *main_loop;
static bool stopping, reload_again, started;

static void reload(void)
{
    if (pending_gen) {
        reload_again = true;
        log_msg(LOG_INFO, "SIGHUP: the last reload is still being taken up; reloading again after it");
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    notify_service_manager("RELOADING=1\nMONOTONIC_USEC=%llu",
                           (unsigned long long)now.tv_sec * 1000000ull + (unsigned long long)now.tv_nsec / 1000);
    log_msg(LOG_INFO, "SIGHUP: reloading %s", config_file ? config_file : "the embedded default");
    static struct config_errors e;
    memset(&e, 0, sizeof e);
    struct config *next = load_settings(NULL, &e);
    if (!next || apply_config(next, APPLY_RELOAD, &e)) {
        char first[600];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(e.text, "\n"), e.text);
        log_msg(LOG_ERROR, "reload failed, the running configuration stays: %s%s", first,
                e.count > 1 ? " (and the errors below)" : "");
        for (const char *p = strchr(e.text, '\n'); p && p[1]; p = strchr(p + 1, '\n'))
            log_msg(LOG_ERROR, "reload failed: %.*s", (int)strcspn(p + 1, "\n"), p + 1);
        notify_service_manager("READY=1\nSTATUS=reload failed: %s", first);
    }
}

/* A worker took a configuration, or stopped. */
static void on_workers(void)
{
    if (stopping) {
        if (workers_all_exited())
            ev_break(main_loop, EVBREAK_ALL);
        return;
    }
    if (!pending_gen || !workers_all_applied(pending_gen))
        return;
    pending_gen = 0;
    notify_service_manager("READY=1\nSTATUS=serving");
    if (started)
        log_msg(LOG_INFO, "reload: every worker runs the new configuration");
    started = true;
    if (reload_again) {
        reload_again = false;
        reload();
    }
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop, (void)revents;
    if (w->signum == SIGHUP) {
        if (!stopping)
            reload();
        return;
    }
    if (w->signum == SIGUSR1) {
        /* The running configuration's file, opened again (log.c swaps it in atomically). */
        char why[300];
        if (access_log_open(running->access_log, why, sizeof why))
            log_msg(LOG_ERROR, "SIGUSR1: cannot reopen access_log %s: %s", running->access_log, why);
        else if (running->access_log[0])
            log_msg(LOG_INFO, "SIGUSR1: reopened access_log %s", running->access_log);
        return;
    }
    const char *name = w->signum == SIGTERM ? "SIGTERM" : "SIGINT";
    if (stopping) {
        log_msg(LOG_WARN, "second %s: exiting now", name);
        _exit(1);
    }
    stopping = true;
    notify_service_manager("STOPPING=1");
    log_msg(LOG_INFO, "%s: stopping (GOAWAY to every connection, up to %.0fs for streams in flight; "
            "another %s exits at once)", name, running->shutdown_timeout, name);
    atomic_store(&shutting_down, 1);
    workers_shutdown();
}

int main(int argc, char **argv)
{
    mem_install_hooks();
    signal(SIGPIPE, SIG_IGN);
    saved_argc = argc;
    saved_argv = argv;

    /* First pass: where the config comes from, and the options that do not serve. */
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
    app_register_routes();           /* the handlers a configuration may name */
    static struct config_errors e;
    bool check_only = false;
    struct config *next = load_settings(&check_only, &e);
    if (!next)
        config_die(&e);
    log_set_level(next->log_level);  /* what applying says is logged at the level asked for */
    if (check_only) {
        if (apply_config(next, APPLY_CHECK, &e))
            config_die(&e);
        printf("configuration ok\n");
        return 0;
    }
    char err[1024];
    if (listen_inherit(err, sizeof err)) {
        config_error(&e, "%s", err);
        config_die(&e);
    }
    long n = next->workers > 0 ? next->workers : sysconf(_SC_NPROCESSORS_ONLN);
    if (workers_create(n > 0 ? (int)n : 1)) {
        fprintf(stderr, "h2park: out of memory\n");
        return 1;
    }
    if (apply_config(next, APPLY_START, &e))
        config_die(&e);
    if (listen_inherited_unused(err, sizeof err)) {
        config_error(&e, "%s", err);
        config_die(&e);
    }
    app_init();
    conn_protocols.cleartext = &detect_proto;
    conn_protocols.after_tls = proto_after_tls;
    conn_runtime = request_runtime;
    worker_tick_hook = tick;
    worker_config_hook = app_configure;

    main_loop = ev_default_loop(EVFLAG_AUTO);
    enum { NSIGNALS = 4 };
    ev_signal sigs[NSIGNALS];
    int signums[NSIGNALS] = { SIGINT, SIGTERM, SIGHUP, SIGUSR1 };
    for (int i = 0; i < NSIGNALS; i++) {
        ev_signal_init(&sigs[i], on_signal, signums[i]);
        ev_signal_start(main_loop, &sigs[i]);
    }
    sigset_t block, old;
    sigemptyset(&block);
    for (int i = 0; i < NSIGNALS; i++)
        sigaddset(&block, signums[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);     /* workers inherit this: signals go to main */
    if (workers_start(main_loop, on_workers)) {
        fprintf(stderr, "h2park: cannot start workers\n");
        return 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    struct sc_config sc;
    sc_get_config(&sc);
    const struct docroot *root = location_for_path(&running->sites[0], "/", 1, true)->docroot;
    log_msg(LOG_INFO, "h2park %s: %d workers, parking %s (from %s), size-specialized malloc %s, %u site%s, root %s",
            H2PARK_VERSION, nworkers, running->parking ? "on" : "off", running->parking_source,
            sc.size_specialized ? "on" : "off", running->nsites, running->nsites == 1 ? "" : "s",
            root->fd >= 0 ? root->path : root->path ? "(the built-in page)" : "(none: files are 404)");
    ev_run(main_loop, 0);
    upstream_health_stop();
    workers_join();
    if (running->coro_paint) {
        struct coro_counters k;
        coro_read_counters(&k);
        log_msg(LOG_INFO, "deepest coroutine stack use: %llu bytes of %zu", (unsigned long long)k.deepest,
                running->coro_stack_size);
    }
    log_msg(LOG_INFO, "stopped");
    return 0;
}
