/* The HTTP/1.1 front end: llhttp parses (Node's parser, compiled from Debian's
 * node-llhttp sources), this file turns its callbacks into requests and their responses
 * into bytes.
 *
 * One request at a time per connection, answered in order: when a message is complete
 * the parser pauses until its response has gone, so pipelined requests wait in conn->in
 * (at most H1_IN_MAX bytes; past that the connection stops reading).  A request body is
 * handed to the handler as it comes, at most H1_BODY_MAX bytes ahead of it: the parser
 * is fed no more than the room left, and the connection stops reading meanwhile - the
 * TCP window is HTTP/1.1's flow control.  A response whose length is known goes out with
 * Content-Length, one written piece by piece chunked (close-delimited for HTTP/1.0).
 * A response that is complete before its request body closes the connection if the body
 * may never come (Expect: 100-continue unanswered), else the rest of the body is read
 * and dropped (H1_DISCARD_MAX at most).
 *
 * Between requests the connection holds no parser and no buffer: the state below is
 * allocated when bytes arrive and freed when a response is done with nothing queued,
 * so an idle keep-alive connection is its struct conn alone, and it parks.
 *
 * The request line (RFC 9112 section 3): origin-form, absolute-form (its authority is
 * the request's, Host still required and checked, 3.2.2) and OPTIONS *; HTTP/1.x with x
 * above 1 is answered as HTTP/1.1, another major version gets 505, a line with no
 * version (HTTP/0.9) 400.  Trailers are checked and bounded like the head's fields and
 * then dropped: never merged into the head (RFC 9110 section 6.5.1).
 *
 * Hostile input (RFC 9112): llhttp already refuses Transfer-Encoding with
 * Content-Length, repeated Content-Length and bad chunk sizes; this file adds what
 * llhttp lets through - a bare CR anywhere in the framing (the request line, fields,
 * chunk lines, trailers, the ends of the head and of the message: llhttp, lenient, takes
 * the byte after a CR for the LF in several of them), a chunk's data not followed by
 * CRLF (llhttp skips whichever two bytes come), obs-fold, whitespace in or before
 * a field name, control characters in a value, a missing, repeated or invalid Host, a
 * transfer coding other than chunked (501), Transfer-Encoding in HTTP/1.0 (6.1) - and
 * the limits: 431 for a head (with its trailers) over max_header_list_size or more than
 * H1_TRAILER_FIELDS trailers, 414 for a target over H1_TARGET_MAX, 408 for a head not
 * complete within preface_timeout.  Every error answers (unless the answer already
 * began: then the connection just ends), is logged in the access log like any answer,
 * and closes the connection (lingering, so the answer arrives).
 *
 * Every llhttp callback is an input path; which states each can run in (the phase, and
 * whether there is a current request, h->cur):
 *
 *   IDLE     between messages, no request
 *   HEAD     a head arriving: cur is RECEIVING
 *   BODY     cur started: its handler runs or ran, its answer is not all queued (an
 *            early answer may be on its way: cur->head_sent)
 *   WAIT     the message is complete and the parser paused: no callback runs
 *   DISCARD  answered in full before the body ended: no request, the rest is dropped
 *
 *   on_message_begin          IDLE only: a message begins only once the one before is
 *                             complete (paused in WAIT until answered, or DISCARD ->
 *                             IDLE), so pipelined requests never overlap.  -> HEAD
 *   on_url                    HEAD: the target, 414 past H1_TARGET_MAX
 *   on_version_complete       HEAD: 505 for a major version other than 1
 *   on_header_field, _value   HEAD (the head), BODY or DISCARD (trailers): bytes noted
 *                             where they lie in the input (h->field_at, value_at), or
 *                             into h->field and h->value once a read ended inside one
 *                             (spill, after every llhttp_execute), the head and trailers
 *                             together within max_header_list_size (431)
 *   on_header_value_complete  HEAD: a field checked into cur's head.  BODY or DISCARD
 *                             (F_TRAILING): checked, counted, dropped; cur is not
 *                             touched - in DISCARD there is none, in BODY its handler
 *                             points into its head
 *   on_headers_complete       HEAD only (trailers end in on_message_complete): the
 *                             request line and head judged, cur started.  -> BODY, or
 *                             the h2c upgrade, after which llhttp is not called again
 *   on_body                   BODY: to cur's handler (request_body drops it once the
 *                             handler is gone).  DISCARD: counted and dropped
 *   on_message_complete       BODY: the body's end.  -> WAIT.  DISCARD: -> IDLE, and
 *                             the next pipelined request may begin at once
 *
 * A callback that fails stops llhttp for good: error_response then closes, so nothing
 * behind the bad bytes is ever parsed. */
#define _GNU_SOURCE
#include <ctype.h>
#include <llhttp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http1_syntax.h"
#include "host.h"
#include "httpdate.h"
#include "runtime/runtime.h"
#include "proto/h1.h"
#include "proto/h2.h"
#include "scalloc.h"

#define H1_IN_MAX (64u << 10)
#define H1_BODY_MAX (64u << 10)
#define H1_DISCARD_MAX (1u << 20)
#define H1_TARGET_MAX 8192
#define H1_TRAILER_FIELDS 64
#define OUT_HIGH (64u << 10)
#define OUT_CHUNK (64u << 10)

enum h1_phase {
    H1_IDLE,        /* between messages */
    H1_HEAD,        /* a head is arriving */
    H1_BODY,        /* its handler runs; body may still arrive */
    H1_WAIT,        /* the message is complete, its response is not: parser paused */
    H1_DISCARD,     /* the response is done, the rest of the body is dropped */
    H1_TUNNEL,      /* answered 101: the client's bytes are the request's body, unparsed */
};

struct h1_request {
    struct request r;
    bool head_sent, chunked;
    bool expect_continue, continue_sent;
};

/* A piece of the head where llhttp found it, in the bytes parse() gave it (so only until
 * llhttp_execute returns: then spill() copies it into its buffer). */
struct span {
    const char *at;
    uint32_t n;
};

struct h1_conn {
    llhttp_t parser;
    struct h1_request *cur;        /* being received or answered */
    /* The field, value and target being read: in the input (span) while they lie in one
     * piece of it - a whole head in one read, the usual case, is never copied but into
     * the request - and in the buffer once a read ends inside one. */
    struct buf field, value, target;
    struct span field_at, value_at, target_at;
    uint32_t head_bytes;           /* the head's, then its trailers' too */
    uint32_t trailer_fields;
    uint16_t head_flags;           /* llhttp's flags as the head left them */
    size_t discarded;
    uint8_t phase;                 /* enum h1_phase */
    const char *exec_start;        /* the bytes llhttp is parsing now ... */
    uint64_t fed;                  /* ... start this far into the connection's input */
    const char *framing_from;      /* where in them the framing not yet checked begins */
    uint64_t vspan_end;            /* where in the input the last value span ended */
    bool version_seen;             /* the request line named a version (else HTTP/0.9) */
    bool host_seen, te_seen, close_after, upgrading;
    bool cr_last;                  /* the framing checked so far ends with a CR */
    uint8_t crlf_due;              /* bytes of the CRLF after a chunk's data still to come */
    int error;                     /* the status a bad head gets */
};

static const llhttp_settings_t parser_settings;   /* below, after its callbacks */
extern const struct request_ops h1_request_ops;

/* What a waiting HTTP/1.1 request holds beside its connection: keep it in the 512-byte class. */
_Static_assert(sizeof(struct h1_request) <= 512, "struct h1_request outgrew its size class");

static struct h1_conn *H(const struct conn *c) { return c->proto_state; }
static struct h1_request *R(struct request *r) { return container_of(r, struct h1_request, r); }

/* The status line's reason phrase: RFC 9110 section 15's, and those of the other codes
 * IANA's registry lists (WebDAV's, RFC 6585's, 451, 103, 425).  A code with none - 299, 599,
 * whatever an upstream sends - gets an empty one, as RFC 9112 4 allows and nginx does: a
 * made-up class phrase ("Server Error") would only mislead whoever reads it. */
static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 102: return "Processing";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 207: return "Multi-Status";
    case 208: return "Already Reported";
    case 226: return "IM Used";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 423: return "Locked";
    case 424: return "Failed Dependency";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 506: return "Variant Also Negotiates";
    case 507: return "Insufficient Storage";
    case 508: return "Loop Detected";
    case 511: return "Network Authentication Required";
    default: return "";
    }
}

static struct h1_conn *state(struct conn *c)
{
    struct h1_conn *h = H(c);
    if (!h && (h = sc_calloc(1, sizeof *h))) {
        llhttp_init(&h->parser, HTTP_REQUEST, &parser_settings);
        /* Any digit.digit version reaches on_version_complete, which judges it. */
        h->parser.lenient_flags |= LENIENT_VERSION;
        h->parser.data = c;
        c->proto_state = h;
    }
    return h;
}

/* Nothing in progress and nothing queued: give the memory back. */
static void h1_destroy(struct conn *c);
static void maybe_free_state(struct conn *c)
{
    struct h1_conn *h = H(c);
    if (!h || h->cur || h->phase != H1_IDLE || c->in.len)
        return;
    h1_destroy(c);
    buf_free(&c->in);
}

/* What the access log can say of a request refused before it started: the method and
 * the target as far as they came (the target made a string in its own buffer, which
 * outlives the request's closing, the only time the log reads it), and its Host. */
static void note_request_line(struct h1_conn *h, struct h1_request *r)
{
    if (r->r.state != REQ_RECEIVING || !h->target.len)
        return;
    r->r.method = llhttp_method_name((llhttp_method_t)h->parser.method);
    if (buf_append(&h->target, "", 1) == 0) {
        h->target.len--;
        r->r.target = h->target.data;
    }
    r->r.authority = req_header(&r->r, "host");
}

/* A bad head, or one that cannot be served: a short answer, then close.  A request
 * whose answer already went (its head written, or all of it while its body is being
 * dropped) gets none: the connection just ends. */
static void error_response(struct conn *c, int status)
{
    struct h1_conn *h = H(c);
    struct h1_request *r = h ? h->cur : NULL;
    bool answered = h && (h->phase == H1_DISCARD || (r && r->head_sent));
    size_t body = strlen(reason(status)) + 1;
    if (!answered) {
        char text[512];
        int n = snprintf(text, sizeof text,
                         "HTTP/1.1 %d %s\r\ndate: %s\r\n%scontent-type: text/plain\r\ncontent-length: %zu\r\n"
                         "connection: close\r\n\r\n%s\n",
                         status, reason(status), http_date_now(), c->w->cfg->server_header ? "server: h2park\r\n" : "",
                         body, reason(status));
        buf_append(&c->sock.out, text, (size_t)n);
    }
    if (r) {
        h->cur = NULL;
        if (answered) {
            request_closed(&r->r);
        } else {
            note_request_line(h, r);
            request_refused(&r->r, status, body);
        }
    }
    if (h)
        h->phase = H1_IDLE;
    c->head_due = false;
    conn_set_state(c, CONN_CLOSING);
}

/* ---- the head, from llhttp's callbacks ---- */

static int fail(llhttp_t *p, int status)
{
    struct h1_conn *h = H(p->data);
    if (!h->error)
        h->error = status;
    return -1;
}

static int on_message_begin(llhttp_t *p)
{
    struct conn *c = p->data;
    struct h1_conn *h = H(c);
    struct h1_request *r = sc_calloc(1, sizeof *r);
    if (!r)
        return fail(p, 503);
    if (request_init(&r->r, c, &h1_request_ops, REQ_HTTP1)) {
        sc_free(r);
        return fail(p, 503);
    }
    h->cur = r;
    h->phase = H1_HEAD;
    h->head_bytes = h->trailer_fields = 0;
    h->version_seen = h->host_seen = h->te_seen = false;
    h->target.len = h->field.len = h->value.len = 0;
    h->target_at.at = h->field_at.at = h->value_at.at = NULL;
    c->since = ev_now(c->w->loop);
    c->head_due = true;
    return 0;
}

/* A span still in the input goes into its buffer. */
static int spill_one(struct buf *b, struct span *sp)
{
    int rc = sp->at ? buf_append(b, sp->at, sp->n) : 0;
    sp->at = NULL;
    return rc;
}

static int spill(struct h1_conn *h)
{
    return spill_one(&h->field, &h->field_at) | spill_one(&h->value, &h->value_at) |
           spill_one(&h->target, &h->target_at);
}

/* What has come of one of the three, wherever it is (never in both places: a span is
 * spilled before anything is added to its buffer). */
static char *span_data(struct buf *b, const struct span *sp)
{
    /* llhttp's pointers are into the bytes parse() gave it, which are the connection's
     * own (the worker's read buffer or conn->in), so they may be written (lower-cased). */
    return sp->at ? (char *)sp->at : b->data;
}
static size_t span_len(const struct buf *b, const struct span *sp) { return sp->at ? sp->n : b->len; }

static int add_span(llhttp_t *p, struct buf *b, struct span *sp, const char *at, size_t n)
{
    struct h1_conn *h = H(p->data);
    h->head_bytes += (uint32_t)n;
    if (h->head_bytes > ((struct conn *)p->data)->w->cfg->max_header_list_size)
        return fail(p, 431);
    if (!b->len && (!sp->at || sp->at + sp->n == at)) {
        if (!sp->at)
            sp->at = at, sp->n = 0;
        sp->n += (uint32_t)n;
        return 0;
    }
    return spill_one(b, sp) || buf_append(b, at, n) ? fail(p, 503) : 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct h1_conn *h = H(p->data);
    if (span_len(&h->target, &h->target_at) + n > H1_TARGET_MAX) {
        spill_one(&h->target, &h->target_at);
        buf_append(&h->target, at, H1_TARGET_MAX - h->target.len);   /* what the log shows of it */
        return fail(p, 414);
    }
    return add_span(p, &h->target, &h->target_at, at, n);
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct h1_conn *h = H(p->data);
    return add_span(p, &h->field, &h->field_at, at, n);
}

/* llhttp passes obs-fold through as a second span of the same value (the CRLF left
 * out), where a value split between two reads is also two spans: a fold is a span that
 * does not start where the last one ended in the input - positions counted across reads,
 * since a read boundary may fall anywhere, right before a fold's text too - or a value
 * that starts with whitespace (llhttp skips leading OWS itself). */
static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct h1_conn *h = H(p->data);
    uint64_t pos = h->fed + (uint64_t)(at - h->exec_start);
    size_t had = span_len(&h->value, &h->value_at);
    if ((had && pos != h->vspan_end) || (!had && n && (at[0] == ' ' || at[0] == '\t')))
        return fail(p, 400);
    h->vspan_end = pos + n;
    return add_span(p, &h->value, &h->value_at, at, n);
}

/* RFC 9112 section 2.3: HTTP/1.x with x above 1 is answered as HTTP/1.1 (llhttp, told to
 * be lenient about versions, hands every digit.digit here); any other major version is
 * one h2park does not speak (505, RFC 9110 section 15.6.6). */
static int on_version_complete(llhttp_t *p)
{
    if (p->http_major != 1)
        return fail(p, 505);
    H(p->data)->version_seen = true;
    return 0;
}

/* A field of the head or of the trailers, complete: its name checked and lower-cased,
 * its value trimmed and checked. */
static int on_header_value_complete(llhttp_t *p)
{
    struct conn *c = p->data;
    struct h1_conn *h = H(c);
    char *name = span_data(&h->field, &h->field_at);
    const char *value = span_data(&h->value, &h->value_at);
    size_t nl = span_len(&h->field, &h->field_at), vl = span_len(&h->value, &h->value_at);
    if (!value)
        value = "";
    if (!http1_name_ok(name, nl) || !http1_value_ok(value, &vl))
        return fail(p, 400);       /* whitespace or worse in a field name, a control character in a value */
    h->field.len = h->value.len = 0;
    h->field_at.at = h->value_at.at = NULL;
    /* Trailers (RFC 9110 section 6.5): checked like the head's fields and bounded - the
     * head and its trailers together within max_header_list_size (add_span), at most
     * H1_TRAILER_FIELDS of them - but never merged into the head (6.5.1) and never
     * stored: no route reads them, and the request's head, which a running handler
     * points into, does not change.  They may come with no request at all (its body
     * being dropped after an early answer). */
    if (p->flags & F_TRAILING) {
        /* llhttp reads Connection, Upgrade and Content-Length even here: undone. */
        p->flags = (uint16_t)(h->head_flags | F_TRAILING);
        return ++h->trailer_fields > H1_TRAILER_FIELDS ? fail(p, 431) : 0;
    }
    struct h1_request *r = h->cur;
    if (nl == 4 && !memcmp(name, "host", 4)) {
        if (h->host_seen)
            return fail(p, 400);   /* RFC 9112 3.2: more than one Host (its value: once the head is in) */
        h->host_seen = true;
    }
    if (nl == 6 && !memcmp(name, "expect", 6)) {
        if (vl != 12 || strncasecmp(value, "100-continue", 12))
            return fail(p, 417);
        r->expect_continue = true;
    }
    if (!request_add_header(&r->r, name, nl, value, vl))
        return fail(p, 431);
    if (nl == 17 && !memcmp(name, "transfer-encoding", 17)) {
        h->te_seen = true;
        if (vl != 7 || strncasecmp(value, "chunked", 7))
            return fail(p, 501);   /* the only transfer coding h2park decodes */
    }
    return 0;
}

static bool h2c_upgrade_asked(struct conn *c, struct h1_request *r)
{
    if (c->sock.ssl)
        return false;              /* h2c is for cleartext; over TLS ALPN chooses */
    const char *upgrade = req_known(&r->r, KF_UPGRADE), *connection = req_known(&r->r, KF_CONNECTION);
    const char *settings = req_known(&r->r, KF_HTTP2_SETTINGS);
    return upgrade && connection && settings && http_list_has(upgrade, "h2c") && http_list_has(connection, "upgrade") &&
           http_list_has(connection, "http2-settings");
}

/* An absolute-form target (RFC 9112 section 3.2.2), "http://authority/path?query": 1
 * with where its authority and path start, 0 if the target is not one, -1 if it is a
 * bad one (another scheme, an empty or invalid authority, userinfo).  An empty path
 * becomes "/", made room for in the target's buffer. */
static int absolute_form(struct buf *t, size_t *auth_off, size_t *auth_len, size_t *path_off, int *host_len)
{
    size_t n = t->len, s = 0;
    if (t->data[0] == '/')
        return 0;                  /* origin-form, nearly every request */
    if (n >= 7 && !strncasecmp(t->data, "http://", 7))
        s = 7;
    else if (n >= 8 && !strncasecmp(t->data, "https://", 8))
        s = 8;
    else
        return memchr(t->data, ':', n) ? -1 : 0;   /* scheme:... of another kind */
    size_t e = s;
    while (e < n && t->data[e] != '/' && t->data[e] != '?' && t->data[e] != '#')
        e++;
    if (e == s || (*host_len = host_span(t->data + s, e - s)) <= 0)
        return -1;                 /* RFC 9110 4.2.1: an http URI's host is never empty */
    if (e == n || t->data[e] != '/') {
        if (buf_reserve(t, 1))
            return -1;
        memmove(t->data + e + 1, t->data + e, n - e);
        t->data[e] = '/';
        t->len++;
    }
    *auth_off = s;
    *auth_len = e - s;
    *path_off = e;
    return 1;
}

static int on_headers_complete(llhttp_t *p)
{
    struct conn *c = p->data;
    struct h1_conn *h = H(c);
    struct h1_request *r = h->cur;
    if (h->error)
        return -1;
    const char *method = llhttp_method_name((llhttp_method_t)llhttp_get_method(p));
    if (!h->version_seen)
        return fail(p, 400);       /* an HTTP/0.9 request line: no version, no head */
    if (p->method == HTTP_CONNECT)
        return fail(p, 405);
    if (p->http_minor >= 1 && !h->host_seen)
        return fail(p, 400);       /* RFC 9112 3.2: Host is required */
    if (p->http_minor == 0 && h->te_seen)
        return fail(p, 400);       /* RFC 9112 6.1: HTTP/1.0 framing is faulty with it; closes */
    size_t auth_off = 0, auth_len = 0, path_off = 0;
    int target_host = 0;
    /* Origin-form is read where it lies; only another form may need its buffer changed. */
    const char *target = span_data(&h->target, &h->target_at);
    size_t target_len = span_len(&h->target, &h->target_at);
    int absolute = -1;
    if (target_len && target[0] == '/') {
        absolute = 0;
    } else if (target_len) {
        if (spill_one(&h->target, &h->target_at))
            return fail(p, 503);
        absolute = absolute_form(&h->target, &auth_off, &auth_len, &path_off, &target_host);
        target = h->target.data;
        target_len = h->target.len;
    }
    if (absolute < 0)
        return fail(p, 400);
    /* Host is checked (RFC 9112 3.2: 400 for an invalid one) even where the target names
     * the request's host, and measured here once: routing does not measure it again. */
    const char *host_field = req_known(&r->r, KF_HOST);
    int host_field_len = host_length(host_field);
    if (host_field_len < 0)
        return fail(p, 400);
    r->r.host_len = (uint8_t)(absolute ? target_host : host_field_len);
    r->r.host_checked = true;
    bool asterisk = target_len == 1 && target[0] == '*';
    if (!absolute && target[0] != '/' && !(asterisk && p->method == HTTP_OPTIONS))
        return fail(p, 400);       /* origin-form, absolute-form or OPTIONS * only (3.2) */
    /* The authority: an absolute-form target's, which Host then only has to be present
     * and valid for (3.2.2); else Host's, copied first - adding fields may move the
     * buffer it points into. */
    const char *host = absolute ? target + auth_off : host_field;
    size_t host_len = absolute ? auth_len : host ? strlen(host) : 0;
    char host_copy[1024];
    if (host_len >= sizeof host_copy)
        return fail(p, 400);
    memcpy(host_copy, host ? host : "", host_len);
    if (!request_add_header(&r->r, ":method", 7, method, strlen(method)) ||
        !request_add_header(&r->r, ":path", 5, target + path_off, target_len - path_off) ||
        !request_add_header(&r->r, ":authority", 10, host_copy, host_len))
        return fail(p, 431);
    bool has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
    if (p->upgrade) {
        if (h2c_upgrade_asked(c, r) && !has_body) {
            h->upgrading = true;
            return HPE_PAUSED;
        }
        /* Any other upgrade is the handler's to take (a 101 makes a tunnel) or ignore (RFC
         * 9110 7.8): the head is parsed as a request without one, so what follows it waits
         * in conn->in, unparsed, until the answer says which it is. */
        const char *connection = req_known(&r->r, KF_CONNECTION);
        r->r.upgrade_offered = !has_body && p->http_minor >= 1 && req_known(&r->r, KF_UPGRADE) && connection &&
                               http_list_has(connection, "upgrade");
        p->upgrade = 0;
    }
    if (!llhttp_should_keep_alive(p))
        h->close_after = true;
    h->head_flags = p->flags;
    c->head_due = false;
    h->phase = H1_BODY;
    buf_free(&h->field);
    buf_free(&h->value);
    buf_free(&h->target);
    h->field_at.at = h->value_at.at = h->target_at.at = NULL;
    if (!has_body)
        r->r.body_eof = true;
    if (request_start(&r->r))
        return fail(p, 503);
    return 0;
}

/* Bytes llhttp took as framing - all but on_body's - are checked (http1_syntax.h): for a
 * bare CR, and a chunk's data for the CRLF after it; from framing_from up to each piece
 * of body here, the rest when llhttp_execute returns (parse).  A CR right before a body's
 * first byte is a chunk-size line llhttp ended on the CR alone. */
static bool framing_bad(struct h1_conn *h, const char *f, size_t n)
{
    return http1_chunk_end_bad(f, n, &h->crlf_due) || http1_bare_cr(f, n, &h->cr_last);
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct h1_conn *h = H(p->data);
    if (framing_bad(h, h->framing_from, (size_t)(at - h->framing_from)) || h->cr_last || h->crlf_due) {
        fail(p, 400);
        return HPE_USER;           /* its own code: parse names the cause */
    }
    h->framing_from = at + n;
    if ((p->flags & F_CHUNKED) && !p->content_length)
        h->crlf_due = 2;           /* the chunk's data ended here */
    if (h->phase == H1_DISCARD) {
        h->discarded += n;
        return h->discarded > H1_DISCARD_MAX ? fail(p, 413) : 0;
    }
    return request_body(&h->cur->r, at, n) ? fail(p, 503) : 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct conn *c = p->data;
    struct h1_conn *h = H(c);
    if (h->field.data || h->value.data) {   /* the trailers' (the head's went with it) */
        buf_free(&h->field);
        buf_free(&h->value);
    }
    h->field_at.at = h->value_at.at = NULL;
    if (h->phase == H1_DISCARD) {
        h->phase = H1_IDLE;        /* answered already: on to the next request */
        return 0;
    }
    request_body_end(&h->cur->r);
    h->phase = H1_WAIT;
    return HPE_PAUSED;             /* the next request waits for this response */
}

/* Built by the compiler, not on first use: workers start parsers at the same time, and a
   block filled in by one thread was read half-written by another (a flag set before the
   fields is a store the compiler may move). llhttp_settings_init only zeroes a block. */
static const llhttp_settings_t parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_version_complete = on_version_complete,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};


/* ---- Upgrade: h2c ---- */

static int b64url_value(int ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-' || ch == '+') return 62;
    if (ch == '_' || ch == '/') return 63;
    return -1;
}

static ssize_t b64url_decode(const char *in, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (; *in && *in != '='; in++) {
        int v = b64url_value((unsigned char)*in);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)n;
}

/* The head asked for h2c: 101, then HTTP/2 on this connection with the request as
 * stream 1, and what followed the head (the client's preface) handed to it. */
static int upgrade(struct conn *c, const char *rest, size_t len)
{
    struct h1_conn *h = H(c);
    struct h1_request *r = h->cur;
    uint8_t settings[512];
    ssize_t n = b64url_decode(req_known(&r->r, KF_HTTP2_SETTINGS), settings, sizeof settings);
    if (n < 0 || n % 6) {
        error_response(c, 400);
        return 0;
    }
    static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: h2c\r\n\r\n";
    if (buf_append(&c->sock.out, switching, sizeof switching - 1))
        return -1;
    struct buf head = r->r.hdr;
    r->r.hdr = (struct buf){ 0 };
    h->cur = NULL;
    request_closed(&r->r);
    struct buf in = c->in;        /* rest points into it, or into the read buffer */
    c->in = (struct buf){ 0 };
    h->phase = H1_IDLE;
    maybe_free_state(c);
    int rc = h2_start_upgraded(c, settings, (size_t)n, &head);
    buf_free(&head);
    if (!rc)
        rc = h2_feed_upgraded(c, rest, len);
    buf_free(&in);
    return rc;
}

/* ---- input ---- */

static size_t body_room(const struct h1_conn *h)
{
    if (h->phase != H1_BODY && h->phase != H1_TUNNEL)
        return SIZE_MAX;
    size_t held = h->cur->r.body.len - h->cur->r.body_off;
    return held < H1_BODY_MAX ? H1_BODY_MAX - held : 0;
}

/* Parses from p as far as the state allows; *used is how much it took.  -1: close now. */
static int parse(struct conn *c, const char *p, size_t n, size_t *used)
{
    struct h1_conn *h = H(c);
    *used = 0;
    while (n && h->phase != H1_WAIT && c->state == CONN_OPEN) {
        size_t give = n < body_room(h) ? n : body_room(h);
        if (!give)
            break;
        h->exec_start = h->framing_from = p;
        llhttp_errno_t err = llhttp_execute(&h->parser, p, give);
        if (spill(h) && err == HPE_OK) {
            error_response(c, 503);      /* no memory to keep the head's piece that came */
            *used += n;
            return 0;
        }
        size_t took = err == HPE_OK ? give : (size_t)(llhttp_get_error_pos(&h->parser) - p);
        /* Checked before anything llhttp found is acted on: a message it ended, the next
         * it began, an upgrade - handlers run only once parse has returned. */
        if ((err == HPE_OK || err == HPE_PAUSED) && framing_bad(h, h->framing_from, (size_t)(p + took - h->framing_from))) {
            log_msg(LOG_INFO, "%s: refused: HTTP/1.1 400: a bare CR, or a chunk not ended by CRLF", conn_peer(c));
            error_response(c, 400);
            *used += n;
            return 0;
        }
        h->fed += took;
        *used += took;
        p += took;
        n -= took;
        if (err == HPE_OK)
            continue;
        if (err == HPE_PAUSED && h->upgrading) {
            *used += n;               /* the rest belongs to HTTP/2 */
            return upgrade(c, p, n);
        }
        if (err == HPE_PAUSED) {      /* a message is complete: answer it first */
            llhttp_resume(&h->parser);
            break;
        }
        log_msg(LOG_INFO, "%s: refused: HTTP/1.1 %d: %s", conn_peer(c), h->error ? h->error : 400,
                err == HPE_USER ? "a bare CR, or a chunk not ended by CRLF" : llhttp_get_error_reason(&h->parser));
        error_response(c, h->error ? h->error : 400);
        *used += n;
        return 0;
    }
    return 0;
}

/* A tunnel's input: handed on as it is, as much as the handler has room for; the rest
 * waits in conn->in (and reading stops) until it makes room. */
static int tunnel_in(struct conn *c, const char *data, size_t len, size_t *used)
{
    struct h1_conn *h = H(c);
    size_t room = body_room(h);
    *used = len < room ? len : room;
    return *used && request_body(&h->cur->r, data, *used) ? -1 : 0;
}

/* The tunnel's input that waits in conn->in, and the client's close after it. */
static int tunnel_queued(struct conn *c)
{
    size_t used = 0;
    if (c->in.len && tunnel_in(c, c->in.data, c->in.len, &used))
        return -1;
    if (used == c->in.len) {
        buf_free(&c->in);
    } else if (used) {
        memmove(c->in.data, c->in.data + used, c->in.len - used);
        c->in.len -= used;
    }
    if (!c->in.len && c->peer_eof)
        request_body_end(&H(c)->cur->r);
    return 0;
}

/* Parses what waits in conn->in, keeping the rest. */
static int parse_queued(struct conn *c)
{
    if (H(c)->phase == H1_TUNNEL)
        return tunnel_queued(c);
    if (!c->in.len)
        return 0;
    size_t used;
    int rc = parse(c, c->in.data, c->in.len, &used);
    if (rc || c->proto != &h1_proto)
        return rc;
    if (used == c->in.len) {
        buf_free(&c->in);
    } else if (used) {
        memmove(c->in.data, c->in.data + used, c->in.len - used);
        c->in.len -= used;
    }
    return 0;
}

static int h1_feed(struct conn *c, const char *data, size_t len)
{
    struct h1_conn *h = state(c);
    if (!h)
        return -1;
    if (!len) {
        /* The peer's end: a request whose answer began still gets the rest of it;
         * anything else is abandoned, as nginx's proxy does - a handler still waiting
         * (for an upstream, a long poll's event) is told at once, and the upstream let go
         * - but a handler that answers without waiting has answered before this read;
         * a tunnel's body ends (after what still waits in conn->in). */
        if (h->phase == H1_TUNNEL) {
            if (!c->in.len)
                request_body_end(&h->cur->r);
        } else if (h->phase == H1_WAIT && h->cur && h->cur->r.responded) {
            h->close_after = true;
        } else if (h->phase != H1_IDLE || c->in.len) {
            conn_set_state(c, CONN_CLOSING);
        }
        return 0;
    }
    if (c->in.len)
        return buf_append(&c->in, data, len) ? -1 : parse_queued(c);
    size_t used;
    if (h->phase == H1_TUNNEL) {
        if (tunnel_in(c, data, len, &used))
            return -1;
        return used < len && buf_append(&c->in, data + used, len - used) ? -1 : 0;
    }
    if (parse(c, data, len, &used))
        return -1;
    if (c->proto != &h1_proto)
        return 0;                 /* upgraded: c->proto_state is HTTP/2's now, not ours */
    if (used < len && c->state == CONN_OPEN && buf_append(&c->in, data + used, len - used))
        return -1;
    maybe_free_state(c);
    return 0;
}

/* ---- output ---- */

static bool bodiless(int status) { return status < 200 || status == 204 || status == 304; }

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* The status line and fields, written into the output buffer sized at once (no
 * snprintf, no append per piece: this runs once per response). */
static int write_head(struct conn *c, struct h1_request *r)
{
    struct h1_conn *h = H(c);
    struct request *q = &r->r;
    bool http10 = h->parser.http_major == 1 && h->parser.http_minor == 0;
    /* Expect: 100-continue, answered before the body was asked for: a success invites
     * the body after all (the handler means to read it); anything else may never see it
     * come, so this exchange is the connection's last. */
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    bool send_continue = false;
    if (r->expect_continue && !r->continue_sent && !q->body_eof) {
        if (q->status >= 200 && q->status < 300)
            send_continue = r->continue_sent = true;
        else
            h->close_after = true;
    }
    if (c->shutdown_asked)
        h->close_after = true;
    enum { LENGTH, ZERO, CLOSE_DELIMITED, CHUNKED, NOTHING, TUNNEL } framing = NOTHING;
    if (q->tunnel)
        framing = TUNNEL;            /* the bytes as they are, both ways, until a close */
    else if (bodiless(q->status))
        framing = NOTHING;
    else if (q->out_length >= 0)
        framing = LENGTH;
    else if (q->out_length == BODY_NONE)
        framing = ZERO;
    else if (http10)
        framing = CLOSE_DELIMITED;
    else
        framing = CHUNKED;
    if (framing == CLOSE_DELIMITED)
        h->close_after = true;        /* the end of the body is the end of the connection */
    r->chunked = framing == CHUNKED && !req_is_head(q);   /* a HEAD answer announces it, sends nothing */
    const char *why = reason(q->status);
    size_t need = sizeof cont + 16 + strlen(why) + q->resp.len + 2 * q->nresp + 64;
    if (conn_out_reserve(c, need))
        return -1;
    char *p = c->sock.out.data + c->sock.out.len;
    if (send_continue)
        p = put(p, cont, sizeof cont - 1);
    int code = q->status % 1000;
    char status[13] = "HTTP/1.1 000 ";
    status[9] = (char)('0' + code / 100), status[10] = (char)('0' + code / 10 % 10), status[11] = (char)('0' + code % 10);
    p = put(p, status, 13);
    p = put(p, why, strlen(why));
    p = put(p, "\r\n", 2);
    struct resp_field f;
    for (size_t off = 0; request_resp_field(q, &off, &f);) {
        p = put(p, f.name, f.nlen);
        p = put(p, ": ", 2);
        p = put(p, f.value, f.vlen);
        p = put(p, "\r\n", 2);
    }
    if (framing == LENGTH) {
        p = put(p, "content-length: ", 16);
        p += u64_dec(p, (uint64_t)q->out_length);
        p = put(p, "\r\n", 2);
    } else if (framing == ZERO) {
        p = put(p, "content-length: 0\r\n", 19);
    } else if (framing == CHUNKED) {
        p = put(p, "transfer-encoding: chunked\r\n", 28);
    }
    if (framing == TUNNEL)
        p = put(p, "connection: upgrade\r\n", 21);
    else if (h->close_after)
        p = put(p, "connection: close\r\n", 19);
    else if (http10)
        p = put(p, "connection: keep-alive\r\n", 24);
    p = put(p, "\r\n", 2);
    c->sock.out.len = (size_t)(p - c->sock.out.data);
    r->head_sent = true;
    q->head_out = true;
    if (framing == TUNNEL) {
        /* The request's end was its head's; from here its body is what the client sends,
         * bytes that may already wait in conn->in. */
        h->phase = H1_TUNNEL;
        h->close_after = true;
        return tunnel_queued(c);
    }
    return 0;
}

static int write_body(struct conn *c, struct h1_request *r)
{
    /* A file over cleartext goes with sendfile, whole, after the head. */
    if (transport_sends_files(&c->sock) && !r->chunked && !c->sock.file && request_out_file(&r->r, c))
        return 0;
    /* A body of known length written by the handler goes out in the buffer it was written
     * to, when nothing is queued before it (a large proxied response: no second copy).
     * Nothing means no sealed TLS records either: those outlive the plaintext they came
     * from, and a buffer given on top of them each time the socket took some would grow
     * them for as long as a slow reader kept taking less than a buffer per wake-up. */
    if (!r->chunked && !c->sock.file && !conn_out_pending(c) && request_out_give(&r->r, &c->sock.out, &c->sock.out_off))
        return 0;
    size_t avail;
    while (conn_out_pending(c) < OUT_HIGH && (avail = request_out_allowed(&r->r, request_out_avail(&r->r))) > 0) {
        size_t n = avail < OUT_CHUNK ? avail : OUT_CHUNK;
        char size[24];
        int sl = r->chunked ? snprintf(size, sizeof size, "%zx\r\n", n) : 0;
        if (buf_reserve(&c->sock.out, (size_t)sl + n + 2))
            return -1;
        memcpy(c->sock.out.data + c->sock.out.len, size, (size_t)sl);
        if (request_out_take(&r->r, c->sock.out.data + c->sock.out.len + sl, n))
            return -1;
        c->sock.out.len += (size_t)sl + n;
        if (r->chunked)
            buf_append(&c->sock.out, "\r\n", 2);
    }
    return 0;
}

/* The response's last byte is queued: on to the next request, or the end. */
static int response_done(struct conn *c)
{
    struct h1_conn *h = H(c);
    struct h1_request *r = h->cur;
    h->cur = NULL;
    request_sent_all(&r->r);
    if (h->phase == H1_BODY)
        h->phase = H1_DISCARD;        /* answered before the body ended: drop the rest */
    else
        h->phase = H1_IDLE;           /* a tunnel too: it closes (close_after) */
    request_closed(&r->r);
    if (h->close_after) {
        conn_set_state(c, CONN_CLOSING);
        return 0;
    }
    return parse_queued(c);
}

/* The chunked body's end, with the handler's trailer fields (req_end_with_trailers) if
 * the client said it takes them (TE: trailers, RFC 9110 6.5.1); a client that did not
 * may not know what to do with them, so they are dropped, as nginx does. */
static int write_last_chunk(struct conn *c, struct request *q)
{
    size_t off = 0;
    struct header f;
    if (!request_trailer(q, &off, &f) || !http_list_has(req_header(q, "te"), "trailers"))
        return buf_append(&c->sock.out, "0\r\n\r\n", 5);
    if (buf_append(&c->sock.out, "0\r\n", 3))
        return -1;
    do {
        if (buf_append(&c->sock.out, f.name, strlen(f.name)) || buf_append(&c->sock.out, ": ", 2) ||
            buf_append(&c->sock.out, f.value, strlen(f.value)) || buf_append(&c->sock.out, "\r\n", 2))
            return -1;
    } while (request_trailer(q, &off, &f));
    return buf_append(&c->sock.out, "\r\n", 2);
}

static int h1_send(struct conn *c)
{
    struct h1_conn *h = H(c);
    /* Body held back for want of room (conn->in) goes on once the handler made some: the
     * socket may have nothing more to say, so no read would bring it. */
    if (h && (h->phase == H1_BODY || h->phase == H1_TUNNEL) && c->in.len && body_room(h) > 0 && c->state == CONN_OPEN &&
        parse_queued(c))
        return -1;
    if (!h || !h->cur || !h->cur->r.responded || c->state != CONN_OPEN)
        return 0;
    struct h1_request *r = h->cur;
    if (!r->head_sent && write_head(c, r))
        return -1;
    if (write_body(c, r))
        return -1;
    if (request_out_finished(&r->r) && !r->r.sent_all) {
        if (r->chunked && write_last_chunk(c, &r->r))
            return -1;
        if (response_done(c))
            return -1;
    }
    if (c->proto == &h1_proto)
        maybe_free_state(c);
    return 0;
}

static bool h1_want_read(const struct conn *c)
{
    const struct h1_conn *h = H(c);
    if (c->state != CONN_OPEN || c->in.len >= H1_IN_MAX)
        return false;
    return !h || body_room(h) > 0;
}

static bool h1_want_write(const struct conn *c)
{
    const struct h1_conn *h = H(c);
    if (!h || !h->cur || !h->cur->r.responded)
        return false;
    const struct request *r = &h->cur->r;
    /* Body a rate limit holds back is nothing to write: the connection parks, and the
     * request's timer wakes it for the next burst. */
    size_t avail = request_out_avail(r);
    return !h->cur->head_sent || request_out_allowed(r, avail) > 0 || (r->out_eof && !r->sent_all && !avail);
}

static bool h1_finished(const struct conn *c)
{
    const struct h1_conn *h = H(c);
    if (c->state == CONN_CLOSING)
        return true;                  /* its last words are in conn->out */
    return c->peer_eof && (!h || (!h->cur && h->phase == H1_IDLE));
}

static bool h1_timeout(struct conn *c, int kind)
{
    struct h1_conn *h = H(c);
    if (kind == TIMEOUT_HEAD && h && h->phase == H1_HEAD) {
        error_response(c, 408);
        return false;
    }
    return true;                      /* idle keep-alive, nothing begun, or stalled */
}

/* Stopping: a request being handled is answered first (Connection: close); one whose
 * head is still arriving, or none at all, ends the connection at once. */
static void h1_shutdown(struct conn *c)
{
    struct h1_conn *h = H(c);
    if (!h || h->phase == H1_IDLE || h->phase == H1_HEAD)
        conn_set_state(c, CONN_CLOSING);
    else
        h->close_after = true;
}

static void h1_destroy(struct conn *c)
{
    struct h1_conn *h = H(c);
    if (!h)
        return;
    buf_free(&h->field);
    buf_free(&h->value);
    buf_free(&h->target);
    sc_free(h);
    c->proto_state = NULL;
}

static int h1_start(struct conn *c)
{
    (void)c;
    return 0;
}

const struct conn_proto h1_proto = {
    .name = "http/1.1", .start = h1_start, .feed = h1_feed, .send = h1_send, .want_read = h1_want_read,
    .want_write = h1_want_write, .finished = h1_finished, .timeout = h1_timeout, .shutdown = h1_shutdown,
    .destroy = h1_destroy,
};

/* ---- the request's side ---- */

static int request_respond(struct request *r)
{
    (void)r;
    return 0;                         /* the head is written by h1_send, in order */
}

static void request_output_ready(struct request *r) { (void)r; }
static void request_consumed(struct request *r, size_t n) { (void)r, (void)n; }

static void request_body_wanted(struct request *q)
{
    struct h1_request *r = R(q);
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (r->expect_continue && !r->continue_sent && !q->responded && buf_append(&q->c->sock.out, cont, sizeof cont - 1) == 0)
        r->continue_sent = true;
}

/* The caller (a request's deadline) wakes the connection once it is done with it. */
static void request_cancel(struct request *r) { conn_close_soon(r->c); }
static void request_release(struct request *r) { sc_free(R(r)); }

const struct request_ops h1_request_ops = {
    .respond = request_respond, .output_ready = request_output_ready, .consumed = request_consumed,
    .body_wanted = request_body_wanted, .cancel = request_cancel, .release = request_release,
};
