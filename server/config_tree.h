/* The parse tree, for the files that own keys of the format (config.c, proxy_conf.c,
 * sites.c): the scopes parsing fills - one per top level, site, location and upstream
 * section - what a setter is given, what a location's settings become when the scopes
 * above it are merged, and how a module adds its keys and its part of the tree.
 *
 * config.c is the format and the tree: it reads lines into scopes, calls each key's
 * setter, merges scopes into locations and builds sites.  A module - the reverse proxy
 * (proxy_conf.c), the sites' links (sites.c) - has its keys' setters, its part of the
 * merge and of the tree in its own file, as nginx's modules have their command tables
 * and merge functions, and hands them to config.c with config_add_module (from a
 * constructor, so every program linking the module has its keys, before any parsing):
 * config.c names no module, and a module calls config.c, never the other way.
 *
 * Every key, a module's too, has its number in enum key_id: the format's numbering,
 * which the error for a key given twice and the merge by origin need (s->at[k]).
 * Private to the configuration: nothing outside these files includes it. */
#ifndef H2PARK_CONFIG_TREE_H
#define H2PARK_CONFIG_TREE_H

#include <string.h>

#include "config.h"

/* A growable array in the arena (what it outgrows stays there: configurations are small). */
struct vec {
    void *v;
    uint32_t n, cap;
};
void *config_push(struct config *c, struct vec *v, size_t size);
/* In the configuration's arena (zeroed), freed with it. */
void *config_alloc(struct config *c, size_t n);
char *config_strdup(struct config *c, const char *s);

/* What compress_conf.c's keys set, in a scope and merged. */
struct compress_keys {
    uint8_t codings[COMPRESS_CODINGS_MAX];   /* enum coding, the server's order */
    uint8_t ncodings;
    uint8_t level[COMPRESS_CODINGS_MAX + 1]; /* by enum coding */
    uint64_t min_length;
    const char *const *types;
    uint16_t ntypes;
    uint64_t memory;                         /* compress_memory (top level only) */
};

/* ---- what parsing keeps: one scope per top level, site and location ---- */

enum scope_kind { SCOPE_TOP, SCOPE_SITE, SCOPE_LOCATION, SCOPE_UPSTREAM };

struct origin {
    uint16_t src;                  /* 0: never set */
    uint32_t line;
};

enum key_id {
    K_LISTEN, K_WORKERS, K_USER, K_PARKING, K_BUILTIN_ROUTES, K_SERVER_HEADER, K_ACCESS_LOG, K_ACCESS_LOG_FORMAT,
    K_LOG_LEVEL, K_PREFACE_TIMEOUT, K_IDLE_TIMEOUT, K_WRITE_TIMEOUT, K_BODY_TIMEOUT, K_SHUTDOWN_TIMEOUT,
    K_SCAVENGE_INTERVAL, K_MAX_CONNS, K_MAX_HANDLERS, K_MAX_CONCURRENT_STREAMS, K_MAX_HEADER_LIST_SIZE,
    K_INITIAL_WINDOW_SIZE, K_CONNECTION_WINDOW_SIZE, K_MAX_RESETS_PER_SECOND, K_HPACK_ENCODER_TABLE_SIZE,
    K_CORO_STACK_SIZE, K_CORO_GUARD_PAGES, K_REAL_IP_FROM, K_REAL_IP_HEADER, K_BUILTIN_ROUTES_ALLOW,
    K_SITE, K_LOCATION, K_CERT, K_KEY, K_HTTPS_REDIRECT,
    K_ROOT, K_ALIAS, K_INDEX, K_HEADER, K_ALLOW, K_DENY, K_MAX_BODY_SIZE, K_ERROR_PAGE, K_DOTFILES,
    K_DIRECTORY_LISTING, K_FALLBACK, K_RETURN, K_HANDLER,
    K_LIMIT_RATE, K_LIMIT_RATE_AFTER,
    K_PROXY_PASS, K_PROXY_CONNECT_TIMEOUT, K_PROXY_READ_TIMEOUT, K_PROXY_SEND_TIMEOUT, K_PROXY_NEXT_UPSTREAM_TRIES,
    K_PROXY_SET_HOST, K_UPSTREAM, K_SERVER, K_BALANCE, K_KEEPALIVE, K_KEEPALIVE_TIMEOUT, K_HEALTH_CHECK,
    K_PROXY_SSL_VERIFY, K_PROXY_SSL_TRUSTED_CERTIFICATE, K_PROXY_SSL_NAME, K_PROXY_SSL_SERVER_NAME,
    K_PROXY_SSL_SESSION_REUSE,
    K_PROXY_SSL_CERTIFICATE, K_PROXY_SSL_CERTIFICATE_KEY,
    K_AUTH_BASIC, K_AUTH_BASIC_USER_FILE, K_AUTH_REQUEST, K_AUTH_REQUEST_COPY_HEADERS,
    K_MAX_CONNS_PER_CLIENT, K_LIMIT_REQ, K_LIMIT_STATUS, K_LIMIT_ZONE_SIZE, K_LIMIT_PREFIX_V4, K_LIMIT_PREFIX_V6,
    K_HANDSHAKE_TIMEOUT, K_SSL_SESSION_TICKETS, K_SSL_SESSION_TICKET_KEY, K_SSL_SESSION_TIMEOUT,
    K_COMPRESS, K_COMPRESS_TYPES, K_COMPRESS_MIN_LENGTH, K_COMPRESS_LEVEL_GZIP, K_COMPRESS_LEVEL_BR, K_COMPRESS_LEVEL_ZSTD,
    K_COMPRESS_MEMORY,
    K_COUNT
};


struct scope {
    uint8_t kind;                  /* enum scope_kind */
    struct scope *next;            /* the next site, or the next location of its parent */
    const struct scope *parent;    /* a location's site or top level; NULL for the top level */
    struct scope *sites, *locations;
    struct scope **sites_tail, **locations_tail;
    const char *from;
    struct origin at[K_COUNT];     /* where each key was last set in this scope */
    /* A site's names, a location's path. */
    struct vec names;              /* const char * */
    const char *path;
    bool exact;
    /* How the site is reached. */
    struct vec listens;            /* struct listen_addr */
    struct vec certs, keys;        /* struct named_path */
    bool https_redirect;
    /* How requests are served: the keys of the K_ROOT.. group. */
    const char *root, *root_from;
    bool alias;
    struct vec index;              /* const char * */
    struct vec headers;            /* struct added_header */
    struct vec access;             /* struct access_rule: allow and deny, in order */
    uint64_t max_body;
    uint64_t limit_rate, limit_rate_after;   /* bytes per second (0: none), bytes at full speed */
    struct vec errors;             /* struct error_page */
    uint8_t dotfiles;
    bool listing;
    const char *fallback;
    struct return_spec *ret;
    bool builtin_handler;          /* handler = a built-in route (else static) */
    const struct route *route;
    /* The reverse proxy: proxy_pass (a group's name, or its own address), and the
     * proxy_* settings a location inherits. */
    const char *pass_group;        /* "" for an address */
    struct upstream_server_conf *pass_direct;
    const char *pass_uri, *pass_from;
    const char *pass_host;         /* proxy_pass's host as written: proxy_ssl_name's default */
    bool pass_tls;                 /* https:// */
    bool pass_reported;            /* its error is said (config_finish) */
    struct upstream_tls ssl;       /* the proxy_ssl_* keys given here (name NULL: proxy_pass's host) */
    bool pass_h2;                  /* h2c:// (prior knowledge) or h2:// (TLS, ALPN): HTTP/2 */
    double proxy_timeouts[3];      /* connect, read, send */
    uint32_t proxy_tries;
    const char *proxy_host;
    /* An upstream section: its name, servers and pool. */
    struct vec servers;            /* struct upstream_server_conf */
    uint8_t balance;
    uint32_t keepalive;
    double keepalive_timeout;
    struct health_check *health;
    struct scope *upstreams, **upstreams_tail;   /* the top level's upstream sections */
    /* Authentication: auth_basic (its challenge; NULL: off), its file, auth_request (NULL:
     * off) and the fields it copies. */
    const char *auth_challenge, *auth_basic_from;
    const char *auth_file, *auth_file_from;
    const char *auth_request, *auth_request_from;
    struct vec auth_copy;          /* const char *, lower case */
    bool auth_reported;            /* its error is said (config_finish) */
    /* Per-client limits. */
    uint32_t conns_per_client;
    const char *conns_per_client_from;
    struct vec limit_req;          /* struct limit_req_rule * */
    uint16_t limit_status;
    /* Compression on the fly (compress_conf.c): the codings in the server's order (none:
     * off), the types, the least length, each coding's level. */
    struct compress_keys compress;
};

struct config_parse {
    struct scope top;
    uint16_t src;                  /* the source being read (1, 2, ...) */
    const char *src_name;
    uint32_t line;
    bool builtin;                  /* the source is the embedded default */
    const char *dir;               /* the file being read's directory, absolute; NULL: the
                                      embedded default or the command line */
    bool cli_listen;               /* a --listen has replaced every listen line */
    struct vec real_ip;            /* struct access_rule, all allow */
    struct vec ticket_keys;        /* struct named_path: ssl_session_ticket_key */
    struct vec builtin_allow;      /* struct access_rule, all allow */
};

struct setter_args {
    struct config *c;
    struct scope *s;
    const char *value;
    const char *from;
    char *why;
    size_t whylen;
};
#define WHY(...) (snprintf(a->why, a->whylen, __VA_ARGS__), -1)

/* Bytes, nginx's way ("1048576", "512k", "10m", "1g"): 0, -1 for what is not a size, -2 for
 * one too large. */
int config_parse_size(const char *v, uint64_t *out);

/* Setters of the common kinds: on/off, and a path (relative to the file's directory). */
int config_set_flag(struct setter_args *a, bool *dst, const char *what);
int config_set_path(struct setter_args *a, const char **dst, const char *what);

/* Settings as a location ends up with them: the top level's, then its site's, then its own. */
struct merged {
    const char *root, *root_from;
    bool alias;
    struct vec index;
    struct vec headers;
    const struct access_rule *access;
    uint32_t naccess;
    uint64_t max_body;
    uint64_t limit_rate, limit_rate_after;
    struct vec errors;
    uint8_t dotfiles;
    bool listing;
    const char *fallback;
    const struct return_spec *ret;
    uint8_t handler;
    const struct route *route;
    const struct scope *pass;      /* the scope whose proxy_pass it is */
    double proxy_timeouts[3];
    uint32_t proxy_tries;
    const char *proxy_host;
    struct upstream_tls ssl;
    struct scope *auth_basic, *auth_request;   /* the scopes whose auth_basic, auth_request it is */
    const char *auth_file, *auth_file_from;
    struct vec auth_copy;
    struct vec limit_req;
    uint16_t limit_status;
    struct compress_keys compress;
};

static inline bool config_same_text(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* A module's part of the format (config_add_module).  Its keys: number, name, where each
 * may appear, whether it repeats, its setter and, for one that repeats, what forgets the
 * older sources' lines (a newer source's first line replaces them).  Its hooks, each
 * optional: the top level's defaults; its part of merging scope s into m (after the
 * format's own, top level first); its part of the tree before the sites are built (tree)
 * and for each location (location: after l->handler is set); and once every site is
 * built (finish). */
struct config_module_key {
    int id;                        /* enum key_id */
    const char *name;
    uint8_t scopes;                /* KEY_* */
    bool repeats;
    int (*set)(struct setter_args *a);
    void (*clear)(struct scope *s);
};
struct config_module {
    const struct config_module_key *keys;
    size_t nkeys;
    void (*top)(struct scope *top);
    void (*merge)(struct config *c, struct merged *m, const struct scope *s);
    void (*tree)(struct config *c, const struct scope *top, struct config_errors *e);
    void (*location)(struct config *c, struct location *l, const struct merged *m, struct config_errors *e);
    void (*finish)(struct config *c);
};
void config_add_module(const struct config_module *m);

#endif
