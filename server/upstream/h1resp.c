/* An upstream's HTTP/1.1 response: llhttp in response mode, one parser per exchange,
 * whose callbacks fill struct upstream_response and stop it at each thing the proxy must
 * pass on before reading further (the head, each piece of body, the end).
 *
 * One parser, one length: the body's end is what llhttp says it is - Content-Length,
 * the chunked coding, or the close - and nothing else reads the framing.  What could make
 * the proxy and a client disagree on where a response ends is refused (502) rather than
 * repaired: Transfer-Encoding with Content-Length, two Content-Lengths, a transfer coding
 * other than chunked, obs-fold, whitespace in or before a field name, control characters
 * in a value, a CR not followed by LF anywhere but in the body (the head, the chunk
 * lines, the trailers), a chunk's data not followed by CRLF, a head over head_max, a status that is not three digits.  A 1xx
 * response (100 Continue, 103 Early Hints) is read and dropped; a 101 ends the message
 * where its head ends if an upgrade was asked (what follows is the other protocol's:
 * llhttp stops there), and is refused if not.
 *
 * Every callback runs inside h1resp_parse, on a parser that h1resp_init set up, so
 * none runs without its struct: the callbacks' states are message begin, head, body,
 * message complete, in that order, once per message.  A field's name and value are
 * written straight into the fields buffer as they come (a name, a NUL, the value so far),
 * and checked there once complete: one buffer, one allocation for a head of the usual
 * size. */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http1_syntax.h"
#include "scalloc.h"
#include "upstream/upstream.h"

static struct upstream_response *P(llhttp_t *p)
{
    return (struct upstream_response *)((char *)p - offsetof(struct upstream_response, parser));
}

static int refuse(llhttp_t *p, const char *why)
{
    struct upstream_response *r = P(p);
    if (!r->error)
        r->error = why;
    return -1;
}

static int on_message_begin(llhttp_t *p)
{
    struct upstream_response *r = P(p);
    r->fields.len = r->field_start = 0;
    r->in_value = false;
    r->nfields = r->head_bytes = 0;
    r->length = -1;
    r->chunked = false;
    return 0;
}

/* A field's bytes go straight into fields, where it is checked once complete: its name,
 * a NUL, its value (in_value: past the name's NUL). */
static int add_span(llhttp_t *p, const char *at, size_t n)
{
    struct upstream_response *r = P(p);
    r->head_bytes += (uint32_t)n;
    if (r->head_bytes > r->head_max)
        return refuse(p, "upstream sent too big a header");
    /* One allocation for a whole head of the usual size rather than a growth per field. */
    if (!r->fields.cap && buf_reserve(&r->fields, 1024))
        return refuse(p, "no memory for the upstream's header");
    return buf_append(&r->fields, at, n) ? refuse(p, "no memory for the upstream's header") : 0;
}

static int end_name(llhttp_t *p)
{
    struct upstream_response *r = P(p);
    if (r->in_value)
        return 0;
    r->in_value = true;
    r->name_end = (uint32_t)r->fields.len;
    return buf_append(&r->fields, "", 1) ? refuse(p, "no memory for the upstream's header") : 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) { return add_span(p, at, n); }

/* A value in two spans that do not join is obs-fold (llhttp drops the CRLF between).
 * Whether they join is judged by their places in the upstream's byte stream, not in
 * memory: a value split across reads arrives in spans of two buffers, and a fold split
 * across reads (the CRLF alone in one, the continuation in the next) must not pass for
 * a split value. */
static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct upstream_response *r = P(p);
    uint64_t pos = r->fed + (uint64_t)(at - r->exec_start);
    bool started = r->in_value && r->fields.len > r->name_end + 1;
    if ((started && pos != r->vspan_end) || (!started && n && (at[0] == ' ' || at[0] == '\t')))
        return refuse(p, "upstream sent a folded header line");
    r->vspan_end = pos + n;
    return end_name(p) || add_span(p, at, n);
}

static int on_header_value_complete(llhttp_t *p)
{
    struct upstream_response *r = P(p);
    if (end_name(p))
        return -1;
    char *name = r->fields.data + r->field_start, *value = r->fields.data + r->name_end + 1;
    size_t nl = r->name_end - r->field_start, vl = r->fields.len - (r->name_end + 1);
    if (!http1_name_ok(name, nl))
        return refuse(p, "upstream sent an invalid header name");
    if (!http1_value_ok(value, &vl))
        return refuse(p, "upstream sent a control character in a header");
    /* (A trailer's Content-Length frames nothing - the body is over - and is dropped with
     * the rest of the trailers: it must not pass for the head's.) */
    if (nl == 14 && !r->head_done && !memcmp(name, "content-length", 14)) {
        if (r->length >= 0)
            return refuse(p, "upstream sent two Content-Length headers");
        r->length = 0;          /* its value is llhttp's to read: only "seen" here */
    }
    if (nl == 17 && !memcmp(name, "transfer-encoding", 17)) {
        if (r->chunked || vl != 7 || strncasecmp(value, "chunked", 7))
            return refuse(p, "upstream sent a transfer coding other than chunked");
        r->chunked = true;
    }
    r->fields.len = r->name_end + 1 + vl;
    if (buf_append(&r->fields, "", 1))
        return refuse(p, "no memory for the upstream's header");
    r->field_start = (uint32_t)r->fields.len;
    r->in_value = false;
    r->nfields++;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct upstream_response *r = P(p);
    if (r->error)
        return -1;
    if (r->chunked && r->length >= 0)
        return refuse(p, "upstream sent Transfer-Encoding with Content-Length");
    r->status = llhttp_get_status_code(p);
    /* llhttp takes any number: a status that is not three digits (RFC 9110 15) would
     * otherwise pass for a 1xx below, its body for nothing. */
    if (r->status < 100 || r->status > 599)
        return refuse(p, "upstream sent an invalid status code");
    if (r->status == 101 && r->upgrade_asked) {
        r->head_done = r->upgraded = true;
        r->event = UPSTREAM_HEAD;
        return 2;                  /* llhttp ends the message and stops after the head */
    }
    if (r->status < 200) {
        if (r->status == 101)
            return refuse(p, "upstream switched protocols unasked");
        r->informational = true;   /* dropped: the real response follows */
        return 1;                  /* a 1xx has no body (RFC 9110 15.2), whatever it says */
    }
    r->length = (p->flags & F_CONTENT_LENGTH) ? (int64_t)p->content_length : -1;
    r->head_done = true;
    r->event = UPSTREAM_HEAD;
    /* The head announces a body that does not come; a 204 or 304 has none either (RFC
     * 9110 6.4.1), nor does one of Content-Length: 0 (a 403, an authentication server's
     * 200), and its end is here: paused instead, llhttp would report it only with the
     * next byte, which an upstream keeping the connection never sends. */
    if (r->head_request || r->status == 204 || r->status == 304 || r->length == 0)
        return 1;
    return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct upstream_response *r = P(p);
    r->body = at;
    r->body_len = n;
    r->event = UPSTREAM_BODY;
    /* The last piece of a body with a length ends the message right here: no pause, so
     * llhttp reaches the end now rather than after bytes that will never come. */
    if (!(p->flags & F_CHUNKED) && (p->flags & F_CONTENT_LENGTH) && p->content_length == 0)
        return 0;
    return HPE_PAUSED;
}

static int on_message_complete(llhttp_t *p)
{
    struct upstream_response *r = P(p);
    if (r->informational) {
        r->informational = false;
        return 0;
    }
    r->keep_alive = llhttp_should_keep_alive(p) && !r->upgraded;
    r->complete = true;
    if (r->upgraded)
        return 0;                  /* llhttp pauses itself (HPE_PAUSED_UPGRADE) */
    /* A head or a last piece found in the same pass is reported first, the end next time. */
    if (r->event == UPSTREAM_MORE)
        r->event = UPSTREAM_END;
    return HPE_PAUSED;
}

/* Built by the compiler, as the request parser's is (server/proto/h1.c says why). */
static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};


void h1resp_init(struct upstream_response *p, bool head_request, bool upgrade_asked, uint32_t head_max)
{
    memset(p, 0, sizeof *p);
    llhttp_init(&p->parser, HTTP_RESPONSE, &settings);
    p->head_request = head_request;
    p->upgrade_asked = upgrade_asked;
    p->head_max = head_max;
    p->length = -1;
}

/* What is wrong with the framing stretch f[0..n) (NULL: nothing): a chunk's data not
 * ended by CRLF, a bare CR (http1_syntax.h says why either matters to a proxy). */
static const char *framing_bad(struct upstream_response *p, const char *f, size_t n)
{
    if (http1_chunk_end_bad(f, n, &p->crlf_due))
        return "upstream sent a chunk not ended by CRLF";
    if (http1_bare_cr(f, n, &p->cr_last))
        return p->head_done && p->event != UPSTREAM_HEAD ? "upstream sent a bare CR in its chunked framing or trailers"
                                                       : "upstream sent a bare CR in its header";
    return NULL;
}

/* What is wrong with the bytes llhttp took, data[0..took), outside the body: all but the
 * piece on_body found in this pass (at most one: on_body pauses llhttp, except for a
 * length's last piece, after which only the message's end comes), which may hold any
 * byte.  A CR right before a body's first byte is a line llhttp ended on the CR alone. */
static const char *framing_error(struct upstream_response *p, const char *data, size_t took)
{
    if (p->event != UPSTREAM_BODY)
        return framing_bad(p, data, took);
    const char *why = framing_bad(p, data, (size_t)(p->body - data));
    if (why || p->cr_last || p->crlf_due)
        return why ? why : "upstream sent a bare CR in its chunked framing or trailers";
    if ((p->parser.flags & F_CHUNKED) && p->parser.content_length == 0)
        p->crlf_due = 2;           /* the chunk's data ended here */
    const char *body_end = p->body + p->body_len;
    return framing_bad(p, body_end, (size_t)(data + took - body_end));
}

int h1resp_parse(struct upstream_response *p, const char *data, size_t len, size_t *used)
{
    *used = 0;
    if (p->error)
        return UPSTREAM_ERROR;
    if (p->complete)
        return UPSTREAM_END;         /* what was found with the end went out last time */
    if (!len)
        return UPSTREAM_MORE;
    p->event = UPSTREAM_MORE;
    p->exec_start = data;
    llhttp_errno_t err = llhttp_execute(&p->parser, data, len);
    /* What llhttp took is checked before any of it is acted on: llhttp stops right after
     * the head, after each piece of body and at the end, so nothing it found in this pass
     * has gone anywhere yet. */
    size_t took = err == HPE_OK ? len : (size_t)(llhttp_get_error_pos(&p->parser) - data);
    const char *why = err == HPE_OK || err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE ? framing_error(p, data, took) : NULL;
    if (why) {
        p->error = why;
        return UPSTREAM_ERROR;
    }
    if (err == HPE_OK) {
        *used = len;
        p->fed += len;
        return UPSTREAM_MORE;
    }
    if (err == HPE_PAUSED) {
        *used = took;
        p->fed += *used;           /* the caller passes the rest again, from here */
        llhttp_resume(&p->parser);
        return p->event;
    }
    if (err == HPE_PAUSED_UPGRADE && p->upgraded) {
        /* The head and its end at once: the head now, the end next time; the bytes after
         * it are the caller's, never parsed. */
        *used = took;
        return p->event == UPSTREAM_MORE ? UPSTREAM_END : p->event;
    }
    if (!p->error)
        h1resp_fail(p, "upstream sent an invalid response: ",
                    llhttp_get_error_reason(&p->parser) ? llhttp_get_error_reason(&p->parser) : llhttp_errno_name(err));
    return UPSTREAM_ERROR;
}

int h1resp_eof(struct upstream_response *p)
{
    if (p->complete)
        return UPSTREAM_END;
    if (!p->head_done) {
        if (!p->error)
            p->error = "upstream prematurely closed the connection";
        return UPSTREAM_ERROR;
    }
    /* A body that runs to the close ends here; one with a length or chunks is cut short. */
    llhttp_errno_t e = llhttp_finish(&p->parser);
    if ((e == HPE_OK || e == HPE_PAUSED) && p->complete)
        return UPSTREAM_END;
    if (!p->error)
        p->error = "upstream prematurely closed the connection while sending the body";
    return UPSTREAM_ERROR;
}

/* The text is composed only on a failure, so that a response being waited for - a long
 * poll's, in the proxy's parked state - carries no buffer for it. */
void h1resp_fail(struct upstream_response *p, const char *what, const char *detail)
{
    size_t wl = strlen(what), dl = detail ? strlen(detail) : 0;
    sc_free(p->error_text);
    p->error_text = sc_malloc(wl + dl + 1);
    if (!p->error_text) {
        p->error = "upstream's response refused (and no memory to say why)";
        return;
    }
    memcpy(p->error_text, what, wl);
    if (dl)
        memcpy(p->error_text + wl, detail, dl);
    p->error_text[wl + dl] = 0;
    p->error = p->error_text;
}

void h1resp_free(struct upstream_response *p)
{
    buf_free(&p->fields);
    sc_free(p->error_text);
    p->error_text = NULL;
    p->error = NULL;
}
