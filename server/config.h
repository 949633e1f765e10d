/* The daemon's configuration (config.c): one struct, filled from the embedded default,
 * a config file, H2PARK_DEBUG and the command line, in that order.
 *
 * cfg is per thread.  The main thread loads and checks a configuration, then publishes
 * it (core/worker.c); each worker copies the published one into its own cfg between two
 * events of its loop.  So no thread reads a configuration another is writing, and
 * everything a worker does within one event sees one configuration. */
#ifndef H2PARK_CONFIG_H
#define H2PARK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define H2PARK_VERSION "0.2.0"
#define MAX_LISTEN 16
#define OPEN_FILE_SLOTS 256           /* each worker's open-file cache (app/static.c) */
#define REQUEST_OUTPUT_MAX (64u << 10) /* response bytes a handler may get ahead by (request.c) */

struct listen_addr {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bool tls;
    bool proxy_protocol;           /* a PROXY protocol header (v1 or v2) comes first */
    bool dual;                     /* "*:PORT": one IPv6 socket that takes IPv4 too */
    char text[64];
};

/* An address or a network (ADDR/BITS), IPv4 or IPv6. */
struct cidr {
    uint8_t family;                /* AF_INET, AF_INET6 */
    uint8_t bits;
    uint8_t addr[16];
};
#define MAX_ALLOW 64

/* The reverse proxy's settings (proxy_conf.c): where requests go, the servers behind it,
 * and the limits of each exchange.  Top-level settings until locations exist; each is
 * named as nginx names it, so that it moves into a location unchanged. */
#define MAX_UPSTREAM_SERVERS 16
struct upstream_server_conf {
    struct sockaddr_storage addr;  /* AF_INET, AF_INET6 or AF_UNIX */
    socklen_t addrlen;
    char text[112];                /* "127.0.0.1:8081", "[::1]:80", "unix:/run/app.sock" */
    uint32_t weight, max_fails, max_conns;   /* max_conns 0: no limit */
    double fail_timeout;
    bool backup;
};
enum upstream_balance { BALANCE_ROUND_ROBIN, BALANCE_LEAST_CONN };
struct proxy_conf {
    bool on;                       /* proxy_pass is set */
    char group[64];                /* the upstream group proxy_pass names, "" for one address */
    char uri[256];                 /* the path proxy_pass gives, replacing location's, or "" */
    char location[256];            /* proxy_location: the path prefix that is proxied */
    char host[256];                /* proxy_set_host: Host sent upstream; "" passes the client's */
    char pass_from[160];           /* where proxy_pass was set, for errors */
    char upstream_name[64];        /* the group the upstream lines define */
    struct upstream_server_conf direct;   /* proxy_pass's own address, if it gives one */
    struct upstream_server_conf servers[MAX_UPSTREAM_SERVERS];   /* what requests go to */
    int nservers;
    int balance;                   /* enum upstream_balance */
    uint32_t keepalive;            /* idle connections kept per server and worker */
    uint32_t next_upstream_tries;  /* 0: as many as there are servers */
    double keepalive_timeout, connect_timeout, read_timeout, send_timeout;
};

struct config {
    struct listen_addr listen[MAX_LISTEN];
    int nlisten;
    int workers;
    char root[1024];
    char cert[1024], key[1024];
    bool parking;
    bool builtin_routes;
    /* Who the built-in routes but /-/healthz answer (builtin_routes_allow); 0: nobody. */
    struct cidr builtin_allow[MAX_ALLOW];
    int nbuiltin_allow;
    bool server_header;            /* send Server: h2park */
    char access_log[1024];
    int access_log_format;         /* enum access_log_format */
    int log_level;
    double preface_timeout, idle_timeout, write_timeout, body_timeout, shutdown_timeout, scavenge_interval;
    long max_conns;
    long max_handlers;             /* per worker; 0 = auto (config_max_handlers) */
    uint32_t max_concurrent_streams;
    uint32_t max_header_list_size;
    uint32_t initial_window_size;
    uint32_t connection_window_size;
    uint32_t max_resets_per_second;
    uint32_t hpack_encoder_table_size;
    size_t coro_stack_size;
    bool coro_guard_pages;
    bool coro_paint;
    const char *parking_source;   /* which setting decided parking, for the log */
    char user[64];                /* drop to this user after binding; "" = stay */
    char root_from[160];          /* where root was set: "site.conf:3", "command line", ... */
    struct proxy_conf proxy;
};

extern __thread struct config cfg;
extern const char default_conf_text[];
extern const unsigned default_conf_size;
/* config_parse's name for the embedded default; settings from it are "built-in default". */
#define CONFIG_BUILTIN "built-in default"

enum { CONFIG_OK = 0, CONFIG_ERROR = 2 };
enum access_log_format { ACCESS_LOG_COMBINED, ACCESS_LOG_JSON };
void config_defaults(struct config *c);
/* Parses text as a config file named name; on error writes "name:line: problem" into err. */
int config_parse(struct config *c, const char *text, size_t len, const char *name, char *err, size_t errlen);
int config_load_file(struct config *c, const char *path, char *err, size_t errlen);
int config_set(struct config *c, const char *key, const char *value, char *err, size_t errlen);
/* H2PARK_DEBUG in GODEBUG syntax; unknown keys are reported through warn. */
int config_apply_debug_env(struct config *c, const char *env, void (*warn)(const char *key), char *err, size_t errlen);
/* Is sa (an IPv4-mapped IPv6 address counting as its IPv4 one) in one of the n networks? */
bool cidr_match(const struct cidr *list, int n, const struct sockaddr *sa);
/* max_conns, with auto resolved against the open-file limit. */
long config_max_conns(const struct config *c);
/* max_handlers, with auto resolved against the machine's memory. */
long config_max_handlers(const struct config *c);
/* "10s", "250ms", "5m", "1h" or plain seconds; a decimal count up to max: 0, or -1. */
int config_parse_duration(const char *v, double *out);
int config_parse_uint(const char *v, unsigned long long max, unsigned long long *out);
/* proxy_conf.c: a proxy_* or upstream* key (1: not one of them); and the check, once every
 * setting is in, that proxy_pass names servers. */
int proxy_config_set(struct proxy_conf *p, const char *key, const char *value, char *err, size_t errlen);
void proxy_config_defaults(struct proxy_conf *p);
int proxy_config_check(struct proxy_conf *p, char *err, size_t errlen);
/* What one handler coroutine can pin at most with these settings, in bytes. */
size_t config_handler_worst_bytes(const struct config *c);

#endif
