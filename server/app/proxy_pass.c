/* The reverse proxy (proxy_pass): a request handler that passes its request to an
 * upstream server and its response back, streaming both ways, through one exchange
 * interface (upstream/upstream.h) whatever the upstream speaks - HTTP/1.1
 * (upstream/h1client.c), or HTTP/2 for h2c:// and h2:// (upstream/h2client.c).  This
 * file holds the proxy's rules alone: which fields pass each way, the request's target
 * and authority, which server is tried and when another is, what a failure answers, and
 * which upgrades are passed on; the clients hold the protocols - framing, parsing, the
 * tunnel.
 *
 * Every wait is a request-API call (req_wait_io, req_read_body, req_write), so what a
 * waiting exchange holds is heap state - the exchange below, its upstream connection,
 * the request - and never a buffer on the handler's stack: the request head the proxy
 * makes lives on submit_request's frame and is gone once the client has it, and a long
 * poll waiting for its upstream holds no read buffer either (the client's, freed when
 * the handler parks).  Memory per exchange is the clients' to bound (h1client.c says
 * how); the response body goes to the request's output, which req_write bounds
 * (REQUEST_OUTPUT_MAX: the upstream is read no faster than the client takes it).
 *
 * RFC 9110 section 7.6, as an intermediary: hop-by-hop fields (Connection and the fields
 * it names, Keep-Alive, Proxy-Connection, TE, Transfer-Encoding, Upgrade) are not
 * forwarded either way; Via is added both ways; X-Forwarded-For and Forwarded get the
 * client's address appended, X-Forwarded-Proto and X-Forwarded-Host are set; Host is the
 * client's (or proxy_set_host); Expect: 100-continue is answered by the front end when
 * the body is first read (after the upstream is connected), not forwarded.  Cookie
 * fields are joined with "; " (RFC 9113 8.2.3: an HTTP/2 client's come apart); a body
 * without a length goes as the upstream's protocol frames one (chunked, or DATA to the
 * stream's end).  The response's Date and Server are this server's, as in nginx.
 *
 * WebSocket (RFC 6455), to an upstream whose client has a tunnel (HTTP/1.1's): a
 * client's Upgrade: websocket goes upstream as the upgrade it asks for, and the
 * upstream's 101 makes the exchange a tunnel (h1client.c: bytes both ways as they come,
 * an idle one holding no buffer), its silence bounded by proxy_read_timeout as in nginx;
 * the upstream connection is never pooled afterwards.  Over HTTP/2 (RFC 8441) the client's extended
 * CONNECT goes upstream as that handshake, a GET with a Sec-WebSocket-Key of the proxy's
 * own (an HTTP/2 client sends none), and the upstream's 101 must carry the key's
 * Sec-WebSocket-Accept (RFC 6455 4.1) before the client is told 200: a 2xx that did not
 * switch would tell it its tunnel is open, and is a 502.
 *
 * Failures map to nginx's statuses (502; 504 for timeouts; 503 when every server is at
 * max_conns), with the cause in the error log and the access log.  Another server is
 * tried only while nothing reached the client, and after any byte of the request went
 * upstream only for an idempotent request whose body was not read (it cannot be sent
 * twice). */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "app/app.h"
#include "config.h"
#include "log.h"
#include "scalloc.h"
#include "upstream/upstream.h"

#define FIELDS_MAX 128
#define STALE_RETRIES 3           /* pooled connections found closed, per request */
#define RESPONSE_FIELDS_SEEN 128  /* a response head's fields, passed on or not (more: 502) */

struct exchange {
    struct upstream_exchange ux;   /* the attempt in flight: its client, connection, response */
    const struct upstream_server_conf *sc;   /* the server of this attempt, or NULL */
    const char *upgrade;           /* the client's Upgrade, passed on (websocket), or NULL */
    char *target;                  /* the target with proxy_pass's path in place (heap), or NULL */
    char *ws_key;                  /* the handshake's key, when it is the proxy's own (HTTP/2; heap), or NULL */
    char *detail;                  /* a failed connect's or handshake's words (heap), or NULL */
    double started;
    bool reused, responded;
    bool client_h2;                /* the client speaks HTTP/2 (its Via is 2.0's) */
};

/* This process's mark in the Via it adds to a request, "1.1 h2park (" and 16 hex digits
 * of its own ")": a request that comes back carrying it went round a loop - proxy_pass
 * naming a listener of this daemon, or of a chain that leads back to it - and is
 * answered 508 at once (RFC 5842), as Varnish and h2o do, rather than passed round until
 * a head grows past its limit (1,100 hops, 2,250 sockets).  Random per process: two
 * h2park in a chain are not a loop. */
static char via_mark[20];          /* "(" 16 hex ")" */
static char via_request[2][40];    /* "1.1 h2park (...)", "2.0 h2park (...)" */
static size_t via_request_len;     /* (both's) */

void proxy_pass_init(void)
{
    /* getrandom, not RAND_bytes: OpenSSL's generator, set up at start, would cost a
     * daemon with no TLS 2 MiB of resident memory. */
    unsigned char id[8];
    if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id) {
        uint64_t t = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
        memcpy(id, &t, sizeof id);
    }
    size_t n = 0;
    via_mark[n++] = '(';
    for (size_t i = 0; i < sizeof id; i++)
        n += (size_t)snprintf(via_mark + n, sizeof via_mark - n, "%02x", id[i]);
    via_mark[n++] = ')';
    via_mark[n] = 0;
    snprintf(via_request[0], sizeof via_request[0], "1.1 h2park %s", via_mark);
    snprintf(via_request[1], sizeof via_request[1], "2.0 h2park %s", via_mark);
    via_request_len = strlen(via_request[0]);
}

/* What the proxy does with a field, by its name (lower case, nl bytes): found by length
 * and one comparison, since every field of every request and response is asked.  RFC 9110
 * 7.6.1's hop-by-hop fields (and HTTP2-Settings, h2c's own) are dropped both ways;
 * Connection is dropped too, and the fields its values name (add_connection). */
enum field_role {
    FR_PASS, FR_HOP, FR_CONNECTION, FR_UPGRADE,
    FR_HOST, FR_CONTENT_LENGTH, FR_EXPECT, FR_X_FORWARDED_PROTO, FR_X_FORWARDED_HOST, FR_WEBSOCKET_KEY,
    FR_COOKIE, FR_X_FORWARDED_FOR, FR_FORWARDED, FR_VIA,
    FR_DATE, FR_SERVER, FR_WEBSOCKET_ACCEPT,
};

#define NAMED(s) (nl == sizeof(s) - 1 && !memcmp(name, s, sizeof(s) - 1))
static enum field_role field_role(const char *name, size_t nl)
{
    switch (nl) {
    case 2: return NAMED("te") ? FR_HOP : FR_PASS;
    case 3: return NAMED("via") ? FR_VIA : FR_PASS;
    case 4: return NAMED("host") ? FR_HOST : NAMED("date") ? FR_DATE : FR_PASS;
    case 6: return NAMED("cookie") ? FR_COOKIE : NAMED("expect") ? FR_EXPECT : NAMED("server") ? FR_SERVER : FR_PASS;
    case 7: return NAMED("upgrade") ? FR_UPGRADE : FR_PASS;
    case 9: return NAMED("forwarded") ? FR_FORWARDED : FR_PASS;
    case 10: return NAMED("connection") ? FR_CONNECTION : NAMED("keep-alive") ? FR_HOP : FR_PASS;
    case 14: return NAMED("content-length") ? FR_CONTENT_LENGTH : NAMED("http2-settings") ? FR_HOP : FR_PASS;
    case 15: return NAMED("x-forwarded-for") ? FR_X_FORWARDED_FOR : FR_PASS;
    case 16: return NAMED("proxy-connection") ? FR_HOP : NAMED("x-forwarded-host") ? FR_X_FORWARDED_HOST : FR_PASS;
    case 17:
        return NAMED("transfer-encoding") ? FR_HOP : NAMED("x-forwarded-proto") ? FR_X_FORWARDED_PROTO
               : NAMED("sec-websocket-key") ? FR_WEBSOCKET_KEY : FR_PASS;
    case 20: return NAMED("sec-websocket-accept") ? FR_WEBSOCKET_ACCEPT : FR_PASS;
    default: return FR_PASS;
    }
}
#undef NAMED

static bool idempotent(const char *m)
{
    return !strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS") || !strcmp(m, "PUT") ||
           !strcmp(m, "DELETE") || !strcmp(m, "TRACE");
}

static int put(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }
#define PUT(b, literal) buf_append(b, literal, sizeof(literal) - 1)

/* The rest of a decoded path, escaped again for a request line: what is not a path
 * character (RFC 3986 3.3) goes as %XX, '%' among them. */
static int put_path_escaped(struct buf *b, const char *path)
{
    size_t n = strlen(path), need = 3 * n + 1;
    if (buf_reserve(b, need))
        return -1;
    b->len += url_escape(b->data + b->len, need, path, n, true);
    return 0;
}

/* The target upstream when proxy_pass gives a path: the location's part of the request's
 * decoded path (the one the location was chosen by) swapped for it, the rest escaped
 * again, the query as it came, as nginx does. A raw target is never cut by the decoded
 * location: /%61pi/x or //api/x matched location /api/ and must not reach the upstream's
 * /api/ unswapped. */
static int put_replaced_target(struct buf *head, const char *uri, const char *target, const struct location *loc)
{
    size_t tl = strlen(target);
    char *path = sc_malloc(tl + 2);
    if (!path)
        return -1;
    int pl = path_decode(target, path, tl + 1, NULL);
    int rc = -1;
    if (pl >= 0 && (size_t)pl >= loc->path_len && !memcmp(path, loc->path, loc->path_len)) {
        const char *query = strchr(target, '?');
        rc = put(head, uri) || put_path_escaped(head, path + loc->path_len) || (query && put(head, query));
    }
    sc_free(path);
    return rc;
}

/* A field the client sent several times, its values joined by sep, after earlier ones. */
static int join(struct buf *b, const char *value, const char *sep)
{
    return (b->len && put(b, sep)) || put(b, value);
}

/* base64 of 16 random bytes: a WebSocket handshake's key (RFC 6455 4.1), 24 characters
 * (heap), or NULL. */
static char *websocket_key(void)
{
    unsigned char nonce[16];
    char *out = sc_malloc(25);
    if (out && (RAND_bytes(nonce, sizeof nonce) != 1 || EVP_EncodeBlock((unsigned char *)out, nonce, sizeof nonce) != 24)) {
        sc_free(out);
        out = NULL;
    }
    return out;
}

/* Whether accept is the upstream's proof that it read key (RFC 6455 4.2.2). */
static bool websocket_accepts(const char *key, const char *accept)
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char text[24 + sizeof guid], want[29];
    unsigned char digest[SHA_DIGEST_LENGTH];
    snprintf(text, sizeof text, "%s%s", key, guid);
    SHA1((const unsigned char *)text, strlen(text), digest);
    EVP_EncodeBlock((unsigned char *)want, digest, sizeof digest);
    return accept && !strcmp(accept, want);
}

/* Adds a Connection field's value to the message's list (a NUL-terminated string once
 * any is added): a message may carry several such fields, and each names fields to drop. */
static int add_connection(struct buf *list, const char *value)
{
    /* The usual "keep-alive" or "close" names no field that is passed on anyway. */
    if (!strcasecmp(value, "keep-alive") || !strcasecmp(value, "close"))
        return 0;
    if (list->len)
        list->len--;               /* the terminator */
    return join(list, value, ", ") || buf_append(list, "", 1);
}

/* s[0..n) at dst + at, as much as fits in cap: where it ends. */
static size_t cat(char *dst, size_t at, size_t cap, const char *s, size_t n)
{
    if (n > cap - at)
        n = cap - at;
    memcpy(dst + at, s, n);
    return at + n;
}

/* What the upstream is not asked at all, before a server is picked: more fields than are
 * passed on (-2: 431, none dropped), or this process's Via mark, a request come round a
 * loop (-3: 508). */
static PARKED_APART int check_request(struct request *r)
{
    struct header h[FIELDS_MAX + 1];
    size_t n = req_headers(r, h, FIELDS_MAX + 1);
    if (n > FIELDS_MAX)
        return -2;
    for (size_t i = 0; i < n; i++)
        if (h[i].name[0] == 'v' && !strcmp(h[i].name, "via") && via_mark[0] && strstr(h[i].value, via_mark))
            return -3;
    return 0;
}

/* The fields the proxy joins into one of its own, each with its own value last: where
 * the first of a kind is among the client's, and how many there are. */
enum { J_COOKIE, J_X_FORWARDED_FOR, J_FORWARDED, J_VIA, J_COUNT };
struct joins {
    uint32_t first[J_COUNT], count[J_COUNT];
    size_t len;                    /* their values' bytes, and a separator each */
};

/* *o's value: those of the client's fields of kind j (role want), joined by "; " for
 * Cookie (what RFC 9113 8.2.3 asks of an HTTP/2 client's) and ", " else (the form a
 * repeated field may take, RFC 9110 5.3), with last after them (if not NULL).  A value of
 * one part is pointed to where it is; one of several is joined in text, which the caller
 * reserved for all of them (nothing there moves). */
static PARKED_APART void join_values(struct upstream_field *o, const struct upstream_field *f, const uint8_t *role,
                                     size_t n, const struct joins *js, int j, enum field_role want, const char *last,
                                     size_t last_len, struct buf *text)
{
    uint32_t count = js->count[j];
    if (count == 1 && !last) {
        o->value = f[js->first[j]].value, o->vl = f[js->first[j]].vl;
        return;
    }
    const char *sep = want == FR_COOKIE ? "; " : ", ";
    size_t start = text->len;
    for (size_t i = js->first[j]; i < n; i++) {
        if (role[i] != want)
            continue;
        if (text->len > start)
            buf_append(text, sep, 2);
        buf_append(text, f[i].value, f[i].vl);
    }
    if (last) {
        buf_append(text, sep, 2);
        buf_append(text, last, last_len);
    }
    o->value = text->data + start;
    o->vl = (uint32_t)(text->len - start);
}
/* The field called name the proxy sends for kind j (*o; its name NULL if there is none),
 * the usual case - none of them among the client's, or only its own value - inline. */
static inline void join_fields(struct upstream_field *o, const char *name, uint32_t nl, const struct upstream_field *f,
                               const uint8_t *role, size_t n, const struct joins *js, int j, enum field_role want,
                               const char *last, size_t last_len, struct buf *text)
{
    *o = (struct upstream_field){ js->count[j] || last ? name : NULL, last, nl, (uint32_t)last_len };
    if (js->count[j])
        join_values(o, f, role, n, js, j, want, last, last_len, text);
}

/* The proxy's Forwarded element for a request from client (RFC 7239): an IPv6 node in
 * brackets, quoted; a host with a port quoted too.  Its length. */
static size_t forwarded(const char *client, size_t cl, const char *scheme, const char *authority, size_t al, char *fw,
                        size_t cap)
{
    bool v6 = memchr(client, ':', cl) != NULL;
    size_t fl = 0;
    if (al > 512)
        al = 512;
    fl = cat(fw, fl, cap, "for=", 4);
    if (v6)
        fl = cat(fw, fl, cap, "\"[", 2);
    fl = cat(fw, fl, cap, client, cl);
    if (v6)
        fl = cat(fw, fl, cap, "]\"", 2);
    fl = cat(fw, fl, cap, ";proto=", 7);
    fl = cat(fw, fl, cap, scheme, strlen(scheme));
    if (al) {
        fl = cat(fw, fl, cap, ";host=\"", 7);
        fl = cat(fw, fl, cap, authority, al);
        fl = cat(fw, fl, cap, "\"", 1);
    }
    return fl;
}

/* The request the proxy's rules make of the client's, submitted on x's connection in the
 * upstream's protocol: the target with the location's path swapped for proxy_pass's (if
 * it gives one, as nginx), the client's fields but the hop-by-hop ones, and the proxy's
 * own; x->upgrade, the protocol the client asks for, asked for again - for an HTTP/2
 * client's extended CONNECT as HTTP/1.1's handshake, with the key x->ws_key.  Made on
 * this frame and gone with it (the client copies what it sends): a request waiting for
 * its answer keeps none of it.  check_request has passed.  0, or -1. */
static PARKED_APART int submit_request(struct exchange *x)
{
    struct request *r = x->ux.r;
    const struct proxy_conf *pc = x->ux.pc;
    const char *ws_key = x->ws_key;
    struct header h[FIELDS_MAX + 1];
    struct upstream_field f[FIELDS_MAX + 8], joined[4];
    uint8_t role[FIELDS_MAX];
    size_t n = req_headers(r, h, FIELDS_MAX + 1);
    struct joins js = { .len = 0 };
    if (n > FIELDS_MAX)
        return -1;
    struct buf connection = { 0 }, text = { 0 };
    bool te_trailers = false;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        f[i] = (struct upstream_field){ h[i].name, h[i].value, (uint32_t)strlen(h[i].name),
                                        (uint32_t)strlen(h[i].value) };
        enum field_role fr = h[i].name[0] == ':' ? FR_HOP : field_role(h[i].name, f[i].nl);
        /* (Date, Server and the accept are the response's to drop; a request's go on.) */
        if ((fr == FR_WEBSOCKET_KEY && !ws_key) || fr == FR_DATE || fr == FR_SERVER || fr == FR_WEBSOCKET_ACCEPT)
            fr = FR_PASS;
        if (fr == FR_CONNECTION)
            rc = add_connection(&connection, h[i].value);
        else if (fr == FR_HOP && f[i].nl == 2)
            te_trailers |= http_list_has(h[i].value, "trailers");
        else if (fr == FR_COOKIE || fr == FR_X_FORWARDED_FOR || fr == FR_FORWARDED || fr == FR_VIA) {
            int j = fr == FR_COOKIE ? J_COOKIE : fr == FR_X_FORWARDED_FOR ? J_X_FORWARDED_FOR
                    : fr == FR_FORWARDED ? J_FORWARDED : J_VIA;
            if (!js.count[j]++)
                js.first[j] = (uint32_t)i;
            js.len += f[i].vl + 2;
        }
        role[i] = (uint8_t)fr;
    }
    const char *authority = req_authority(r), *client = req_peer_address(r), *scheme = req_scheme(r);
    bool h2 = x->client_h2;
    char fw[700];
    size_t cl = strlen(client), al = strlen(authority), sl = strlen(scheme);
    size_t fl = forwarded(client, cl, scheme, authority, al, fw, sizeof fw);
    /* One reservation for all the values joined here: what points into it never moves. */
    if (!rc && (js.count[J_COOKIE] > 1 || js.count[J_X_FORWARDED_FOR] || js.count[J_FORWARDED] || js.count[J_VIA]))
        rc = buf_reserve(&text, js.len + cl + fl + 64);
    if (!rc) {
        join_fields(&joined[0], "Cookie", 6, f, role, n, &js, J_COOKIE, FR_COOKIE, NULL, 0, &text);
        join_fields(&joined[1], "X-Forwarded-For", 15, f, role, n, &js, J_X_FORWARDED_FOR, FR_X_FORWARDED_FOR, client,
                    cl, &text);
        join_fields(&joined[2], "Forwarded", 9, f, role, n, &js, J_FORWARDED, FR_FORWARDED, fw, fl, &text);
        join_fields(&joined[3], "Via", 3, f, role, n, &js, J_VIA, FR_VIA, via_request[h2], via_request_len, &text);
    }
    /* The fields passed as they are, moved down in place, then the proxy's own. */
    uint32_t no = 0;
    for (size_t i = 0; i < n && !rc; i++)
        if (role[i] == FR_PASS && !(connection.len && http_list_has(connection.data, f[i].name)))
            f[no++] = f[i];
    buf_free(&connection);
    if (!rc) {
        if (joined[0].name)
            f[no++] = joined[0];
        f[no++] = joined[1];
        f[no++] = (struct upstream_field){ "X-Forwarded-Proto", scheme, 17, (uint32_t)sl };
        if (al)
            f[no++] = (struct upstream_field){ "X-Forwarded-Host", authority, 16, (uint32_t)al };
        f[no++] = joined[2];
        f[no++] = joined[3];
        if (ws_key)
            f[no++] = (struct upstream_field){ "Sec-WebSocket-Key", ws_key, 17, 24 };
    }
    int64_t length = req_content_length(r);
    struct upstream_request rq = {
        .method = ws_key ? "GET" : req_method(r),
        .target = x->target ? x->target : req_target(r),
        .authority = pc->host[0] ? pc->host : *authority ? authority : pc->group->servers[0].text,
        .fields = f,
        .nfields = no,
        .head_max = req_config(r)->max_header_list_size,
        /* After an upgrade no body: the bytes after the handshake are the tunnel's. */
        .length = x->upgrade ? UPSTREAM_BODY_NONE : length >= 0 ? length
                  : req_body_empty(r) ? UPSTREAM_BODY_NONE : UPSTREAM_BODY_STREAM,
        .upgrade = x->upgrade,
        .head = req_is_head(r),
        .close = !pc->group->servers[0].keepalive,
        .trailers = te_trailers,
    };
    rc = rc || x->ux.client->submit(&x->ux, &rq);
    buf_free(&text);
    return rc ? -1 : 0;
}

/* ---- the upstream's side ---- */

static PARKED_APART int respond(struct exchange *x);

/* The upstream's head came: timed, counted and passed on. */
static int got_head(struct exchange *x, enum upstream_failure *why)
{
    struct request *r = x->ux.r;
    struct req_upstream *u = req_upstream(r);
    if (u) {
        u->header_time = req_now(r) - x->started;
        u->status = x->ux.resp.status;
    }
    upstream_responded(x->sc, x->ux.resp.status);
    int rs = respond(x);
    if (rs) {
        *why = rs == -2 ? UF_INVALID : UF_NONE;
        return -1;
    }
    buf_free(&x->ux.resp.fields);    /* copied out: a long response keeps no head */
    x->ux.resp.field_start = 0;
    return 0;
}

/* The response's end with the trailers the client kept, count in b (an HTTP/2
 * upstream's, gRPC's grpc-status); the hop-by-hop ones and framing left out, as in the
 * head. */
static PARKED_APART int end_with_trailers(struct exchange *x, const struct buf *b, enum upstream_failure *why)
{
    struct header h[REQ_RESPONSE_FIELDS_MAX];
    size_t n = 0;
    for (size_t off = 0; off < b->len;) {
        const char *name = b->data + off;
        size_t nl = strlen(name);
        const char *value = name + nl + 1;
        off = (size_t)(value - b->data) + strlen(value) + 1;
        enum field_role role = field_role(name, nl);
        if (role == FR_HOP || role == FR_CONNECTION || role == FR_UPGRADE || role == FR_CONTENT_LENGTH)
            continue;
        if (n == REQ_RESPONSE_FIELDS_MAX) {
            x->ux.resp.error = "upstream sent too many trailer fields";
            *why = UF_INVALID;
            return -1;
        }
        h[n++] = (struct header){ name, value };
    }
    req_end_with_trailers(x->ux.r, h, n);
    return 0;
}

/* A request waiting for its upstream's answer parks in attempt's wait, and its handler's
 * frames from there up are what a parked long poll keeps: the steps between two waits
 * (the client's step and tunnel, and what has large locals: respond, end_with_trailers)
 * are PARKED_APART (the frame rule, runtime/runtime.h). */

/* The client's step found the head (the exchange is the first member of x). */
static int head_came(struct upstream_exchange *ux, enum upstream_failure *why)
{
    _Static_assert(offsetof(struct exchange, ux) == 0, "the exchange is x's first member");
    return got_head((struct exchange *)ux, why);
}

/* Moves what can move without waiting, both ways, and passes on the head the client
 * found (the body goes straight to the request's output).  1: the response is complete
 * (or switched protocols); 0: wait for *events; -1: failed (*why). */
static int pump(struct exchange *x, int *events, enum upstream_failure *why)
{
    int ev = x->ux.client->step(&x->ux, head_came, events, why);
    /* The upstream has nothing more for now: what it sent goes out through the compressor
     * (when the response is compressed), an event or a long poll's answer whole, not held
     * until more comes. */
    if (ev == UPSTREAM_MORE && req_flush_point(x->ux.r)) {
        *why = UF_NONE;
        return -1;
    }
    return ev == UPSTREAM_END ? 1 : ev == UPSTREAM_MORE ? 0 : -1;
}

/* ---- the client's side ---- */

/* The one error-log line of a failed attempt - a warning when another server is tried
 * next - and, for the last, its cause for the access log: the client, the request, the
 * server (the group when none could be picked), and what happened in which phase. */
static PARKED_APART void report(struct exchange *x, enum upstream_failure why, bool retrying)
{
    struct request *r = x->ux.r;
    enum upstream_phase phase = UP_NONE;
    if (why == UF_CONNECT || why == UF_CONNECT_TIMEOUT || why == UF_TLS)
        phase = UP_CONNECT;
    else if (x->ux.resp.upgraded)
        phase = UP_TUNNEL;
    else if (why == UF_SEND || why == UF_SEND_TIMEOUT)
        phase = UP_SEND;
    else if (why != UF_NOLIVE && why != UF_BUSY)
        phase = x->ux.resp.head_done ? UP_BODY : UP_HEADER;
    struct upstream_fault f = { why, phase, x->ux.err,
                                x->detail ? x->detail : why == UF_INVALID ? x->ux.resp.error : NULL, x->ux.pc };
    char cause[600];
    size_t n = upstream_cause(&f, cause, sizeof cause);
    const struct upstream_group *g = x->ux.pc->group;
    const char *server = phase == UP_NONE ? (g->name[0] ? g->name : g->servers[0].text) : x->sc ? x->sc->text : "-";
    log_msg(retrying ? LOG_WARN : LOG_ERROR, "%s: %s %s: upstream %s: %s%s", req_peer(r), req_method(r),
            req_target(r), server, cause, retrying ? "; trying another" : "");
    struct req_upstream *u = retrying ? NULL : req_upstream(r);
    if (u) {
        sc_free(u->error);
        if ((u->error = sc_malloc(n + 1)))
            memcpy(u->error, cause, n + 1);
    }
}

static void fail(struct exchange *x, enum upstream_failure why)
{
    struct request *r = x->ux.r;
    report(x, why, false);
    if (x->responded) {
        req_abort(r);                /* the response began: the client must see it cut short */
        return;
    }
    /* The access log's upstream_status is the status the client got, as nginx's. */
    int status = upstream_failure_status(why);
    struct req_upstream *u = req_upstream(r);
    if (u)
        u->status = status;
    app_error_text(r, status, status == 504 ? "504 Gateway Timeout\n" : status == 503 ? "503 Service Unavailable\n"
                                                                                     : "502 Bad Gateway\n");
}

/* The response head for the client: the upstream's fields but the hop-by-hop ones and
 * those the front end writes itself, and Via. */
static PARKED_APART int respond(struct exchange *x)
{
    struct request *r = x->ux.r;
    struct upstream_response *p = &x->ux.resp;
    struct header h[REQ_RESPONSE_FIELDS_MAX];
    size_t n = 0;
    const char *via = NULL, *upgrade = NULL, *accept = NULL;
    unsigned accepts = 0;
    struct buf connection = { 0 };
    int rc = 0;
    /* Each field measured and classified once, for both passes (a Connection field may
     * come after the fields it names). */
    struct { const char *name, *value; enum field_role role; } f[RESPONSE_FIELDS_SEEN];
    size_t nf = 0;
    for (size_t off = 0; off < p->fields.len && !rc;) {
        const char *name = p->fields.data + off;
        size_t nl = strlen(name);
        const char *value = name + nl + 1;
        off = (size_t)(value - p->fields.data) + strlen(value) + 1;
        if (nf == RESPONSE_FIELDS_SEEN) {
            p->error = "upstream sent too many header fields";
            rc = -2;
            break;
        }
        f[nf] = (typeof(f[0])){ name, value, field_role(name, nl) };
        switch (f[nf++].role) {
        case FR_CONNECTION: rc = add_connection(&connection, value); break;
        case FR_UPGRADE: upgrade = value; break;
        case FR_WEBSOCKET_ACCEPT: accept = value, accepts++; break;
        default: break;
        }
    }
    /* The checks RFC 6455 4.1 gives the client, which over HTTP/2 never sees the 101: one
     * accept (11.3.3), the key's, and a switch to websocket itself. */
    if (!rc && x->ws_key && p->upgraded && (accepts != 1 || !websocket_accepts(x->ws_key, accept))) {
        p->error = "upstream's Sec-WebSocket-Accept does not answer the handshake's key";
        rc = -2;
    }
    if (!rc && x->ws_key && p->upgraded && (!upgrade || strcasecmp(upgrade, "websocket"))) {
        p->error = "upstream switched to a protocol other than websocket";
        rc = -2;
    }
    if (!rc && x->ws_key && !p->upgraded && p->status / 100 == 2) {
        p->error = "upstream answered a WebSocket handshake without switching protocols";
        rc = -2;
    }
    if (rc == -2) {
        buf_free(&connection);
        return -2;
    }
    for (size_t i = 0; i < nf; i++) {
        const char *name = f[i].name, *value = f[i].value;
        switch (f[i].role) {
        case FR_HOP: case FR_CONNECTION: case FR_UPGRADE: case FR_CONTENT_LENGTH: case FR_DATE: case FR_SERVER:
            continue;
        case FR_WEBSOCKET_ACCEPT:
            if (x->ws_key)
                continue;
            break;
        case FR_VIA:
            via = value;
            continue;
        default:
            break;
        }
        if (connection.len && http_list_has(connection.data, name))
            continue;
        /* Room kept for Via and Upgrade; a head with more is refused (502, as nginx's
         * "too big header"), never passed on with fields cut away. */
        if (n == REQ_RESPONSE_FIELDS_MAX - 2) {
            p->error = "upstream sent too many header fields";
            buf_free(&connection);
            return -2;
        }
        h[n++] = (struct header){ name, value };
    }
    buf_free(&connection);       /* the names in h point into p->fields */
    if (rc) {
        p->error = "no memory for the upstream's header";
        return -2;
    }
    char via_text[512];
    size_t vl = 0;
    if (via) {
        vl = cat(via_text, vl, 480, via, strlen(via));
        vl = cat(via_text, vl, sizeof via_text, ", ", 2);
    }
    vl = cat(via_text, vl, sizeof via_text - 1, x->ux.client->version, 3);   /* "x.y" */
    vl = cat(via_text, vl, sizeof via_text - 1, " h2park", 7);
    via_text[vl] = 0;
    h[n++] = (struct header){ "via", via_text };
    int64_t length = p->length >= 0 ? p->length : BODY_STREAM;
    if (p->status == 204 || p->status == 304 || (p->head_ends && p->length < 0))
        length = BODY_NONE;        /* a head that ended the stream (gRPC's trailers-only) */
    if (p->upgraded) {
        if (!upgrade) {
            p->error = "upstream switched protocols without naming one";
            return -2;
        }
        h[n++] = (struct header){ "upgrade", upgrade };
        length = BODY_STREAM;
    }
    x->responded = true;
    return req_respond(r, p->status, h, n, length);
}

/* The request's body goes with its length unknown (chunked, or DATA to its end). */
static bool body_streamed(const struct exchange *x)
{
    return !x->upgrade && req_content_length(x->ux.r) < 0 && !req_body_empty(x->ux.r);
}

/* After a 101, the tunnel: 0 when it ended (the client's connection closes if it was cut). */
static int tunnel(struct exchange *x, enum upstream_failure *why)
{
    struct request *r = x->ux.r;
    struct req_upstream *u = req_upstream(r);
    int tr = x->ux.client->tunnel(&x->ux, why);
    upstream_done(x->ux.uc, false, req_now(r));
    x->ux.uc = NULL;
    if (u)
        u->response_time = req_now(r) - x->started;
    if (tr == 0) {
        req_end(r);
    } else if (*why != UF_NONE) {
        fail(x, *why);               /* the tunnel is cut: the client's connection closes */
        *why = UF_NONE;
    }
    return 0;
}

/* One try on server x->sc: 0 answered (the response went to the client, whole or
 * cut short), -1 failed before any of it with *why, *retry whether another may be tried. */
static int attempt(struct exchange *x, enum upstream_failure *why, bool *retry)
{
    struct upstream_exchange *ux = &x->ux;
    struct request *r = ux->r;
    struct req_upstream *u = req_upstream(r);
    *retry = false;
    /* A request that could not go again were the connection found closed after it was
     * sent has the socket asked first; another one is retried on a fresh connection. */
    bool once = !idempotent(req_method(r)) || body_streamed(x) || req_content_length(r) > 0;
    ux->uc = upstream_take(x->sc, x->ux.pc->tls, req_now(r), ux->client->h2, once);
    x->reused = ux->uc != NULL;
    ux->err = 0;
    sc_free(x->detail);
    x->detail = NULL;
    if (!ux->uc) {
        ux->uc = upstream_connect(r, x->sc, x->ux.pc->tls, x->ux.pc->connect_timeout, why, &x->detail);
        if (!ux->uc) {
            *retry = *why != UF_NONE;    /* nothing was sent: any request may go elsewhere */
            return -1;
        }
    }
    if (u && u->connect_time < 0)
        u->connect_time = req_now(r) - x->started;
    if ((ux->client->open && ux->client->open(ux->uc, req_config(r)->max_header_list_size)) || submit_request(x)) {
        *why = UF_SEND;
        goto failed;
    }
    for (;;) {
        int events = 0, p = pump(x, &events, why);
        if (p > 0)
            break;
        if (p < 0)
            goto failed;
        /* Each way has its deadline: the upstream's to take the request, to answer; a
         * client slow with its body has the request's own (body_timeout). */
        double limit = events & REQ_WRITABLE ? x->ux.pc->send_timeout : events & REQ_BODY ? 0 : x->ux.pc->read_timeout;
        int w = req_wait_io(r, &ux->uc->watch, events, limit);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : events & REQ_WRITABLE ? UF_SEND_TIMEOUT : UF_READ_TIMEOUT;
            goto failed;
        }
    }
    if (ux->resp.upgraded)
        return tunnel(x, why);
    uint32_t trailers;
    const struct buf *tb = ux->client->trailers(ux, &trailers);
    if (trailers ? end_with_trailers(x, tb, why) : (req_end(r), 0))
        goto failed;
    if (u)
        u->response_time = req_now(r) - x->started;
    bool reusable = ux->client->reusable(ux);
    ux->client->end(ux);
    upstream_done(ux->uc, reusable, req_now(r));
    ux->uc = NULL;
    return 0;
failed:
    if (ux->uc) {
        ux->client->end(ux);
        upstream_done(ux->uc, false, req_now(r));
        ux->uc = NULL;
    }
    if (*why == UF_NONE || x->responded)
        return -1;
    *retry = !ux->body_started && idempotent(req_method(r));
    return -1;
}

/* The target with proxy_pass's path in place of the location's (heap), or NULL. */
static char *replaced_target(struct request *r, const struct proxy_conf *pc)
{
    struct buf b = { 0 };
    if (put_replaced_target(&b, pc->uri, req_target(r), req_location(r)) || buf_append(&b, "", 1)) {
        buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* What is answered before any server is asked: 0 if nothing is (x set up), else the
 * status sent. */
static PARKED_APART int refuse(struct request *r, struct exchange *x, const char *upgrade)
{
    bool h2 = strcmp(req_protocol(r), "http/1.1") != 0;
    if (x)
        x->client_h2 = h2;
    if (h2 && !strcmp(req_method(r), "CONNECT") && (!upgrade || strcmp(upgrade, "websocket"))) {
        app_error_text(r, 501, "501 Not Implemented\n");   /* an extended CONNECT for a protocol no upstream is asked for */
        return 501;
    }
    int checked = x ? check_request(r) : -1;
    if (!checked && h2 && upgrade && !(x->ws_key = websocket_key()))
        checked = -1;
    if (!checked && x->ux.pc->uri[0] && !(x->target = replaced_target(r, x->ux.pc)))
        checked = -1;
    if (checked == -2) {
        app_error_text(r, 431, "431 Request Header Fields Too Large\n");
        return 431;
    }
    if (checked == -3) {
        static _Thread_local time_t logged;   /* a client can send loops as fast as it likes */
        log_rate_limited(LOG_ERROR, &logged,
                         "%s: %s %s: proxy loop: the request came back to this server (its Via carries %s)",
                         req_peer(r), req_method(r), req_target(r), via_mark);
        app_error_text(r, 508, "508 Loop Detected: the request came back to this server\n");
        return 508;
    }
    if (checked) {
        app_error_text(r, 500, "500 Internal Server Error\n");
        return 500;
    }
    return 0;
}

void proxy_pass_handle(struct request *r)
{
    const struct proxy_conf *pc = req_location(r)->proxy;
    const struct upstream_group *g = pc->group;
    struct exchange *x = sc_calloc(1, sizeof *x);
    const struct upstream_client *client = upstream_client_for(pc);
    /* WebSocket is the one upgrade passed on: another protocol is not known to be one a
     * byte tunnel carries faithfully (h2c is the front end's own); and only to a client
     * that has a tunnel (an HTTP/2 upstream would need RFC 8441's CONNECT too). */
    const char *upgrade = req_upgrade(r);
    if (upgrade && (!http_list_has(upgrade, "websocket") || !client->tunnel))
        upgrade = NULL;
    if (x)
        x->ux.pc = pc;
    if (refuse(r, x, upgrade)) {
        if (x && (x->target || x->ws_key))
            sc_free(x->target), sc_free(x->ws_key);
        sc_free(x);
        return;
    }
    x->ux.client = client;
    x->ux.r = r;
    req_park_frees(r, &x->ux.rx);
    x->upgrade = upgrade;
    x->started = req_now(r);
    struct req_upstream *u = req_upstream(r);
    uint32_t tried = 0;
    /* As nginx: at most one try per server (backups included), whatever
     * proxy_next_upstream_tries says, so the last answer is a server's own failure. */
    unsigned tries = pc->next_upstream_tries && pc->next_upstream_tries < g->nservers ? pc->next_upstream_tries
                                                                                     : (unsigned)g->nservers;
    unsigned failures = 0, stale = 0;
    enum upstream_failure why = UF_NONE;
    for (;;) {
        int s = upstream_pick(g, req_now(r), tried, &why);
        if (s < 0) {
            fail(x, why);
            break;
        }
        tried |= 1u << s;
        x->sc = &g->servers[s];
        if (u) {
            u->addr = x->sc->text;
            u->tries++;
        }
        bool retry;
        if (attempt(x, &why, &retry) == 0)
            break;
        if (why == UF_NONE) {
            if (x->responded)
                req_abort(r);
            break;                   /* the client is gone */
        }
        /* A kept-alive connection the server closed meanwhile fails at once and says
         * nothing of the server's health: the same server again, on a fresh connection. */
        if (x->reused && !x->ux.resp.head_done && why != UF_READ_TIMEOUT && why != UF_SEND_TIMEOUT && retry &&
            stale++ < STALE_RETRIES) {
            tried &= ~(1u << s);
            continue;
        }
        upstream_failed(g, x->sc, why, req_now(r));
        if (!retry || ++failures >= tries) {
            fail(x, why);
            break;
        }
        report(x, why, true);
    }
    req_park_frees(r, NULL);
    sc_free(x->detail);
    if (x->target || x->ws_key)
        sc_free(x->target), sc_free(x->ws_key);
    upstream_exchange_free(&x->ux);
    sc_free(x);
}

const struct route proxy_pass_route = { "proxy_pass", NULL, 0, proxy_pass_handle, true };
