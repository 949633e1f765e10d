/* The reverse proxy (proxy_pass): a request handler that passes its request to an
 * upstream server over HTTP/1.1 and its response back, streaming both ways.
 *
 * Every wait is a request-API call (req_wait_fd, req_read_body, req_write), so what a
 * waiting exchange holds is heap state - the exchange below, its upstream connection,
 * the request - and never a buffer on the handler's stack: a long poll waiting for its
 * upstream holds no read buffer either (it is freed whenever it empties).  Memory is
 * bounded per exchange: one read buffer of UPSTREAM_READ bytes, the request's output
 * (REQUEST_OUTPUT_MAX: req_write waits for the client, and so the upstream is read no
 * faster than the client takes it), and one piece of request body on its way up.
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
 * bytes both ways as they come, with the same bounds - one read buffer, freed whenever it
 * empties, and the request's output - so an idle tunnel waits holding no buffer.  Its
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
#include <sys/socket.h>

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

struct exchange {
    struct request *r;
    const struct proxy_conf *pc;   /* the request's location's */
    const struct upstream_server_conf *sc;   /* the server of this attempt, or NULL */
    const char *upgrade;           /* the client's Upgrade, passed on (websocket), or NULL */
    char ws_key[25];               /* the handshake's key, when it is the proxy's own (HTTP/2), or "" */
    struct upstream_conn *uc;
    struct h1_response resp;
    struct buf rx;                 /* read from the upstream, not yet parsed */
    size_t rx_off;
    double started;
    bool reused, request_sent, body_started, responded, body_open;
    bool h2;                       /* the upstream speaks HTTP/2 (upstream/h2client.c) */
    uint8_t send_failed;           /* the upstream stopped taking the request: why */
};

/* RFC 9110 7.6.1's hop-by-hop fields, and those Connection names (connection: the
 * values of every Connection field of the message, joined as one list). */
static bool hop_by_hop(const char *name, const char *connection)
{
    static const char *const fields[] = { "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding",
                                          "upgrade", "http2-settings" };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!strcmp(name, fields[i]))
            return true;
    return connection && http_list_has(connection, name);
}

static bool idempotent(const char *m)
{
    return !strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS") || !strcmp(m, "PUT") ||
           !strcmp(m, "DELETE") || !strcmp(m, "TRACE");
}

static int put(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }
static int put_field(struct buf *b, const char *name, const char *value)
{
    return put(b, name) || put(b, ": ") || put(b, value) || put(b, "\r\n");
}

/* The rest of a decoded path, escaped again for a request line: what is not a path
 * character (RFC 3986 3.3) goes as %XX, '%' among them. */
static int put_path_escaped(struct buf *b, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *c = (const unsigned char *)path; *c && !rc; c++) {
        if (isalnum(*c) || strchr("-._~!$&'()*+,;=:@/", *c))
            rc = buf_append(b, (const char *)c, 1);
        else
            rc = buf_append(b, (char[]){ '%', hex[*c >> 4], hex[*c & 15] }, 3);
    }
    return rc;
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
    if (list->len)
        list->len--;               /* the terminator */
    return join(list, value, ", ") || buf_append(list, "", 1);
}

/* The request head for the upstream: the target with the location's path swapped for
 * proxy_pass's (if it gives one, as nginx), the client's fields but the hop-by-hop ones,
 * and the proxy's own; upgrade, the protocol the client asks for, asked for again - for an
 * HTTP/2 client's extended CONNECT as HTTP/1.1's handshake, with the key ws_key.
 * *chunked: the body goes with the chunked coding. */
static int build_head(struct request *r, const struct proxy_conf *pc, const char *upgrade, const char *ws_key,
                      struct buf *head, bool *chunked)
{
    const struct location *loc = req_location(r);
    struct header h[FIELDS_MAX + 1];
    size_t n = req_headers(r, h, FIELDS_MAX + 1);
    if (n > FIELDS_MAX)
        return -2;                 /* more fields than are passed on: 431, none dropped */
    struct buf connection = { 0 };
    for (size_t i = 0; i < n; i++)
        if (!strcmp(h[i].name, "connection") && add_connection(&connection, h[i].value)) {
            buf_free(&connection);
            return -1;
        }
    const char *target = req_target(r), *authority = req_authority(r);
    bool h2 = strcmp(req_protocol(r), "http/1.1") != 0;
    struct buf cookie = { 0 }, xff = { 0 }, fwd = { 0 }, via = { 0 };
    int rc = put(head, ws_key[0] ? "GET" : req_method(r)) || put(head, " ");
    if (pc->uri[0])
        rc = rc || put_replaced_target(head, pc->uri, target, loc);
    else
        rc = rc || put(head, target);
    rc = rc || put(head, " HTTP/1.1\r\n");
    rc = rc || put_field(head, "Host", pc->host[0] ? pc->host : *authority ? authority : pc->group->servers[0].text);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *name = h[i].name, *value = h[i].value;
        if (name[0] == ':' || hop_by_hop(name, connection.data) || !strcmp(name, "host") ||
            !strcmp(name, "content-length") || !strcmp(name, "expect") || !strcmp(name, "x-forwarded-proto") ||
            !strcmp(name, "x-forwarded-host") || (ws_key[0] && !strcmp(name, "sec-websocket-key")))
            continue;
        if (!strcmp(name, "cookie"))
            rc = join(&cookie, value, "; ");
        else if (!strcmp(name, "x-forwarded-for"))
            rc = join(&xff, value, ", ");
        else if (!strcmp(name, "forwarded"))
            rc = join(&fwd, value, ", ");
        else if (!strcmp(name, "via"))
            rc = join(&via, value, ", ");
        else
            rc = put_field(head, name, value);
    }
    const char *client = req_peer_address(r);
    char forwarded[700];
    bool v6 = strchr(client, ':') != NULL;
    /* RFC 7239: an IPv6 node in brackets, quoted; a host with a port quoted too. */
    snprintf(forwarded, sizeof forwarded, "for=%s%s%s;proto=%s%s%.512s%s", v6 ? "\"[" : "", client, v6 ? "]\"" : "",
             req_scheme(r), *authority ? ";host=\"" : "", authority, *authority ? "\"" : "");
    rc = rc || join(&xff, client, ", ") || join(&fwd, forwarded, ", ") || join(&via, h2 ? "2.0 h2park" : "1.1 h2park", ", ");
    rc = rc || buf_append(&cookie, "", 1) || buf_append(&xff, "", 1) || buf_append(&fwd, "", 1) || buf_append(&via, "", 1);
    if (!rc && cookie.len > 1)
        rc = put_field(head, "Cookie", cookie.data);
    rc = rc || put_field(head, "X-Forwarded-For", xff.data) || put_field(head, "X-Forwarded-Proto", req_scheme(r)) ||
         (*authority && put_field(head, "X-Forwarded-Host", authority)) || put_field(head, "Forwarded", fwd.data) ||
         put_field(head, "Via", via.data);
    buf_free(&connection);
    buf_free(&cookie);
    buf_free(&xff);
    buf_free(&fwd);
    buf_free(&via);
    *chunked = false;
    int64_t length = req_content_length(r);
    if (upgrade) {
        /* no body: the bytes after the handshake are the tunnel's */
    } else if (length >= 0) {
        char text[24];
        snprintf(text, sizeof text, "%lld", (long long)length);
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
    return rc || put(head, "\r\n");
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
    if (rs)
        *why = rs == -2 ? UF_INVALID : UF_NONE;
    return rs ? -1 : 0;
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
        const char *name = b->data + off, *value = name + strlen(name) + 1;
        off = (size_t)(value - b->data) + strlen(value) + 1;
        if (hop_by_hop(name, NULL) || !strcmp(name, "content-length"))
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

/* pump for an h2c upstream: h2client.c moves both ways and frames; this passes on what
 * it found, as pump does. */
static int pump_h2(struct exchange *x, int *events, enum upstream_failure *why)
{
    for (;;) {
        int ev = h2up_step(x->uc, events, why);
        if (ev == H1RESP_MORE)
            return 0;
        if (ev == H1RESP_ERROR)
            return -1;
        if (ev == H1RESP_HEAD && got_head(x, why))
            return -1;
        if (ev == H1RESP_BODY && req_write(x->r, x->resp.body, x->resp.body_len)) {
            *why = UF_NONE;
            return -1;
        }
        if (ev == H1RESP_END) {
            x->request_sent = true;
            return end_with_trailers(x, why) ? -1 : 1;
        }
    }
}

/* Moves what can move without waiting, both ways at once - the request up (its head,
 * then body as it arrives), the response in and on to the client - since an upstream
 * may answer while the body still comes (an echo, an early 413) and would stop reading
 * it once its own output is stuck.  1: the response is complete; 0: wait for *events;
 * -1: failed (*why).  Writing to the client waits for it (req_write): a slow client
 * slows the upstream. */
static int pump(struct exchange *x, bool chunked, int *events, enum upstream_failure *why)
{
    struct request *r = x->r;
    struct transport *t = &x->uc->t;
    for (;;) {
        if (!x->send_failed && transport_pending(t)) {
            uint64_t moved;
            int f = transport_flush(t, &moved);
            if (f < 0) {
                /* What the upstream said before it stopped reading is still read. */
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
    for (;;) {
        size_t used;
        int ev = h1resp_parse(&x->resp, x->rx.data + x->rx_off, x->rx.len - x->rx_off, &used);
        x->rx_off += used;
        if (ev == H1RESP_ERROR) {
            *why = UF_INVALID;
            return -1;
        }
        if (ev == H1RESP_END)
            return 1;
        if (ev == H1RESP_HEAD) {
            if (got_head(x, why))
                return -1;
            continue;
        }
        if (ev == H1RESP_BODY) {
            if (req_write(r, x->resp.body, x->resp.body_len)) {
                *why = UF_NONE;      /* the client went away: the body is unfinished */
                return -1;
            }
            continue;
        }
        if (x->rx_off == x->rx.len)
            x->rx.len = x->rx_off = 0;
        if (buf_reserve(&x->rx, UPSTREAM_READ)) {
            *why = UF_INVALID;
            return -1;
        }
        ssize_t n = transport_read(t, x->rx.data + x->rx.len, x->rx.cap - x->rx.len);
        if (n > 0) {
            x->rx.len += (size_t)n;
            continue;
        }
        if (n < 0) {
            int e = errno;
            if (!e && h1resp_eof(&x->resp) == H1RESP_END)
                return 1;
            *why = !x->resp.head_done && x->send_failed ? (enum upstream_failure)x->send_failed
                   : e == ECONNRESET                     ? UF_RESET
                                                         : UF_CLOSED;
            return -1;
        }
        break;                       /* nothing more now */
    }
    if (x->rx.len == 0)
        buf_free(&x->rx);            /* a long poll waits holding no buffer */
    bool pending = !x->send_failed && transport_pending(t);
    *events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (x->body_open && !pending ? REQ_BODY : 0);
    return 0;
}

/* ---- the client's side ---- */

static void fail(struct exchange *x, enum upstream_failure why)
{
    struct request *r = x->r;
    struct req_upstream *u = req_upstream(r);
    const char *cause = why == UF_INVALID && x->resp.error ? x->resp.error : upstream_failure_text[why];
    if (u)
        snprintf(u->error, sizeof u->error, "%s", cause);   /* x, and the text, go before the log line */
    log_msg(LOG_ERROR, "%s: %s %s: upstream %s: %s", req_peer(r), req_method(r), req_target(r),
            x->sc ? x->sc->text : "-", cause);
    if (x->responded) {
        req_abort(r);                /* the response began: the client must see it cut short */
        return;
    }
    int status = upstream_failure_status(why);
    reply_text(r, status, status == 504 ? "504 Gateway Timeout\n" : status == 503 ? "503 Service Unavailable\n"
                                                                                 : "502 Bad Gateway\n");
}

/* The response head for the client: the upstream's fields but the hop-by-hop ones and
 * those the front end writes itself, and Via. */
static int respond(struct exchange *x)
{
    struct request *r = x->r;
    struct h1_response *p = &x->resp;
    struct header h[REQ_RESPONSE_FIELDS_MAX];
    size_t n = 0;
    const char *via = NULL, *upgrade = NULL, *accept = NULL;
    unsigned accepts = 0;
    struct buf connection = { 0 };
    int rc = 0;
    for (size_t off = 0; off < p->fields.len && !rc;) {
        const char *name = p->fields.data + off, *value = name + strlen(name) + 1;
        off = (size_t)(value - p->fields.data) + strlen(value) + 1;
        if (!strcmp(name, "connection"))
            rc = add_connection(&connection, value);
        else if (!strcmp(name, "upgrade"))
            upgrade = value;
        else if (!strcmp(name, "sec-websocket-accept"))
            accept = value, accepts++;
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
    for (size_t off = 0; off < p->fields.len;) {
        const char *name = p->fields.data + off, *value = name + strlen(name) + 1;
        off = (size_t)(value - p->fields.data) + strlen(value) + 1;
        if (hop_by_hop(name, connection.data) || !strcmp(name, "content-length") || !strcmp(name, "date") ||
            !strcmp(name, "server") || (x->ws_key[0] && !strcmp(name, "sec-websocket-accept")))
            continue;
        if (!strcmp(name, "via")) {
            via = value;
            continue;
        }
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
    snprintf(via_text, sizeof via_text, "%.480s%s%s h2park", via ? via : "", via ? ", " : "", x->h2 ? "2.0" : "1.1");
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
static int tunnel(struct exchange *x, enum upstream_failure *why)
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
        if (buf_reserve(&x->rx, UPSTREAM_READ)) {
            *why = UF_INVALID;
            return -1;
        }
        ssize_t n = transport_read(t, x->rx.data, x->rx.cap);
        if (n > 0) {
            x->rx.len = (size_t)n;
            x->rx_off = 0;
            continue;
        }
        buf_free(&x->rx);            /* an idle tunnel holds no buffer */
        x->rx_off = 0;
        if (n < 0) {
            if (!errno)
                return 0;
            *why = errno == ECONNRESET ? UF_RESET : UF_CLOSED;
            return -1;
        }
        bool pending = transport_pending(t);
        int events = REQ_READABLE | (pending ? REQ_WRITABLE : 0) | (client_open && !pending ? REQ_BODY : 0);
        int w = req_wait_fd(r, t->fd, events, pending ? x->pc->send_timeout : x->pc->read_timeout);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : pending ? UF_SEND_TIMEOUT : UF_READ_TIMEOUT;
            return -1;
        }
    }
}

/* One try on server x->sc: 0 answered (the response went to the client, whole or
 * cut short), -1 failed before any of it with *why, *retry whether another may be tried. */
static int attempt(struct exchange *x, const struct buf *head, bool chunked, enum upstream_failure *why, bool *retry)
{
    struct request *r = x->r;
    struct req_upstream *u = req_upstream(r);
    *retry = false;
    x->uc = upstream_take(x->sc, x->pc->tls, req_now(r), x->h2);
    x->reused = x->uc != NULL;
    if (!x->uc) {
        x->uc = upstream_connect(r, x->sc, x->pc->tls, x->pc->connect_timeout, why);
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
    x->body_open = chunked || req_content_length(r) > 0;
    x->request_sent = false;
    x->send_failed = 0;
    if (x->h2) {
        x->body_started = x->body_open;   /* nghttp2 takes the body as the window opens: never sent twice */
        if (h2up_submit(x->uc, r, head, &x->resp)) {
            *why = UF_SEND;
            goto failed;
        }
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
        int w = req_wait_fd(r, x->uc->t.fd, events, limit);
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
        reply_text(r, 501, "501 Not Implemented\n");
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
        if (built == -2)
            reply_text(r, 431, "431 Request Header Fields Too Large\n");
        else
            reply_text(r, 500, "500 Internal Server Error\n");
        return;
    }
    x->r = r;
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
            snprintf(u->addr, sizeof u->addr, "%s", x->sc->text);
            u->tries++;
        }
        bool retry;
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
        log_msg(LOG_WARN, "%s: %s %s: upstream %s: %s; trying another", req_peer(r), req_method(r), req_target(r),
                x->sc->text, why == UF_INVALID && x->resp.error ? x->resp.error : upstream_failure_text[why]);
    }
    h1resp_free(&x->resp);
    buf_free(&x->rx);
    buf_free(&head);
    sc_free(x);
}

const struct route proxy_pass_route = { "proxy_pass", NULL, 0, proxy_pass_handle, true };
