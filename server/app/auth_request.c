/* auth_request: before a request is served or proxied, ask an authentication server
 * (nginx's auth_request, Caddy's forward_auth).
 *
 * auth_request = /auth names a location of the same site whose proxy_pass is the
 * authentication server (config.c checks it: HTTP/1.1, not the protected location), so
 * the subrequest goes through that location's upstream group - its balancing, keep-alive
 * pool, TLS settings, passive health and proxy_*_timeout - with upstream.c's client and
 * h1resp.c's parser, as h1client.c does for proxy_pass.  The subrequest is a GET of the named URI (with
 * proxy_pass's path put in place of the location's, as proxy_pass does) carrying the
 * client's fields but the hop-by-hop and framing ones, and no body, plus the original
 * request as X-Original-Method and X-Original-URI (nginx's usual lines) and
 * X-Forwarded-Method, -Proto, -Host, -Uri and -For (Caddy's and Traefik's).
 *
 * Its answer, which is hostile input too: a 2xx lets the request through, with the fields
 * auth_request_copy_headers names copied from it into the request - in place of any the
 * client sent of those names, which are removed when the answer has none, so a client
 * cannot make up its own X-User; a 401 or a 403 goes to the client (a 401 with the
 * server's WWW-Authenticate fields), and any other status is a 500, as nginx's.  A server
 * that cannot be reached or answers no valid HTTP is a 500; one that does not answer
 * within its location's proxy_read_timeout (all of the answer: a server that trickles it
 * gains nothing) a 504.  The answer's body is read and dropped, up to BODY_KEPT_MAX, so
 * the connection can go back to the pool; past that it is closed.
 *
 * What a waiting subrequest holds is heap state (struct subrequest, its connection and read
 * buffer, the request's extra), so the handler parks while the server thinks. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "config.h"
#include "log.h"
#include "scalloc.h"
#include "upstream/upstream.h"

#define READ_PIECE (16u << 10)
#define BODY_KEPT_MAX (64u << 10)  /* of an answer's body, read to keep the connection */
#define FIELDS_MAX 128
#define STALE_RETRIES 3            /* pooled connections found closed, per subrequest */
#define CHALLENGES_MAX 4           /* WWW-Authenticate fields of a 401 passed on */

struct subrequest {
    struct request *r;
    const struct proxy_conf *pc;
    const struct upstream_server_conf *sc;
    struct upstream_conn *uc;
    struct upstream_response resp;
    struct buf rx;
    size_t rx_off;
    uint64_t body_seen;
    double deadline;               /* for all of the answer */
    bool reused;
    uint8_t err;                   /* the errno of a failed call, or 0 */
    char *detail;                  /* a failed connect's or handshake's words, or NULL */
};

static int put(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }
static int put_field(struct buf *b, const char *name, const char *value)
{
    return put(b, name) || put(b, ": ") || put(b, value) || put(b, "\r\n");
}

/* A client's field that does not go to the authentication server: the hop-by-hop ones,
 * the body's framing (there is no body), and those the subrequest sets itself. */
static bool not_passed(const char *name)
{
    static const char *const names[] = { "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding",
                                         "upgrade", "http2-settings", "content-length", "expect", "host",
                                         "x-original-method", "x-original-uri", "x-forwarded-method",
                                         "x-forwarded-proto", "x-forwarded-host", "x-forwarded-uri",
                                         "x-forwarded-for", "cookie" };
    if (name[0] == ':')
        return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

/* The subrequest's head: -1 without memory. */
static int build_head(struct request *r, const struct auth_conf *a, struct buf *head)
{
    const struct location *al = a->request;
    const struct proxy_conf *pc = al->proxy;
    struct header h[FIELDS_MAX];
    size_t n = req_headers(r, h, FIELDS_MAX);
    const char *authority = req_authority(r), *uri = a->request_uri;
    int rc = put(head, "GET ");
    /* proxy_pass's path in place of the location's, as proxy_pass does (the URI is the
     * location's path or under it: config.c found the location by it). */
    if (pc->uri[0] && strlen(uri) >= al->path_len)
        rc = rc || put(head, pc->uri) || put(head, uri + al->path_len);
    else
        rc = rc || put(head, uri);
    rc = rc || put(head, " HTTP/1.1\r\n") ||
         put_field(head, "Host", pc->host[0] ? pc->host : *authority ? authority : pc->group->servers[0].text);
    struct buf connection = { 0 };
    for (size_t i = 0; i < n && !rc; i++)
        if (!strcmp(h[i].name, "connection"))
            rc = put(&connection, h[i].value) || put(&connection, ",");
    rc = rc || buf_append(&connection, "", 1);
    bool cookies = false;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!strcmp(h[i].name, "cookie")) {   /* an HTTP/2 client's, joined (RFC 9113 8.2.3) */
            rc = put(head, cookies ? "; " : "Cookie: ") || put(head, h[i].value);
            cookies = true;
        }
    }
    rc = rc || (cookies && put(head, "\r\n"));
    for (size_t i = 0; i < n && !rc; i++)
        if (!not_passed(h[i].name) && !http_list_has(connection.data, h[i].name))
            rc = put_field(head, h[i].name, h[i].value);
    buf_free(&connection);
    const char *client = req_peer_address(r);
    rc = rc || put_field(head, "X-Original-Method", req_method(r)) || put_field(head, "X-Original-URI", req_target(r)) ||
         put_field(head, "X-Forwarded-Method", req_method(r)) || put_field(head, "X-Forwarded-Proto", req_scheme(r)) ||
         (*authority && put_field(head, "X-Forwarded-Host", authority)) ||
         put_field(head, "X-Forwarded-Uri", req_target(r)) || put_field(head, "X-Forwarded-For", client);
    if (!pc->group->servers[0].keepalive)
        rc = rc || put_field(head, "Connection", "close");
    return rc || put(head, "\r\n");
}

/* Sends head and reads the answer's head and body on x->uc: 0 with x->resp complete (or
 * its body past BODY_KEPT_MAX: then the connection is not kept), -1 with *why. */
static int exchange(struct subrequest *x, const struct buf *head, enum upstream_failure *why)
{
    struct request *r = x->r;
    struct transport *t = &x->uc->t;
    if (buf_append(&t->out, head->data, head->len)) {
        *why = UF_SEND;
        return -1;
    }
    for (;;) {
        uint64_t moved;
        int f = transport_flush(t, &moved);
        if (f < 0) {
            x->err = (uint8_t)errno;
            *why = errno == ECONNRESET ? UF_RESET : UF_SEND;
            return -1;
        }
        if (f == 0)
            break;
        int w = req_wait_io(r, &x->uc->watch, REQ_WRITABLE, x->pc->send_timeout);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : UF_SEND_TIMEOUT;
            return -1;
        }
    }
    x->deadline = req_now(r) + x->pc->read_timeout;
    for (;;) {
        size_t used;
        int ev = h1resp_parse(&x->resp, x->rx.data + x->rx_off, x->rx.len - x->rx_off, &used);
        x->rx_off += used;
        if (ev == UPSTREAM_ERROR) {
            *why = UF_INVALID;
            return -1;
        }
        if (ev == UPSTREAM_END)
            return 0;
        if (ev == UPSTREAM_HEAD)
            continue;
        if (ev == UPSTREAM_BODY) {
            if ((x->body_seen += x->resp.body_len) > BODY_KEPT_MAX)
                return 0;          /* (not complete: the connection is closed) */
            continue;
        }
        x->rx.len = x->rx_off = 0;
        if (buf_reserve(&x->rx, READ_PIECE)) {
            *why = UF_INVALID;
            return -1;
        }
        ssize_t n = transport_read(t, x->rx.data, x->rx.cap);
        if (n > 0) {
            x->rx.len = (size_t)n;
            continue;
        }
        if (n < 0) {
            int e = errno;
            if (!e && h1resp_eof(&x->resp) == UPSTREAM_END)
                return 0;
            x->err = (uint8_t)e;
            *why = e == ECONNRESET ? UF_RESET : UF_CLOSED;
            return -1;
        }
        double left = x->deadline - req_now(r);
        int w = left > 0 ? req_wait_io(r, &x->uc->watch, REQ_READABLE, left) : 0;
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : UF_READ_TIMEOUT;
            return -1;
        }
    }
}

/* One try on x->sc: 0 with x->resp's status, -1 with *why. */
static int attempt(struct subrequest *x, const struct buf *head, enum upstream_failure *why)
{
    struct request *r = x->r;
    x->err = 0;
    sc_free(x->detail);
    x->detail = NULL;
    x->uc = upstream_take(x->sc, x->pc->tls, req_now(r), false, false);
    x->reused = x->uc != NULL;
    if (!x->uc && !(x->uc = upstream_connect(r, x->sc, x->pc->tls, x->pc->connect_timeout, why, &x->detail)))
        return -1;
    h1resp_free(&x->resp);
    h1resp_init(&x->resp, false, false, req_config(r)->max_header_list_size);
    x->rx.len = x->rx_off = 0;
    x->body_seen = 0;
    int rc = exchange(x, head, why);
    bool reusable = rc == 0 && x->resp.complete && x->resp.keep_alive && x->rx_off == x->rx.len;
    upstream_done(x->uc, reusable, req_now(r));
    x->uc = NULL;
    return rc;
}

/* The one error-log line of a failure, in proxy_pass's words. */
static void report(struct subrequest *x, const struct auth_conf *a, enum upstream_failure why)
{
    struct request *r = x->r;
    enum upstream_phase phase = why == UF_CONNECT || why == UF_CONNECT_TIMEOUT || why == UF_TLS ? UP_CONNECT
                                : why == UF_SEND || why == UF_SEND_TIMEOUT                     ? UP_SEND
                                : why == UF_NOLIVE || why == UF_BUSY                           ? UP_NONE
                                : x->resp.head_done                                            ? UP_BODY
                                                                                               : UP_HEADER;
    struct upstream_fault f = { why, phase, x->err, x->detail ? x->detail : why == UF_INVALID ? x->resp.error : NULL,
                                x->pc };
    char cause[600];
    upstream_cause(&f, cause, sizeof cause);
    const struct upstream_group *g = x->pc->group;
    log_msg(LOG_ERROR, "%s: %s %s: auth_request %s: upstream %s: %s", req_peer(r), req_method(r), req_target(r),
            a->request_uri, x->sc ? x->sc->text : g->name[0] ? g->name : g->servers[0].text, cause);
}

/* The subrequest, tried on the group's servers as proxy_pass would (a GET: any failure may
 * go to another): the answer's status in x->resp, or -1 with *why. */
static int ask(struct subrequest *x, const struct auth_conf *a, enum upstream_failure *why)
{
    struct request *r = x->r;
    const struct upstream_group *g = x->pc->group;
    struct buf head = { 0 };
    if (build_head(r, a, &head)) {
        buf_free(&head);
        *why = UF_SEND;
        return -1;
    }
    unsigned tries = x->pc->next_upstream_tries && x->pc->next_upstream_tries < g->nservers
                         ? x->pc->next_upstream_tries : (unsigned)g->nservers;
    unsigned failures = 0, stale = 0;
    uint32_t tried = 0;
    int rc = -1;
    for (;;) {
        int s = upstream_pick(g, req_now(r), tried, why);
        if (s < 0) {
            x->sc = NULL;
            break;
        }
        tried |= 1u << s;
        x->sc = &g->servers[s];
        if (attempt(x, &head, why) == 0) {
            upstream_responded(x->sc, x->resp.status);
            rc = 0;
            break;
        }
        if (*why == UF_NONE)
            break;                 /* the client is gone */
        /* A kept-alive connection the server closed meanwhile says nothing of its health. */
        if (x->reused && !x->resp.head_done && *why != UF_READ_TIMEOUT && *why != UF_SEND_TIMEOUT &&
            stale++ < STALE_RETRIES) {
            tried &= ~(1u << s);
            continue;
        }
        upstream_failed(g, x->sc, *why, req_now(r));
        if (++failures >= tries || *why == UF_READ_TIMEOUT)
            break;                 /* (a timeout has used the time the client waits for) */
    }
    buf_free(&head);
    return rc;
}

/* The answer's fields called name (lower case), up to max, into out: how many. */
static size_t answer_fields(const struct upstream_response *p, const char *name, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t off = 0; off < p->fields.len && n < max;) {
        const char *f = p->fields.data + off, *v = f + strlen(f) + 1;
        off = (size_t)(v - p->fields.data) + strlen(v) + 1;
        if (!strcmp(f, name))
            out[n++] = v;
    }
    return n;
}

static bool decide(struct subrequest *x, const struct auth_conf *a)
{
    struct request *r = x->r;
    int status = x->resp.status;
    if (status / 100 == 2) {
        for (uint8_t i = 0; i < a->ncopy; i++) {
            const char *v = NULL;
            answer_fields(&x->resp, a->copy[i], &v, 1);
            if (req_set_field(r, a->copy[i], v)) {
                app_error(r, 500);
                return false;
            }
        }
        metrics_auth(AUTH_REQUEST, AUTH_SUCCESS);
        return true;
    }
    req_set_refused_by(r, "auth_request");
    if (status == 401 || status == 403) {
        metrics_auth(AUTH_REQUEST, AUTH_FAILURE);
        const char *v[CHALLENGES_MAX];
        struct header h[CHALLENGES_MAX];
        size_t n = status == 401 ? answer_fields(&x->resp, "www-authenticate", v, CHALLENGES_MAX) : 0;
        for (size_t i = 0; i < n; i++)
            h[i] = (struct header){ "www-authenticate", v[i] };
        app_error_fields(r, status, status == 401 ? "401 Unauthorized\n" : "403 Forbidden\n", h, n);
        return false;
    }
    metrics_auth(AUTH_REQUEST, AUTH_ERROR);
    log_msg(LOG_ERROR, "%s: %s %s: auth_request %s: upstream %s answered %d: neither 2xx, 401 nor 403", req_peer(r),
            req_method(r), req_target(r), a->request_uri, x->sc->text, status);
    app_error(r, 500);
    return false;
}

bool auth_request_allows(struct request *r, const struct auth_conf *a)
{
    struct subrequest *x = sc_calloc(1, sizeof *x);
    if (!x) {
        app_error(r, 500);
        return false;
    }
    x->r = r;
    x->pc = a->request->proxy;
    req_park_frees(r, &x->rx);
    enum upstream_failure why = UF_NONE;
    bool allowed = false;
    if (ask(x, a, &why) == 0) {
        allowed = decide(x, a);
    } else if (why != UF_NONE) {
        report(x, a, why);
        req_set_refused_by(r, "auth_request");
        metrics_auth(AUTH_REQUEST, AUTH_ERROR);
        app_error(r, why == UF_READ_TIMEOUT || why == UF_CONNECT_TIMEOUT || why == UF_SEND_TIMEOUT ? 504 : 500);
    }
    req_park_frees(r, NULL);
    h1resp_free(&x->resp);
    buf_free(&x->rx);
    sc_free(x->detail);
    sc_free(x);
    return allowed;
}
