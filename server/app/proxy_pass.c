/* The reverse proxy (proxy_pass): a request handler that passes its request to an
 * upstream server - over HTTP/1.1, or HTTP/2 for h2c:// and h2:// (upstream/h2client.c) -
 * and its response back, streaming both ways.
 *
 * Every wait is a request-API call (req_wait_io, req_read_body, req_write), so what a
 * waiting exchange holds is heap state - the exchange below, its upstream connection,
 * the request - and never a buffer on the handler's stack: a long poll waiting for its
 * upstream holds no read buffer either (an empty one is freed when the handler parks, so
 * a response that comes within a tick reuses it).  Memory is
 * bounded per exchange: one read buffer of UPSTREAM_READ bytes, the request's output
 * (REQUEST_OUTPUT_MAX: req_write waits for the client, and so the upstream is read no
 * faster than the client takes it), and one piece of request body on its way up.  The
 * rest of a body of known length is read straight into the request's output
 * (req_write_room), never more than is left of it: no copy through the read buffer, and
 * nothing past the response is taken from the socket.  Asked for more than
 * REQUEST_OUTPUT_MAX, that output is wide while the worker's budget lasts: a large body
 * is read 256 KiB at a time.
 *
 * RFC 9110 section 7.6, as an intermediary: hop-by-hop fields (Connection and the fields
 * it names, Keep-Alive, Proxy-Connection, TE, Transfer-Encoding, Upgrade) are not
 * forwarded either way; Via is added both ways; X-Forwarded-For and Forwarded get the
 * client's address appended, X-Forwarded-Proto and X-Forwarded-Host are set; Host is the
 * client's (or proxy_set_host); Expect: 100-continue is answered by the front end when
 * the body is first read (after the upstream is connected), not forwarded.  An HTTP/2
 * client's request becomes HTTP/1.1: its cookie fields joined with "; " (RFC 9113
 * 8.2.3), a body without a length sent chunked.  The response's Date and Server are
 * this server's, as in nginx.
 *
 * WebSocket (RFC 6455) over HTTP/1.1: a client's Upgrade: websocket goes upstream with
 * Connection: upgrade, and the upstream's 101 makes the exchange a tunnel (tunnel()):
 * bytes both ways as they come, with the same bounds - one read buffer, freed when it is
 * empty as the handler parks, and the request's output - so an idle tunnel waits holding
 * no buffer.  Its
 * silence both ways is bounded by proxy_read_timeout, as in nginx; the upstream
 * connection is never pooled afterwards.  Over HTTP/2 (RFC 8441) the client's extended
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
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
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

#define UPSTREAM_READ (16u << 10)
#define BODY_PIECE (16u << 10)
#define FIELDS_MAX 128
#define STALE_RETRIES 3           /* pooled connections found closed, per request */
#define RESPONSE_FIELDS_SEEN 128  /* a response head's fields, passed on or not (more: 502) */

struct exchange {
    struct request *r;
    const struct proxy_conf *pc;   /* the request's location's */
    const struct upstream_server_conf *sc;   /* the server of this attempt, or NULL */
    const char *upgrade;           /* the client's Upgrade, passed on (websocket), or NULL */
    char ws_key[25];               /* the handshake's key, when it is the proxy's own (HTTP/2), or "" */
    struct upstream_conn *uc;
    struct upstream_response resp;
    struct buf rx;                 /* read from the upstream, not yet parsed */
    size_t rx_off;
    double started;
    bool reused, request_sent, body_started, responded, body_open;
    bool h2;                       /* the upstream speaks HTTP/2 (upstream/h2client.c) */
    uint8_t send_failed;           /* the upstream stopped taking the request: why */
    uint8_t err;                   /* the errno behind the attempt's failure, or 0 (Linux's fit a
                                      byte: the exchange stays in the heap's 352-byte class) */
    char *detail;                  /* a failed connect's or handshake's words (heap), or NULL */
};

/* This process's mark in the Via it adds to a request, "1.1 h2park (" and 16 hex digits
 * of its own ")": a request that comes back carrying it went round a loop - proxy_pass
 * naming a listener of this daemon, or of a chain that leads back to it - and is
 * answered 508 at once (RFC 5842), as Varnish and h2o do, rather than passed round until
 * a head grows past its limit (1,100 hops, 2,250 sockets).  Random per process: two
 * h2park in a chain are not a loop. */
static char via_mark[20];          /* "(" 16 hex ")" */
static char via_request[2][40];    /* "1.1 h2park (...)", "2.0 h2park (...)" */

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
static int put_field_n(struct buf *b, const char *name, size_t nl, const char *value)
{
    return buf_append(b, name, nl) || PUT(b, ": ") || put(b, value) || PUT(b, "\r\n");
}
#define put_field(b, literal, value) put_field_n(b, literal, sizeof(literal) - 1, value)

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

/* base64 of 16 random bytes: a WebSocket handshake's key (RFC 6455 4.1), 24 characters. */
static int websocket_key(char out[25])
{
    unsigned char nonce[16];
    return RAND_bytes(nonce, sizeof nonce) == 1 && EVP_EncodeBlock((unsigned char *)out, nonce, sizeof nonce) == 24
               ? 0 : -1;
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

/* A client's field as build_head reads it: measured and classified once. */
struct request_field {
    const char *name, *value;
    uint32_t nl, vl;
    enum field_role role;
};

/* The values of the fields of role role among f[0..n), joined by sep, with last after
 * them (if not NULL), as one field called name: the form a repeated field may take (RFC
 * 9110 5.3), and for Cookie what RFC 9113 8.2.3 asks of an HTTP/2 client's. */
static int put_joined(struct buf *head, const char *name, const struct request_field *f, size_t n,
                      enum field_role role, const char *sep, const char *last, size_t last_len)
{
    bool any = false;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (f[i].role != role)
            continue;
        rc = (any ? put(head, sep) : put(head, name) || PUT(head, ": ")) || buf_append(head, f[i].value, f[i].vl);
        any = true;
    }
    if (last && !rc) {
        rc = (any ? put(head, sep) : put(head, name) || PUT(head, ": ")) || buf_append(head, last, last_len);
        any = true;
    }
    return rc || (any && PUT(head, "\r\n"));
}

/* The request head for the upstream: the target with the location's path swapped for
 * proxy_pass's (if it gives one, as nginx), the client's fields but the hop-by-hop ones,
 * and the proxy's own; upgrade, the protocol the client asks for, asked for again - for an
 * HTTP/2 client's extended CONNECT as HTTP/1.1's handshake, with the key ws_key.
 * *chunked: the body goes with the chunked coding.  -2: more fields than are passed on
 * (431); -3: the request carries this process's Via mark, it came round a loop (508). */
static int build_head(struct request *r, const struct proxy_conf *pc, const char *upgrade, const char *ws_key,
                      struct buf *head, bool *chunked)
{
    const struct location *loc = req_location(r);
    struct header h[FIELDS_MAX + 1];
    struct request_field f[FIELDS_MAX];
    size_t n = req_headers(r, h, FIELDS_MAX + 1);
    if (n > FIELDS_MAX)
        return -2;                 /* more fields than are passed on: 431, none dropped */
    struct buf connection = { 0 };
    const char *target = req_target(r), *authority = req_authority(r);
    size_t size = strlen(target) + strlen(pc->uri) + 512, al = strlen(authority);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        f[i].name = h[i].name;
        f[i].value = h[i].value;
        f[i].nl = (uint32_t)strlen(h[i].name);
        f[i].vl = (uint32_t)strlen(h[i].value);
        f[i].role = h[i].name[0] == ':' ? FR_HOP : field_role(h[i].name, f[i].nl);
        if (f[i].role == FR_CONNECTION)
            rc = add_connection(&connection, h[i].value);
        else if (f[i].role == FR_VIA && via_mark[0] && strstr(h[i].value, via_mark))
            rc = -3;
        size += f[i].nl + f[i].vl + 4;
    }
    if (rc == -3) {
        buf_free(&connection);
        return -3;                 /* it came round a loop: 508 */
    }
    /* The head in one allocation: everything below is within size but the rare escaped path. */
    rc = rc || buf_reserve(head, size + 3 * al);
    bool h2 = strcmp(req_protocol(r), "http/1.1") != 0;
    rc = rc || put(head, ws_key[0] ? "GET" : req_method(r)) || PUT(head, " ");
    if (pc->uri[0])
        rc = rc || put_replaced_target(head, pc->uri, target, loc);
    else
        rc = rc || put(head, target);
    rc = rc || PUT(head, " HTTP/1.1\r\n");
    rc = rc || put_field(head, "Host", pc->host[0] ? pc->host : *authority ? authority : pc->group->servers[0].text);
    for (size_t i = 0; i < n && !rc; i++) {
        /* (Date, Server and the accept are the response's to drop; a request's go on.) */
        if ((f[i].role == FR_WEBSOCKET_KEY && !ws_key[0]) || f[i].role == FR_DATE || f[i].role == FR_SERVER ||
            f[i].role == FR_WEBSOCKET_ACCEPT)
            f[i].role = FR_PASS;
        if (f[i].role != FR_PASS || (connection.len && http_list_has(connection.data, f[i].name)))
            continue;
        rc = buf_append(head, f[i].name, f[i].nl) || PUT(head, ": ") || buf_append(head, f[i].value, f[i].vl) ||
             PUT(head, "\r\n");
    }
    buf_free(&connection);
    /* RFC 7239: an IPv6 node in brackets, quoted; a host with a port quoted too. */
    const char *client = req_peer_address(r), *scheme = req_scheme(r);
    bool v6 = strchr(client, ':') != NULL;
    char fw[700];
    size_t fl = 0;
    if (al > 512)
        al = 512;
    fl = cat(fw, fl, sizeof fw, "for=", 4);
    if (v6)
        fl = cat(fw, fl, sizeof fw, "\"[", 2);
    fl = cat(fw, fl, sizeof fw, client, strlen(client));
    if (v6)
        fl = cat(fw, fl, sizeof fw, "]\"", 2);
    fl = cat(fw, fl, sizeof fw, ";proto=", 7);
    fl = cat(fw, fl, sizeof fw, scheme, strlen(scheme));
    if (al) {
        fl = cat(fw, fl, sizeof fw, ";host=\"", 7);
        fl = cat(fw, fl, sizeof fw, authority, al);
        fl = cat(fw, fl, sizeof fw, "\"", 1);
    }
    rc = rc || put_joined(head, "Cookie", f, n, FR_COOKIE, "; ", NULL, 0) ||
         put_joined(head, "X-Forwarded-For", f, n, FR_X_FORWARDED_FOR, ", ", client, strlen(client)) ||
         put_field(head, "X-Forwarded-Proto", scheme) || (*authority && put_field(head, "X-Forwarded-Host", authority)) ||
         put_joined(head, "Forwarded", f, n, FR_FORWARDED, ", ", fw, fl) ||
         put_joined(head, "Via", f, n, FR_VIA, ", ", via_request[h2], strlen(via_request[h2]));
    *chunked = false;
    int64_t length = req_content_length(r);
    if (upgrade) {
        /* no body: the bytes after the handshake are the tunnel's */
    } else if (length >= 0) {
        char text[24];
        text[u64_dec(text, (uint64_t)length)] = 0;
        rc = rc || put_field(head, "Content-Length", text);
    } else if (!req_body_empty(r)) {
        *chunked = true;
        rc = rc || put_field(head, "Transfer-Encoding", "chunked");
    }
    if (upgrade)
        rc = rc || put_field(head, "Connection", "upgrade") || put_field(head, "Upgrade", upgrade) ||
             (ws_key[0] && put_field(head, "Sec-WebSocket-Key", ws_key));
    else if (!pc->group->servers[0].keepalive)
        rc = rc || put_field(head, "Connection", "close");
    return rc || PUT(head, "\r\n");
}

/* ---- the upstream's side ---- */

static int respond(struct exchange *x);

/* The upstream's head came: timed, counted and passed on. */
static int got_head(struct exchange *x, enum upstream_failure *why)
{
    struct request *r = x->r;
    struct req_upstream *u = req_upstream(r);
    if (u) {
        u->header_time = req_now(r) - x->started;
        u->status = x->resp.status;
    }
    upstream_responded(x->sc, x->resp.status);
    int rs = respond(x);
    if (rs) {
        *why = rs == -2 ? UF_INVALID : UF_NONE;
        return -1;
    }
    buf_free(&x->resp.fields);       /* copied out: a long response keeps no head */
    x->resp.field_start = 0;
    return 0;
}

/* The response's trailers (an h2c upstream's, gRPC's grpc-status) with the body's end;
 * the hop-by-hop ones and framing left out, as in the head. */
static int end_with_trailers(struct exchange *x, enum upstream_failure *why)
{
    uint32_t count;
    const struct buf *b = h2up_trailers(x->uc, &count);
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
            x->resp.error = "upstream sent too many trailer fields";
            *why = UF_INVALID;
            return -1;
        }
        h[n++] = (struct header){ name, value };
    }
    req_end_with_trailers(x->r, h, n);
    return 0;
}

/* A request waiting for its upstream's answer parks in attempt's wait, and its handler's
 * frames from there up are what a parked long poll keeps: the steps between two waits
 * (pump, pump_h2, tunnel) are PARKED_APART (the frame rule, runtime/runtime.h). */

/* pump for an h2c upstream: h2client.c moves both ways and frames; this passes on what
 * it found, as pump does. */
static PARKED_APART int pump_h2(struct exchange *x, int *events, enum upstream_failure *why)
{
    for (;;) {
        int ev = h2up_step(x->uc, events, why);
        if (ev == UPSTREAM_MORE) {
            if (req_flush_point(x->r)) {     /* the upstream paused: see pump */
                *why = UF_NONE;
                return -1;
            }
            return 0;
        }
        if (ev == UPSTREAM_ERROR)
            return -1;
        if (ev == UPSTREAM_HEAD && got_head(x, why))
            return -1;
        if (ev == UPSTREAM_BODY && req_write(x->r, x->resp.body, x->resp.body_len)) {
            *why = UF_NONE;
            return -1;
        }
        if (ev == UPSTREAM_END) {
            x->request_sent = true;
            return end_with_trailers(x, why) ? -1 : 1;
        }
    }
}

/* The rest of the response is body of a known length, none of it read yet: it can be
 * read where it goes, into the response's output, rather than through rx and a copy. */
static bool body_to_output(const struct exchange *x)
{
    const struct upstream_response *p = &x->resp;
    return p->head_done && !p->complete && !p->upgraded && !p->chunked && !p->head_request && p->length > 0 &&
           p->parser.content_length > 0;
}

/* Reads at most what is left of such a body (nothing past the response is ever taken
 * there) into the response's output, which llhttp then counts, and makes it output.
 * The bytes read (*room: how many were asked), 0 for none now, -1 for the upstream's
 * close or a failure to read (errno), -2 with *why for anything else. */
static ssize_t read_body_into_output(struct exchange *x, struct transport *t, size_t *room, enum upstream_failure *why)
{
    uint64_t left = x->resp.parser.content_length;
    char *dst = req_write_room(x->r, left < REQUEST_OUTPUT_WIDE ? (size_t)left : REQUEST_OUTPUT_WIDE, room);
    if (!dst) {
        *why = UF_NONE;              /* the client went away: the body is unfinished */
        return -2;
    }
    ssize_t n = transport_read(t, dst, *room);
    if (n <= 0)
        return n;
    size_t used;
    int ev = h1resp_parse(&x->resp, dst, (size_t)n, &used);
    if (ev != UPSTREAM_BODY || x->resp.body != dst || x->resp.body_len != (size_t)n || used != (size_t)n) {
        *why = UF_INVALID;           /* (llhttp takes a length-framed body as it comes) */
        return -2;
    }
    if (req_write_commit(x->r, (size_t)n)) {
        *why = UF_NONE;
        return -2;
    }
    return n;
}

/* Moves what can move without waiting, both ways at once - the request up (its head,
 * then body as it arrives), the response in and on to the client - since an upstream
 * may answer while the body still comes (an echo, an early 413) and would stop reading
 * it once its own output is stuck.  1: the response is complete; 0: wait for *events;
 * -1: failed (*why).  Writing to the client waits for it (req_write): a slow client
 * slows the upstream. */
static PARKED_APART int pump(struct exchange *x, bool chunked, int *events, enum upstream_failure *why)
{
    struct request *r = x->r;
    struct transport *t = &x->uc->t;
    bool sent = false;
    for (;;) {
        if (!x->send_failed && transport_pending(t)) {
            uint64_t moved;
            int f = transport_flush(t, &moved);
            sent |= moved > 0;
            if (f < 0) {
                /* What the upstream said before it stopped reading is still read. */
                x->err = (uint8_t)errno;
                x->send_failed = errno == ECONNRESET ? UF_RESET : UF_SEND;
                x->body_open = false;
                buf_free(&t->out);
                t->out_off = 0;
            } else if (f > 0) {
                break;
            }
        }
        if (x->send_failed || !x->body_open)
            break;
        if (buf_reserve(&t->out, BODY_PIECE + 16)) {
            *why = UF_SEND;
            return -1;
        }
        size_t at = t->out.len;
        ssize_t n = req_try_body(r, t->out.data + at + (chunked ? 8 : 0), BODY_PIECE);
        if (n == REQ_AGAIN)
            break;
        if (n < 0) {
            *why = UF_NONE;          /* the client is gone */
            return -1;
        }
        x->body_started |= n > 0;
        if (n == 0) {
            x->body_open = false;
            if (chunked)
                buf_append(&t->out, "0\r\n\r\n", 5);
        } else if (chunked) {
            char size[24];
            snprintf(size, sizeof size, "%06zx\r\n", (size_t)n);
            memcpy(t->out.data + at, size, 8);
            t->out.len = at + 8 + (size_t)n;
            buf_append(&t->out, "\r\n", 2);
        } else {
            t->out.len = at + (size_t)n;
        }
    }
    if (!x->body_open && !x->send_failed && !transport_pending(t))
        x->request_sent = true;
    /* Just sent, with nothing read and waiting: the answer cannot be here yet (a read
     * would say EAGAIN, a system call per request); readiness says when it is. */
    bool try_read = !(sent && x->rx.len == 0 && !transport_holds_input(t));
    for (;;) {
        size_t used;
        int ev = h1resp_parse(&x->resp, x->rx.data + x->rx_off, x->rx.len - x->rx_off, &used);
        x->rx_off += used;
        if (ev == UPSTREAM_ERROR) {
            *why = UF_INVALID;
            return -1;
        }
        if (ev == UPSTREAM_END)
            return 1;
        if (ev == UPSTREAM_HEAD) {
            if (got_head(x, why))
                return -1;
            continue;
        }
        if (ev == UPSTREAM_BODY) {
            if (req_write(r, x->resp.body, x->resp.body_len)) {
                *why = UF_NONE;      /* the client went away: the body is unfinished */
                return -1;
            }
            continue;
        }
        if (x->rx_off == x->rx.len)
            x->rx.len = x->rx_off = 0;
        if (!try_read)
            break;
        ssize_t n;
        size_t room;
        if (!x->rx.len && body_to_output(x)) {
            n = read_body_into_output(x, t, &room, why);
            if (n < -1)
                return -1;
            if (n > 0) {
                try_read = !transport_drained(t, n, room);
                continue;
            }
        } else {
            if (buf_reserve(&x->rx, UPSTREAM_READ)) {
                *why = UF_INVALID;
                return -1;
            }
            room = x->rx.cap - x->rx.len;
            n = transport_read(t, x->rx.data + x->rx.len, room);
            if (n > 0) {
                x->rx.len += (size_t)n;
                try_read = !transport_drained(t, n, room);   /* a short read took all there was */
                continue;
            }
        }
        if (n < 0) {
            int e = errno;
            if (!e && h1resp_eof(&x->resp) == UPSTREAM_END)
                return 1;
            *why = !x->resp.head_done && x->send_failed ? (enum upstream_failure)x->send_failed
                   : e == ECONNRESET                     ? UF_RESET
                                                         : UF_CLOSED;
            if (*why != x->send_failed)
                x->err = (uint8_t)e; /* (else the send's, kept when it failed) */
            return -1;
        }
        break;                       /* nothing more now */
    }
    /* The upstream has nothing more for now: what it sent goes out through the compressor
     * (when the response is compressed), an event or a long poll's answer whole, not held
     * until more comes. */
    if (req_flush_point(r)) {
        *why = UF_NONE;
        return -1;
    }
    bool pending = !x->send_failed && transport_pending(t);
    *events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (x->body_open && !pending ? REQ_BODY : 0);
    return 0;
}

/* ---- the client's side ---- */

/* The one error-log line of a failed attempt - a warning when another server is tried
 * next - and, for the last, its cause for the access log: the client, the request, the
 * server (the group when none could be picked), and what happened in which phase. */
static PARKED_APART void report(struct exchange *x, enum upstream_failure why, bool retrying)
{
    struct request *r = x->r;
    enum upstream_phase phase = UP_NONE;
    if (why == UF_CONNECT || why == UF_CONNECT_TIMEOUT || why == UF_TLS)
        phase = UP_CONNECT;
    else if (x->resp.upgraded)
        phase = UP_TUNNEL;
    else if (why == UF_SEND || why == UF_SEND_TIMEOUT)
        phase = UP_SEND;
    else if (why != UF_NOLIVE && why != UF_BUSY)
        phase = x->resp.head_done ? UP_BODY : UP_HEADER;
    struct upstream_fault f = { why, phase, x->err, x->detail ? x->detail : why == UF_INVALID ? x->resp.error : NULL,
                                x->pc };
    char cause[600];
    size_t n = upstream_cause(&f, cause, sizeof cause);
    const struct upstream_group *g = x->pc->group;
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
    struct request *r = x->r;
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
static int respond(struct exchange *x)
{
    struct request *r = x->r;
    struct upstream_response *p = &x->resp;
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
    if (!rc && x->ws_key[0] && p->upgraded && (accepts != 1 || !websocket_accepts(x->ws_key, accept))) {
        p->error = "upstream's Sec-WebSocket-Accept does not answer the handshake's key";
        rc = -2;
    }
    if (!rc && x->ws_key[0] && p->upgraded && (!upgrade || strcasecmp(upgrade, "websocket"))) {
        p->error = "upstream switched to a protocol other than websocket";
        rc = -2;
    }
    if (!rc && x->ws_key[0] && !p->upgraded && p->status / 100 == 2) {
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
            if (x->ws_key[0])
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
    vl = cat(via_text, vl, sizeof via_text - 1, x->h2 ? "2.0 h2park" : "1.1 h2park", 10);
    via_text[vl] = 0;
    h[n++] = (struct header){ "via", via_text };
    int64_t length = p->length >= 0 ? p->length : BODY_STREAM;
    if (p->status == 204 || p->status == 304 || (x->h2 && p->complete && p->length < 0))
        length = BODY_NONE;        /* h2c: a head that ended the stream (gRPC's trailers-only) */
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

/* After a 101: the client's bytes up, the upstream's down, as they come, until the
 * upstream closes (the client's close is passed on as a half-close, and the upstream has
 * the last word).  Each wait is the request's; silence both ways for read_timeout ends
 * it, as nginx.  0 when the upstream closed, -1 on a failure (*why; UF_NONE: the client
 * went). */
static PARKED_APART int tunnel(struct exchange *x, enum upstream_failure *why)
{
    struct request *r = x->r;
    struct transport *t = &x->uc->t;
    bool client_open = true;
    for (;;) {
        if (x->rx_off < x->rx.len) {
            if (req_write(r, x->rx.data + x->rx_off, x->rx.len - x->rx_off)) {
                *why = UF_NONE;
                return -1;
            }
            x->rx.len = x->rx_off = 0;
        }
        if (transport_pending(t)) {
            uint64_t moved;
            int f = transport_flush(t, &moved);
            if (f < 0) {
                x->err = (uint8_t)errno;
                *why = errno == ECONNRESET ? UF_RESET : UF_SEND;
                return -1;
            }
        }
        if (client_open && !transport_pending(t)) {
            if (buf_reserve(&t->out, BODY_PIECE)) {
                *why = UF_SEND;
                return -1;
            }
            ssize_t n = req_try_body(r, t->out.data, BODY_PIECE);
            if (n > 0) {
                t->out.len = (size_t)n;
                continue;
            }
            if (n == 0) {
                client_open = false;
                shutdown(t->fd, SHUT_WR);
            } else if (n != REQ_AGAIN) {
                *why = UF_NONE;
                return -1;
            }
            if (!t->out.len)
                buf_free(&t->out);
        }
        x->rx.len = x->rx_off = 0;      /* all of it went to the client above */
        if (buf_reserve(&x->rx, UPSTREAM_READ)) {
            *why = UF_INVALID;
            return -1;
        }
        ssize_t n = transport_read(t, x->rx.data, x->rx.cap);
        if (n > 0) {
            x->rx.len = (size_t)n;
            continue;
        }
        /* (An empty buffer goes if the handler parks.) */
        if (n < 0) {
            if (!errno)
                return 0;
            x->err = (uint8_t)errno;
            *why = errno == ECONNRESET ? UF_RESET : UF_CLOSED;
            return -1;
        }
        bool pending = transport_pending(t);
        int events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (client_open && !pending ? REQ_BODY : 0);
        int w = req_wait_io(r, &x->uc->watch, events, pending ? x->pc->send_timeout : x->pc->read_timeout);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : pending ? UF_SEND_TIMEOUT : UF_READ_TIMEOUT;
            return -1;
        }
    }
}

/* One try on server x->sc: 0 answered (the response went to the client, whole or
 * cut short), -1 failed before any of it with *why, *retry whether another may be tried. */
static int attempt(struct exchange *x, struct buf *head, bool chunked, enum upstream_failure *why, bool *retry)
{
    struct request *r = x->r;
    struct req_upstream *u = req_upstream(r);
    *retry = false;
    /* A request that could not go again were the connection found closed after it was
     * sent has the socket asked first; another one is retried on a fresh connection. */
    bool once = !idempotent(req_method(r)) || chunked || req_content_length(r) > 0;
    x->uc = upstream_take(x->sc, x->pc->tls, req_now(r), x->h2, once);
    x->reused = x->uc != NULL;
    x->err = 0;
    sc_free(x->detail);
    x->detail = NULL;
    if (!x->uc) {
        x->uc = upstream_connect(r, x->sc, x->pc->tls, x->pc->connect_timeout, why, &x->detail);
        if (!x->uc) {
            *retry = *why != UF_NONE;    /* nothing was sent: any request may go elsewhere */
            return -1;
        }
    }
    if (u && u->connect_time < 0)
        u->connect_time = req_now(r) - x->started;
    if (x->h2 && !x->uc->h2 && h2up_open(x->uc, req_config(r)->max_header_list_size)) {
        *why = UF_SEND;
        goto failed;
    }
    h1resp_free(&x->resp);
    h1resp_init(&x->resp, req_is_head(r), x->upgrade != NULL, req_config(r)->max_header_list_size);
    x->rx.len = x->rx_off = 0;
    x->body_open = !x->upgrade && (chunked || req_content_length(r) > 0);   /* after a 101: the tunnel's */
    x->request_sent = false;
    x->send_failed = 0;
    if (x->h2) {
        x->body_started = x->body_open;   /* nghttp2 takes the body as the window opens: never sent twice */
        if (h2up_submit(x->uc, r, head, &x->resp)) {
            *why = UF_SEND;
            goto failed;
        }
    } else if (!x->uc->t.out.len) {
        buf_free(&x->uc->t.out);
        x->uc->t.out = *head;        /* the head goes as it is; a next try builds its own */
        x->uc->t.out_off = 0;
        *head = (struct buf){ 0 };
    } else if (buf_append(&x->uc->t.out, head->data, head->len)) {
        *why = UF_SEND;
        goto failed;
    }
    for (;;) {
        int events = 0, p = x->h2 ? pump_h2(x, &events, why) : pump(x, chunked, &events, why);
        if (p > 0)
            break;
        if (p < 0)
            goto failed;
        /* Each way has its deadline: the upstream's to take the request, to answer; a
         * client slow with its body has the request's own (body_timeout). */
        double limit = events & REQ_WRITABLE ? x->pc->send_timeout : events & REQ_BODY ? 0 : x->pc->read_timeout;
        int w = req_wait_io(r, &x->uc->watch, events, limit);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : events & REQ_WRITABLE ? UF_SEND_TIMEOUT : UF_READ_TIMEOUT;
            goto failed;
        }
    }
    if (x->resp.upgraded) {
        int tr = tunnel(x, why);
        upstream_done(x->uc, false, req_now(r));
        x->uc = NULL;
        if (u)
            u->response_time = req_now(r) - x->started;
        if (tr == 0) {
            req_end(r);
        } else if (*why != UF_NONE) {
            fail(x, *why);           /* the tunnel is cut: the client's connection closes */
            *why = UF_NONE;
        }
        return 0;
    }
    req_end(r);
    if (u)
        u->response_time = req_now(r) - x->started;
    /* Reused only after a complete exchange both ways with nothing more on the wire: bytes
     * after the response's end are an upstream answering twice, and would be the next
     * client's response. */
    bool reusable = x->h2 ? h2up_reusable(x->uc) : x->resp.keep_alive && x->request_sent && x->rx_off == x->rx.len;
    h2up_end_exchange(x->uc);
    upstream_done(x->uc, reusable, req_now(r));
    x->uc = NULL;
    return 0;
failed:
    if (x->uc) {
        h2up_end_exchange(x->uc);
        upstream_done(x->uc, false, req_now(r));
        x->uc = NULL;
    }
    if (*why == UF_NONE || x->responded)
        return -1;
    *retry = !x->body_started && idempotent(req_method(r));
    return -1;
}

void proxy_pass_handle(struct request *r)
{
    const struct proxy_conf *pc = req_location(r)->proxy;
    const struct upstream_group *g = pc->group;
    struct exchange *x = sc_calloc(1, sizeof *x);
    struct buf head = { 0 };
    bool chunked;
    /* WebSocket is the one upgrade passed on: another protocol is not known to be one a
     * byte tunnel carries faithfully (h2c is the front end's own). */
    const char *upgrade = req_upgrade(r);
    if (upgrade && (!http_list_has(upgrade, "websocket") || pc->h2))
        upgrade = NULL;            /* (an HTTP/2 upstream would need RFC 8441's CONNECT too) */
    bool h2 = strcmp(req_protocol(r), "http/1.1") != 0;
    if (h2 && !strcmp(req_method(r), "CONNECT") && (!upgrade || strcmp(upgrade, "websocket"))) {
        sc_free(x);                /* an extended CONNECT for a protocol no upstream is asked for */
        app_error_text(r, 501, "501 Not Implemented\n");
        return;
    }
    if (x && h2 && upgrade && websocket_key(x->ws_key)) {
        sc_free(x);
        x = NULL;
    }
    int built = x ? build_head(r, pc, upgrade, x->ws_key, &head, &chunked) : -1;
    if (built) {
        sc_free(x);
        buf_free(&head);
        if (built == -2) {
            app_error_text(r, 431, "431 Request Header Fields Too Large\n");
        } else if (built == -3) {
            static _Thread_local time_t logged;   /* a client can send loops as fast as it likes */
            log_rate_limited(LOG_ERROR, &logged,
                             "%s: %s %s: proxy loop: the request came back to this server (its Via carries %s)",
                             req_peer(r), req_method(r), req_target(r), via_mark);
            app_error_text(r, 508, "508 Loop Detected: the request came back to this server\n");
        } else {
            app_error_text(r, 500, "500 Internal Server Error\n");
        }
        return;
    }
    x->r = r;
    req_park_frees(r, &x->rx);
    x->pc = pc;
    x->upgrade = upgrade;
    x->h2 = pc->h2;
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
        if (!head.len && build_head(r, pc, upgrade, x->ws_key, &head, &chunked)) {
            app_error_text(r, 500, "500 Internal Server Error\n");
            break;
        }
        if (attempt(x, &head, chunked, &why, &retry) == 0)
            break;
        if (why == UF_NONE) {
            if (x->responded)
                req_abort(r);
            break;                   /* the client is gone */
        }
        /* A kept-alive connection the server closed meanwhile fails at once and says
         * nothing of the server's health: the same server again, on a fresh connection. */
        if (x->reused && !x->resp.head_done && why != UF_READ_TIMEOUT && why != UF_SEND_TIMEOUT && retry &&
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
    h1resp_free(&x->resp);
    buf_free(&x->rx);
    buf_free(&head);
    sc_free(x);
}

const struct route proxy_pass_route = { "proxy_pass", NULL, 0, proxy_pass_handle, true };
