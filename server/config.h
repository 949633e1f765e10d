/* The daemon's configuration (config.c): one immutable tree per generation, built from
 * the embedded default, a config file, H2PARK_DEBUG and the command line, in that order.
 *
 * The tree: global settings; the listen addresses, each with its table of sites; sites,
 * each with its names, certificates and locations; locations, each with the settings a
 * request under it is served by, already merged from the top level, the site and the
 * location itself (struct location holds the answer, never a pointer to "inherit").
 *
 * Ownership: the main thread builds and checks a tree, opens what it needs (sockets,
 * TLS contexts, roots: config_on_free says how each is closed), and publishes it
 * (core/worker.c).  From then on it is read-only and shared: each worker holds a
 * reference to the one it runs, each request to the one it began under (through its
 * worker's per-generation count, worker_hold_config), and the last to let go frees it -
 * so a reload swaps the whole tree at once and requests in flight finish on theirs.
 * No thread-local or global copy exists: code reads the worker's (w->cfg) or the
 * request's (req_location, req_config) tree. */
#ifndef H2PARK_CONFIG_H
#define H2PARK_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "host.h"

#define H2PARK_VERSION "0.2.0"
#define MAX_LISTEN 16
#define OPEN_FILE_SLOTS 256           /* each worker's open-file cache (app/static.c) */
#define REQUEST_OUTPUT_MAX (64u << 10) /* response bytes a handler may get ahead by (request.c) */
/* ... or, writing a large body, while its worker's budget lasts (request.c: wide output) */
#define REQUEST_OUTPUT_WIDE (256u << 10)
#define REQUEST_OUTPUT_WIDE_BUDGET (64u << 20) /* per worker: all wide outputs' excess together */

struct listen_addr {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bool tls;
    bool proxy_protocol;           /* a PROXY protocol header (v1 or v2) comes first */
    bool dual;                     /* "*:PORT": one IPv6 socket that takes IPv4 too */
    /* max_conns_per_client of the sites on it (0: none), and the first of them. */
    uint32_t max_conns_per_client;
    const char *max_conns_per_client_from;
    const char *max_conns_per_client_refused;   /* the access log's refused_by for a request over it */
    char text[64];
    const char *from;              /* "site.conf:3", "command line", ... */
};

/* An address block: IPv4 is kept as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one
 * comparison serves both families and a dual-stack socket's peers match IPv4 rules. */
struct net {
    uint8_t addr[16];
    uint8_t bits;
};
struct access_rule {
    struct net net;
    bool allow;
};

struct added_header {
    const char *name, *value;      /* name in lower case */
    uint32_t name_len, value_len;
    bool always;                   /* on every response, not only 2xx and 3xx (nginx's "always") */
};

struct error_page {
    uint16_t status;
    const char *uri;
};

/* A return: a status, and a URL (3xx: Location) or a body, with $variables. */
struct return_spec {
    uint16_t status;
    bool is_url;
    const char *text;              /* NULL: status only */
};

/* A directory files are served from, opened once per configuration (app/static.c). */
struct docroot {
    const char *path;              /* absolute once opened; NULL: no root (a file's site that
                                      names none), every file 404 */
    const char *from;              /* where it was set */
    const char *const *index;      /* the files a directory is answered with, in order */
    uint8_t nindex;
    bool builtin_default;          /* the embedded default's root: missing, / is the built-in page */
    int fd;                        /* -1: not there (builtin_default only) or not opened yet */
    uint64_t id;                   /* unique in the process: the open-file cache's key */
};

/* What answers a location's requests: one choice, so a new kind (a reverse proxy) is a
 * new value here and a case in app/routes.c, not a special case anywhere else. */
enum handler_kind { HANDLER_STATIC, HANDLER_RETURN, HANDLER_BUILTIN, HANDLER_PROXY };
enum dotfiles_policy { DOTFILES_DENY, DOTFILES_ALLOW };

/* The reverse proxy's settings (proxy_conf.c, config.c), as nginx names them.  Upstream
 * groups are top-level sections ("upstream NAME { server = ADDR ... }"); a location's
 * proxy_pass names one, or gives one address, which is then a group of its own.  Every
 * server of every group is in one array (config->upstream_servers), so a worker keeps
 * one state per server (upstream/upstream.c) and a pool per server. */
#define MAX_UPSTREAM_SERVERS 16        /* in one group (a request's tried servers are a bit mask) */
#define MAX_UPSTREAM_TOTAL 64          /* in one configuration */
struct upstream_server_conf {
    struct sockaddr_storage addr;  /* AF_INET, AF_INET6 or AF_UNIX */
    socklen_t addrlen;
    char text[112];                /* "127.0.0.1:8081", "[::1]:80", "unix:/run/app.sock" */
    uint32_t weight, max_fails, max_conns;   /* max_conns 0: no limit */
    double fail_timeout;
    bool backup;
    uint16_t index;                /* in config->upstream_servers */
    /* The group's pool settings, copied to each of its servers. */
    uint32_t keepalive;            /* idle connections kept per server and worker */
    double keepalive_timeout;
    const char *group;             /* the group's name; "" for a location's own address */
    bool tls;                      /* reached by proxy_pass https:// */
};
enum upstream_balance { BALANCE_ROUND_ROBIN, BALANCE_LEAST_CONN };
/* health_check in an upstream section: each server probed every interval, out after fails
 * failures in a row, back after passes passes (upstream/health.c). */
struct health_check {
    const char *path;              /* GET this over HTTP/1.1, 2xx or 3xx passes; NULL: connect (and TLS) only */
    const char *host;              /* the Host sent; NULL: the server's address */
    double interval, timeout;
    uint32_t fails, passes;
    const char *from;
};
struct upstream_group {
    const char *name;              /* "" for a location's own address */
    const struct upstream_server_conf *servers;   /* nservers of config->upstream_servers */
    uint16_t nservers;
    uint8_t balance;               /* enum upstream_balance */
    const char *from;
    uint8_t scheme;                /* 0 not yet passed to, 1 cleartext, 2 TLS */
    const char *scheme_name;       /* the scheme as the proxy_pass that chose it wrote it ("https://") */
    const char *scheme_from;       /* ... and where */
    const struct health_check *check;   /* or NULL */
    const struct upstream_tls *check_tls;   /* over TLS: the settings checks use (the first proxy_pass's) */
};
/* proxy_pass https:// or h2://: how the upstream's certificate is checked and what name is sent,
 * nginx's proxy_ssl_* keys.  One per distinct set of settings (shared by the locations
 * that have the same); its SSL_CTX is made with the configuration's other TLS contexts
 * (upstream/tls.c, upstream_tls_prepare) and freed with the configuration. */
struct upstream_tls {
    const char *trusted, *trusted_from;            /* proxy_ssl_trusted_certificate; NULL: the system's CAs */
    const char *cert, *cert_from, *key, *key_from; /* proxy_ssl_certificate(_key); NULL: none */
    const char *name;              /* proxy_ssl_name (default proxy_pass's host): verified, sent as SNI */
    bool verify, server_name;      /* proxy_ssl_verify, proxy_ssl_server_name: both on by default */
    bool h2;                       /* ALPN offers h2 only (proxy_pass h2://), else http/1.1 only */
    bool session_reuse;            /* proxy_ssl_session_reuse (on): resume TLS sessions */
    void *ctx;                     /* SSL_CTX */
    struct upstream_tls *next;     /* config->upstream_tls */
};
struct proxy_conf {
    const struct upstream_group *group;
    const char *uri;               /* the path proxy_pass gives, replacing the location's, or "" */
    const char *host;              /* proxy_set_host: the Host sent upstream; "" passes the client's */
    double connect_timeout, read_timeout, send_timeout;
    uint32_t next_upstream_tries;  /* 0: as many as there are servers */
    const char *from;              /* where proxy_pass was set */
    const struct upstream_tls *tls;    /* proxy_pass https:// or h2://; NULL: cleartext */
    bool h2;                       /* HTTP/2 (gRPC): h2c:// with prior knowledge, h2:// over TLS by ALPN */
};

/* limit_req: nginx's leaky bucket for each client (app/limits.c, clienttable.c).  One per
 * configuration line, shared by the locations that inherit it; its id names its buckets
 * in the client table, drawn from where it is and what it says, so that a reload that
 * leaves a rule as it was keeps its clients' buckets. */
enum limit_key { LIMIT_KEY_REALIP, LIMIT_KEY_ADDR, LIMIT_KEY_HOST };
struct limit_req_rule {
    uint32_t rate;                 /* thousandths of a request a second */
    uint32_t burst, delay;         /* thousandths of a request; delay UINT32_MAX: nodelay */
    uint8_t key;                   /* enum limit_key */
    uint16_t id;                   /* not 0 (0 is the connection count's) */
    const char *from;              /* "site.conf:12" */
    const char *refused_by;        /* "limit_req = 10r/s burst=5 (site.conf:12)": the access log's */
    _Atomic uint64_t refused, delayed;   /* since this configuration was loaded */
};

struct route;                      /* app/app.h: a built-in route */
struct site;
struct location;

/* auth_basic_user_file: one per distinct path, loaded (app/htpasswd.c) when the
 * configuration is applied, so a reload reads it again. */
struct htpasswd;
struct auth_file {
    const char *path, *from;
    struct htpasswd *users;        /* set as the configuration is applied; freed with it */
    struct auth_file *next;        /* config->auth_files */
};
/* A location's authentication (app/auth_basic.c, app/auth_request.c): both must pass when
 * both are set (nginx's satisfy all), auth_basic first. */
struct auth_conf {
    const char *challenge;         /* auth_basic's WWW-Authenticate (Basic realm="..."), or NULL: off */
    const char *basic_from;
    const struct auth_file *file;
    const char *request_uri;       /* auth_request's URI, or NULL: off */
    const char *request_from;
    const struct location *request;    /* ... the location of this site it names (its proxy_pass) */
    const char *const *copy;       /* auth_request_copy_headers: response fields into the request, lower case */
    uint8_t ncopy;
    bool internal;                 /* named by an auth_request: a client asking for it gets 404 */
};

/* Compression on the fly in a location (compress_conf.c): the codings in the server's
 * order (enum coding's values, runtime/acceptenc.h), each one's level, the types compressed
 * ("text/" and a star: a whole top type; lower case, no parameters) and the least known length. */
#define COMPRESS_CODINGS_MAX 3
struct compress_conf {
    uint8_t codings[COMPRESS_CODINGS_MAX];
    uint8_t ncodings;
    int8_t level[COMPRESS_CODINGS_MAX + 1];   /* by enum coding */
    uint64_t min_length;
    const char *const *types;
    uint16_t ntypes;
    uint64_t memory;               /* compress_memory: a worker's compressors' state at most */
};

struct location {
    const char *path;              /* as matched: the request's decoded path */
    uint32_t path_len;
    bool exact;                    /* "location = /path": that path only */
    bool implicit;                 /* a built-in route the configuration did not place */
    uint8_t handler;               /* enum handler_kind */
    const struct route *route;     /* HANDLER_BUILTIN */
    const struct return_spec *ret; /* HANDLER_RETURN */
    const struct docroot *docroot; /* HANDLER_STATIC, and error pages and the fallback */
    const struct proxy_conf *proxy;    /* HANDLER_PROXY */
    bool alias;                    /* the location's path is cut before looking under docroot */
    const char *alias_file;        /* an exact location aliased to one file: that file's name */
    uint8_t dotfiles;              /* enum dotfiles_policy */
    bool listing;                  /* a directory without an index file is listed */
    const char *fallback;          /* a path under docroot for what is not there (SPA), or NULL */
    uint64_t max_body;             /* request body bytes; 0: no limit */
    uint64_t limit_rate;           /* a response body's bytes per second; 0: no limit */
    uint64_t limit_rate_after;     /* ... after this many at full speed */
    const struct added_header *headers;
    uint16_t nheaders;
    const struct access_rule *access;   /* first match decides; none matching: allowed */
    uint16_t naccess;
    const struct error_page *errors;
    uint16_t nerrors;
    const struct auth_conf *auth;  /* NULL: no authentication (the path every other request takes) */
    /* Per-client limits: limit_req's rules, and whether any limit may apply here (a rule,
     * or a per-client connection limit on a listener of the site behind real_ip_from:
     * counted by request) - one test for a location without them. */
    const struct limit_req_rule *const *limit_req;
    uint8_t nlimit_req;
    bool limits;
    uint16_t limit_status;         /* what a limited request is answered */
    const struct compress_conf *compress;   /* compression on the fly; NULL: off */
    const struct site *site;
    const char *from;
};

struct site {
    const char *const *names;      /* lower case; "*.example.com" for a wildcard */
    uint16_t nnames;
    bool catch_all;                /* named "*" (or the only site): the default of its listeners */
    const char *name;              /* its first plain name, for $host when a request has none */
    struct location *locations;
    uint32_t nlocations;
    struct location **exact;       /* hash of the exact locations, by path */
    uint32_t exact_mask;
    uint64_t exact_sieve;          /* bit location_sieve_bit(path) of every exact location's path */
    struct location **prefixes;    /* the prefix locations, longest first */
    uint32_t nprefixes;
    uint32_t listen_mask;          /* bit i: serves on config->listen[i] */
    int tls;                       /* index in config->tls, or -1 */
    bool https_redirect;           /* cleartext requests get 308 to https:// */
    uint16_t https_port;
    const char *from;
};

struct site_name {
    const char *name;
    uint32_t len;
    const struct site *site;
};

/* The sites of one listen address: a name hash, and its default. */
struct site_table {
    const struct site *dflt;
    uint32_t nsites;
    struct site_name *names;       /* open addressing, mask + 1 slots */
    uint32_t mask;
};

struct named_path {
    const char *path, *from;       /* from: "file:line" of the key that named it */
};

struct tls_pair {
    const char *cert, *key;
    const char *cert_from, *key_from;
};
/* One set of certificates (several sites may share it); ctx is the SSL_CTX made for it
 * when the configuration is applied (core/tls.c). */
struct tls_identity {
    const struct tls_pair *pairs;  /* none: the self-signed certificate */
    uint8_t npairs;
    void *ctx;
};

enum real_ip_header { REAL_IP_X_FORWARDED_FOR, REAL_IP_FORWARDED, REAL_IP_X_REAL_IP };
enum access_log_format { ACCESS_LOG_COMBINED, ACCESS_LOG_JSON };

struct config_parse;               /* config.c: what parsing keeps until config_finish */
struct ticket_keys;
struct client_table;
struct config_cleanup;

struct config {
    _Atomic long refs;
    /* Global settings. */
    long workers;                  /* 0 = auto */
    bool parking;
    bool builtin_routes;
    /* Who the built-in routes but /-/healthz answer where the configuration did not place
     * them (builtin_routes_allow): allow rules. */
    const struct access_rule *builtin_allow;
    uint16_t nbuiltin_allow;
    bool server_header;            /* send Server: h2park */
    const char *access_log;        /* "" = none */
    const char *access_log_from;   /* where it was set */
    int access_log_format;         /* enum access_log_format */
    int log_level;
    double preface_timeout, handshake_timeout, idle_timeout, write_timeout, body_timeout, shutdown_timeout, scavenge_interval;
    long max_conns;                /* 0 = auto (config_max_conns) */
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
    bool park_handlers_at_once;    /* H2PARK_DEBUG=parkhandlersatonce=1: every wait parks (tests) */
    const char *parking_source;    /* which setting decided parking, for the log */
    char user[64];                 /* drop to this user after binding; "" = stay */
    /* Clients' addresses: believed from these proxies' headers (realip.c). */
    const struct access_rule *real_ip_from;
    uint16_t nreal_ip_from;
    uint8_t real_ip_header;        /* enum real_ip_header */
    /* The per-client table (clienttable.c): its size and the address prefixes it keys
     * by (both take a restart), every limit_req rule, and the table itself - the
     * process's, which main.c gives every configuration once one has asked for a limit. */
    /* TLS session tickets (core/tickets.c): on, their lifetime, the key files and the keys
     * read from them when the configuration is prepared (NULL: the process's own keys). */
    bool ssl_session_tickets;
    double ssl_session_timeout;
    const struct named_path *ticket_key_files;
    uint32_t nticket_key_files;
    const struct ticket_keys *ticket_keys;
    unsigned long long limit_zone_size;
    uint32_t limit_prefix_v4, limit_prefix_v6;
    const struct limit_req_rule *const *limit_rules;
    uint32_t nlimit_rules;
    struct client_table *clients;

    /* The tree, from config_finish. */
    struct listen_addr listen[MAX_LISTEN];
    int nlisten;
    struct site_table listen_sites[MAX_LISTEN];
    struct site_table all_sites;   /* for a connection whose listener went away */
    int8_t listen_of_slot[MAX_LISTEN];   /* listener slot -> listen index, -1 (set when applied) */
    void *listen_ctx[MAX_LISTEN];  /* SSL_CTX a TLS listener's handshakes start with (core/tls.c) */
    struct site *sites;
    uint32_t nsites;
    struct tls_identity *tls;
    uint32_t ntls;
    struct docroot **docroots;
    uint32_t ndocroots;
    struct upstream_server_conf *upstream_servers;
    uint32_t nupstream_servers;
    struct upstream_group *upstreams;  /* the named groups, then the locations' own addresses */
    uint32_t nupstreams;
    struct upstream_tls *upstream_tls; /* every proxy_pass https://'s and h2://'s settings */
    struct auth_file *auth_files;  /* every auth_basic_user_file */

    struct config_parse *parse;    /* until config_finish */
    struct config_cleanup *cleanup;
    struct config_arena *arena;
};

extern const char default_conf_text[];
extern const unsigned default_conf_size;
/* config_parse's name for the embedded default; settings from it are "built-in default". */
#define CONFIG_BUILTIN "built-in default"

enum { CONFIG_OK = 0, CONFIG_ERROR = 2 };

/* Every error found, one "where: problem" line each; the caller prints them all. */
#define CONFIG_ERRORS_MAX 100
struct config_errors {
    int count;
    size_t len;
    char text[16384];
};
void config_error(struct config_errors *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The keys the file format takes, one table (config.c's, with the keys of the modules that
 * add theirs: config_tree.h), and where each may appear. */
enum { KEY_TOP = 1, KEY_SITE = 2, KEY_LOCATION = 4, KEY_UPSTREAM = 8 };
struct config_key {
    const char *name;
    uint8_t scopes;                /* KEY_* */
    bool repeats;                  /* may be given more than once in one scope */
    bool section;                  /* "site NAMES {", "location [=] PATH {", "upstream NAME {" */
};
extern struct config_key config_keys[];
extern const size_t config_nkeys;

/* The built-in routes (app/routes.c tells them, before any parsing): placed by name with
 * "handler = NAME", and unless builtin_routes = off, at path in every site that does not
 * place something else there. */
struct config_route {
    const char *name, *path;
    const struct route *route;
};
void config_use_routes(const struct config_route *routes, size_t n);

/* A configuration with the defaults, one reference, ready to parse into. */
struct config *config_new(void);
void config_ref(struct config *c);
void config_unref(struct config *c);
/* Called when the configuration is freed (closes what applying it opened). */
int config_on_free(struct config *c, void (*fn)(void *arg), void *arg);

/* Parses text as a config file named name; every problem goes into e as
 * "name:line: problem".  CONFIG_ERROR if there was any. */
int config_parse(struct config *c, const char *text, size_t len, const char *name, struct config_errors *e);
int config_load_file(struct config *c, const char *path, struct config_errors *e);
/* A top-level key from the command line (a flag).  listen replaces every listen line
 * of the configuration, the sites' included, the first time. */
int config_set(struct config *c, const char *key, const char *value, struct config_errors *e);
/* H2PARK_DEBUG in GODEBUG syntax; unknown keys are reported through warn. */
int config_apply_debug_env(struct config *c, const char *env, void (*warn)(const char *key), struct config_errors *e);
/* After every source: builds the tree (sites, locations, listen tables) and checks what
 * can be checked without opening anything. */
int config_finish(struct config *c, struct config_errors *e);

/* Values as config.c reads them: "10s", "250ms", "5m", "1h" or plain seconds, at most
 * DURATION_MAX; a decimal count up to max.  0, or -1. */
#define DURATION_MAX (86400.0 * 30)
#define SIZE_MAX_BYTES (UINT64_C(1) << 50)   /* a size's largest value: 1048576g */
int config_parse_duration(const char *v, double *out);
int config_parse_uint(const char *v, unsigned long long max, unsigned long long *out);
/* proxy_conf.c: proxy_pass's value (an address: *direct filled; a group: *group named)
 * and an upstream section's server line.  0, or -1 with why. */
int proxy_parse_pass(const char *value, bool *tls, char *host, size_t host_cap, char *group, size_t group_cap,
                     struct upstream_server_conf *direct, char *uri, size_t uri_cap, bool *h2, char *why,
                     size_t whylen);
int upstream_parse_server(const char *value, struct upstream_server_conf *s, char *why, size_t whylen);
int upstream_parse_health_check(const char *value, struct health_check *h, char *path, char *host, size_t cap,
                                char *why, size_t whylen);
void upstream_server_defaults(struct upstream_server_conf *s);
/* A host (and port) a Host field may carry: proxy_set_host, health_check's host=. */
bool upstream_host_ok(const char *host);

/* Whether c asks for any per-client limit (so needs the client table). */
bool config_has_limits(const struct config *c);
/* The per-client connection limit of listener slot (0: none). */
static inline uint32_t config_conns_per_client(const struct config *c, unsigned slot)
{
    return slot < MAX_LISTEN && c->listen_of_slot[slot] >= 0 ? c->listen[c->listen_of_slot[slot]].max_conns_per_client : 0;
}

/* max_conns, with auto resolved against the open-file limit. */
long config_max_conns(const struct config *c);
/* max_handlers, with auto resolved against the machine's memory. */
long config_max_handlers(const struct config *c);
/* What one handler coroutine can pin at most with these settings, in bytes. */
size_t config_handler_worst_bytes(const struct config *c);

/* sites.c: finding a request's site and location. */
const struct site *site_for_host(const struct site_table *t, const char *host, size_t len);
/* The site a TLS client's server name (SNI) chooses: the default for none or no host name. */
const struct site *site_for_sni(const struct site_table *t, const char *name);
/* A path's bit in a site's exact_sieve: by its length and second byte, so that most
 * requests (a file's path, beside a site's built-in "/-/..." and "/metrics") skip the
 * exact hash without hashing. */
static inline unsigned location_sieve_bit(const char *path, size_t len)
{
    return (unsigned)(len * 31 + (len > 1 ? (unsigned char)path[1] : 0)) & 63;
}
/* The location for a decoded path (it starts with a slash): exact first, then the
 * longest prefix; skip_implicit leaves out the built-in routes the configuration did not
 * place. */
const struct location *location_lookup(const struct site *s, const char *path, size_t len, bool skip_implicit);
/* ... answered here for most requests: no exact location shares the path's sieve bit,
 * and "/" (which every site has, the shortest) is the only prefix. */
static inline const struct location *location_for_path(const struct site *s, const char *path, size_t len,
                                                        bool skip_implicit)
{
    if (s->nprefixes == 1 && !(s->exact_sieve & (UINT64_C(1) << location_sieve_bit(path, len))))
        return s->prefixes[0];
    return location_lookup(s, path, len, skip_implicit);
}
/* The sites of the listener in slot (every site of the tree for a listener that went
 * away: its connections are being drained). */
static inline const struct site_table *config_sites_of(const struct config *c, unsigned slot)
{
    if (slot < MAX_LISTEN && c->listen_of_slot[slot] >= 0)
        return &c->listen_sites[c->listen_of_slot[slot]];
    return &c->all_sites;
}
/* netaddr.c: addresses and blocks. */
int net_parse(const char *text, struct net *out, char *why, size_t whylen);
/* A socket address as a 16-byte IPv6 address (IPv4 mapped); false for another family. */
bool net_address(const struct sockaddr *sa, uint8_t out[16]);
bool net_contains(const struct net *n, const uint8_t addr[16]);
/* Whether sa is in c's real_ip_from: a proxy whose header names its clients. */
bool net_trusted_proxy(const struct config *c, const struct sockaddr *sa);
/* First rule that contains addr decides; none: allowed. */
bool access_allows(const struct access_rule *rules, size_t n, const uint8_t addr[16]);

#endif
