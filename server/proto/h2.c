/* The HTTP/2 front end: a connection's nghttp2 session, its callbacks, and its streams
 * as requests.
 *
 * Everything here runs inside the serve coroutine (nghttp2 calls back from
 * nghttp2_session_mem_recv and nghttp2_session_send), so it may touch the connection
 * freely but never yields.  Output goes into conn->out, which the serve loop writes to
 * the socket; the callbacks refuse more (NGHTTP2_ERR_WOULDBLOCK) once it holds OUT_HIGH
 * bytes, which keeps a slow reader from growing it.  DATA payloads use
 * NGHTTP2_DATA_FLAG_NO_COPY: nghttp2 frames them and send_data copies the payload once,
 * straight from the file or the handler's output into conn->out, instead of twice
 * through nghttp2's frame buffer.
 *
 * What nghttp2 leaves to its user, and h2park adds: the stream-id rules it leaves loose
 * (RFC 9113 5.1.1, and DATA on closed streams, which it drops without a word), limits on
 * frames that cost work and do nothing (glitches), on resets of every kind (rapid reset,
 * MadeYouReset), and the 431 for oversized heads.  The session's memory comes from the
 * heap through a per-connection nghttp2_mem, so the connection knows its frame buffer and
 * gives its pages back while parked. */
#define _GNU_SOURCE
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy.h"
#include "h2mem.h"
#include "runtime/runtime.h"
#include "proto/h2.h"
#include "scalloc.h"

#define OUT_HIGH (64u << 10)
/* A stream with wide output (a large body, request.c) fills the buffer this far before a
 * write: as many bytes per system call as the handler may get ahead by. */
#define OUT_HIGH_WIDE REQUEST_OUTPUT_WIDE
#define BIG_FRAME (8u << 10)
#define FRAMES_SHIFT 64
#define PREFACE_LEN 24
#define MAX_RESPONSE_HEADERS 100
#define SESSION_WARM_MAX (4u << 10)

struct h2_conn {
    nghttp2_session *session;
    struct {                       /* frame boundaries in the peer's bytes (h2_feed) */
        uint32_t payload_left;
        uint8_t magic_left, hdr_len;
        uint8_t hdr[9];
    } in;
    int32_t max_client_stream;     /* highest stream id the client opened */
    int32_t reset_ids[8];          /* streams this side reset lately */
    uint8_t reset_next;
    int16_t update_credit;         /* WINDOW_UPDATEs the DATA sent can explain */
    float glitch_tokens;           /* useless frames the peer may still send */
    ev_tstamp glitch_at;
    ev_tstamp rst_window;
    uint32_t rst_count;
    bool stream_id_error;          /* the cause of a PROTOCOL_ERROR we return */
    bool flood;                    /* ... of an ENHANCE_YOUR_CALM */
    bool goaway_pending;           /* the daemon is stopping: GOAWAY at the next send */
    /* The stream whose request head is coming in: a head is one HEADERS frame and its
     * CONTINUATIONs, never interleaved with another frame (RFC 9113 section 4.3), so its
     * fields need no lookup each. */
    struct h2_stream *receiving;
    struct h2mem mem;              /* the session's memory: what goes back while parked */
    uint32_t session_size;         /* nghttp2's session struct, as allocated (h2_warm) */
};

struct h2_stream {
    struct request r;
    int32_t id;
    /* The HEADERS frame's own values: nghttp2 reads them, uncopied, when it packs it. */
    char status[4];
    size_t dropped;                /* body bytes nobody read */
    bool deferred;                 /* nghttp2 waits for resume_data */
    bool told_to_stop;             /* RST_STREAM(NO_ERROR) sent: the body is not wanted */
    char length[24];
    /* The request's head and its response's fields, while they fit (request_set_store):
     * one allocation of STREAM_BYTES per request.  Not 1024: nghttp2's two HPACK tables
     * of every connection are in that class, and streams that came and went in a burst
     * would leave holes among them that keep the spans resident (930 bytes per idle
     * connection after a thousand concurrent requests that waited). */
    char store[];
};
#define STREAM_BYTES 896u

static struct h2_conn *H(const struct conn *c) { return c->proto_state; }
static struct h2_stream *S(struct request *r) { return container_of(r, struct h2_stream, r); }
_Static_assert(offsetof(struct h2_stream, store) + 256 <= STREAM_BYTES, "a stream leaves room for a small head");

static nghttp2_session_callbacks *callbacks;

/* ---- the session's memory ---- */

/* nghttp2's frame buffer and the stream map's zero pages go back while parked (h2mem.c). */
static void h2_trim(struct conn *c) { h2mem_trim(&H(c)->mem); }

/* ---- requests on streams ---- */

/* The body's last DATA frame: it ends the stream, or the trailers the handler gave
 * (req_end_with_trailers) do, in a HEADERS frame of their own (RFC 9113 8.1).  nghttp2
 * copies them; a stream whose handler is gone gets none. */
static void end_body(nghttp2_session *session, struct h2_stream *s, uint32_t *data_flags)
{
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    nghttp2_nv nv[MAX_RESPONSE_HEADERS];
    size_t n = 0, off = 0;
    struct header f;
    while (s->r.state != REQ_ORPHANED && n < MAX_RESPONSE_HEADERS && request_trailer(&s->r, &off, &f))
        nv[n++] = (nghttp2_nv){ (uint8_t *)(uintptr_t)f.name, (uint8_t *)(uintptr_t)f.value, strlen(f.name),
                                strlen(f.value), NGHTTP2_NV_FLAG_NONE };
    if (n && !nghttp2_submit_trailer(session, s->id, nv, n))
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
}

static ssize_t data_source_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                                uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    (void)session, (void)stream_id, (void)buf, (void)user_data;
    struct h2_stream *s = source->ptr;
    s->r.head_out = true;          /* DATA is asked for once HEADERS is packed: r->resp is done with */
    size_t avail = request_out_avail(&s->r);
    if (avail) {
        size_t n = avail < length ? avail : length;
        /* What a rate limit lets go now; the rest waits deferred, this stream alone, until
         * the request's timer says its next burst may go (stream_output_ready). */
        if (__builtin_expect(s->r.rate_limited, 0) && !(n = request_rate_allows(&s->r, n))) {
            s->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if (s->r.out_eof && n == avail)
            end_body(session, s, data_flags);
        return (ssize_t)n;
    }
    if (s->r.out_eof || s->r.state == REQ_ORPHANED) {
        end_body(session, s, data_flags);
        return 0;
    }
    s->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
}

/* Response fields whose values are new with nearly every response (a date, a file's
 * modification time, a range) are marked not to be indexed (RFC 7541 section 6.2.3):
 * entered in the HPACK table they would only push out the ones that repeat - server,
 * content-type, accept-ranges - and each entry is memory the connection keeps while it
 * is parked.  nghttp2 already leaves out etag, location and content-length.  The Via a
 * proxied response gets repeats, but its entry would cost every parked client
 * connection 150 bytes to save 9 bytes a response. */
static bool never_indexed(const char *name, size_t len)
{
    switch (len) {
    case 3: return !memcmp(name, "via", 3);
    case 4: return !memcmp(name, "date", 4);
    case 13: return !memcmp(name, "last-modified", 13) || !memcmp(name, "content-range", 13);
    default: return false;
    }
}

/* Every name and value stays where it is - r->resp and the stream - until the HEADERS
 * frame is packed (or dropped with its stream), so nghttp2 is told not to copy them. */
#define NV_NO_COPY (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)

static int stream_respond(struct request *r)
{
    struct h2_stream *s = S(r);
    int code = r->status % 1000;
    s->status[0] = (char)('0' + code / 100), s->status[1] = (char)('0' + code / 10 % 10);
    s->status[2] = (char)('0' + code % 10);
    nghttp2_nv nv[MAX_RESPONSE_HEADERS + 2];
    size_t n = 0;
    nv[n++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)s->status, 7, 3, NV_NO_COPY };
    /* Names are in lower case already (RFC 9113 section 8.2.1: request.c wrote them so). */
    struct resp_field f;
    for (size_t off = 0; n < MAX_RESPONSE_HEADERS + 1 && request_resp_field(r, &off, &f);)
        nv[n++] = (nghttp2_nv){ (uint8_t *)(uintptr_t)f.name, (uint8_t *)(uintptr_t)f.value, f.nlen, f.vlen,
                                NV_NO_COPY | (never_indexed(f.name, f.nlen) ? NGHTTP2_NV_FLAG_NO_INDEX : 0) };
    if (r->tunnel) {                /* a 101's upgrade field: HTTP/2 says it with the 200 (RFC 8441) */
        size_t kept = 1;
        for (size_t i = 1; i < n; i++)
            if (!(nv[i].namelen == 7 && !memcmp(nv[i].name, "upgrade", 7)))
                nv[kept++] = nv[i];
        n = kept;
    }
    if (r->out_length >= 0 && r->status != 304 && r->status != 204) {
        size_t ll = u64_dec(s->length, (uint64_t)r->out_length);
        nv[n++] = (nghttp2_nv){ (uint8_t *)"content-length", (uint8_t *)s->length, 14, ll, NV_NO_COPY };
    }
    nghttp2_data_provider provider = { .source.ptr = s, .read_callback = data_source_read };
    return nghttp2_submit_response(H(r->c)->session, s->id, nv, n, r->out_eof ? NULL : &provider) ? -1 : 0;
}

static void stream_output_ready(struct request *r)
{
    struct h2_stream *s = S(r);
    if (s->deferred && r->state != REQ_DONE && r->state != REQ_ORPHANED) {
        s->deferred = false;
        nghttp2_session_resume_data(H(r->c)->session, s->id);
    }
}

static void stream_consumed(struct request *r, size_t n)
{
    nghttp2_session_consume(H(r->c)->session, S(r)->id, n);
}

static void stream_body_wanted(struct request *r) { (void)r; }

/* A request answered in full whose body stopped coming is not an error: the client is
 * only told to stop (RFC 9113 section 8.1). */
static void stream_cancel(struct request *r)
{
    nghttp2_submit_rst_stream(H(r->c)->session, NGHTTP2_FLAG_NONE, S(r)->id,
                              r->sent_all ? NGHTTP2_NO_ERROR : NGHTTP2_CANCEL);
}

static void stream_release(struct request *r)
{
    struct h2_conn *h = H(r->c);
    if (h && h->receiving == S(r))
        h->receiving = NULL;
    sc_free(S(r));
}

static const struct request_ops stream_ops = {
    .respond = stream_respond, .output_ready = stream_output_ready, .consumed = stream_consumed,
    .body_wanted = stream_body_wanted, .cancel = stream_cancel, .release = stream_release,
};

static struct h2_stream *stream_new(struct conn *c, int32_t id)
{
    struct h2_stream *s = sc_malloc(STREAM_BYTES);
    if (!s)
        return NULL;
    memset(s, 0, sizeof *s);
    s->id = id;
    request_set_store(&s->r, s->store, STREAM_BYTES - offsetof(struct h2_stream, store));
    if (request_init(&s->r, c, &stream_ops, c->sock.ssl ? REQ_H2 : REQ_H2C)) {
        sc_free(s);
        return NULL;
    }
    return s;
}

/* A complete response to a request whose body is still coming (RFC 9113 section 8.1
 * allows it).  The stream stays half-closed (local) until the client ends it, so nghttp2
 * judges everything the client still sends on it - malformed trailers, a second HEADERS,
 * bad padding, a window overflow - as on any open stream, whatever the timing.  The body
 * is dropped as it comes (its window reopened at once) up to DROP_MAX bytes, and waited
 * for body_timeout at most (the request's deadline); past either, RST_STREAM(NO_ERROR)
 * asks the client to stop sending it. */
#define DROP_MAX (1u << 20)

static void drop_unread(struct h2_stream *s, size_t n)
{
    s->dropped += n;
    s->r.in_progress = ev_now(s->r.c->w->loop);
    if (s->r.sent_all && !s->r.body_eof && s->dropped > DROP_MAX && !s->told_to_stop) {
        s->told_to_stop = true;
        nghttp2_submit_rst_stream(H(s->r.c)->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
}

/* ---- nghttp2 callbacks ---- */

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags, void *user_data)
{
    (void)session, (void)flags;
    struct conn *c = user_data;
    if (conn_out_pending(c) >= OUT_HIGH)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (conn_out_reserve(c, length))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    copy_apart(c->sock.out.data + c->sock.out.len, data, length);
    c->sock.out.len += length;
    return (ssize_t)length;
}

static int on_send_data(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd, size_t length,
                        nghttp2_data_source *source, void *user_data)
{
    (void)session;
    struct conn *c = user_data;
    struct h2_stream *s = source->ptr;
    size_t high = s->r.wide_out ? OUT_HIGH_WIDE : OUT_HIGH;
    if (conn_out_pending(c) >= high)
        return NGHTTP2_ERR_WOULDBLOCK;
    size_t pad = frame->data.padlen;
    /* Copied, never sendfile: a payload of at most the peer's frame size (16 KiB) between
     * two 9-byte headers made two system calls per frame and a segment each, and the
     * kernel side of a 1 MiB response cost twice nghttpd's (h2load -c 100 -m 1: 128 send
     * calls per MiB against its 22 writes of the copied frames).  HTTP/1.1 sends a body
     * whole by sendfile. */
    /* A large body fills the buffer up to OUT_HIGH before each write: take that room at
     * once rather than growing (and copying) the buffer frame by frame. */
    size_t room = 9 + length + pad;
    bool fresh_big = c->sock.out.cap == 0 && length >= BIG_FRAME;
    if (fresh_big)
        room += high + FRAMES_SHIFT;
    if (conn_out_reserve(c, room))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    /* That buffer is page-aligned, and so is a whole file's data: payloads 9, 18, 27...
     * bytes into it would each be read to just after their source modulo 4096, the CPU's
     * slow copy (copy.h).  Frames that start a little further in keep clear of it. */
    if (fresh_big)
        c->sock.out.len = c->sock.out_off = FRAMES_SHIFT;
    char *p = c->sock.out.data + c->sock.out.len;
    memcpy(p, framehd, 9);
    p += 9;
    if (pad > 0)
        *p++ = (char)(pad - 1);
    if (request_out_take(&s->r, p, length))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    p += length;
    if (pad > 1) {
        memset(p, 0, pad - 1);
        p += pad - 1;
    }
    c->sock.out.len = (size_t)(p - c->sock.out.data);
    return 0;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct h2_stream *s = stream_new(c, frame->hd.stream_id);
    if (!s)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
    H(c)->receiving = s;
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data)
{
    (void)flags;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct h2_stream *s = H(user_data)->receiving;
    if (!s || s->id != frame->hd.stream_id)
        s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s)
        request_add_header(&s->r, (const char *)name, namelen, (const char *)value, valuelen);
    return 0;
}

/* Resets of every kind count toward one limit: those the client sends (rapid reset,
 * CVE-2023-44487) and the stream errors this side or nghttp2 sends because of what the
 * client sent (MadeYouReset, CVE-2025-8671), each a request started and thrown away. */
static void count_reset(struct conn *c)
{
    struct h2_conn *h = H(c);
    ev_tstamp now = ev_now(c->w->loop);
    if (now - h->rst_window >= 1.0) {
        h->rst_window = now;
        h->rst_count = 0;
    }
    uint32_t limit = c->w->cfg->max_resets_per_second;
    if (++h->rst_count == limit + 1) {
        log_msg(LOG_WARN, "%s: more than %u stream resets in a second, sending GOAWAY(ENHANCE_YOUR_CALM)",
                conn_peer(c), limit);
        nghttp2_session_terminate_session(h->session, NGHTTP2_ENHANCE_YOUR_CALM);
    }
}

/* Frames that cost work and do nothing for the peer ("glitches": PRIORITY, which h2park
 * ignores; empty DATA that does not end the stream; PING and SETTINGS, each answered;
 * WINDOW_UPDATE beyond what the DATA this side sent can explain; frame types nobody
 * defined) draw from a bucket that refills at GLITCH_RATE per second up to
 * GLITCH_BURST; a peer that empties it gets GOAWAY(ENHANCE_YOUR_CALM), as Go's and
 * h2o's servers do for such floods.  A legitimate peer sends a handful. */
#define GLITCH_BURST 1000.0
#define GLITCH_RATE 100.0
/* WINDOW_UPDATEs one DATA frame sent can justify: one for its stream, one for the
 * connection; the credit is capped so a long download does not bank a flood. */
#define UPDATE_CREDIT_PER_DATA 2
#define UPDATE_CREDIT_MAX 1024

static bool glitch(struct conn *c, const char *what)
{
    struct h2_conn *h = H(c);
    ev_tstamp now = ev_now(c->w->loop);
    double tokens = h->glitch_tokens + (now - h->glitch_at) * GLITCH_RATE;
    h->glitch_at = now;
    h->glitch_tokens = (float)(tokens > GLITCH_BURST ? GLITCH_BURST : tokens);
    if (--h->glitch_tokens >= 0)
        return false;
    log_msg(LOG_WARN, "%s: flood of %s frames, sending GOAWAY(ENHANCE_YOUR_CALM)", conn_peer(c), what);
    h->flood = true;
    return true;
}

static bool is_glitch(struct conn *c, const nghttp2_frame_hd *hd, const char **what)
{
    struct h2_conn *h = H(c);
    switch (hd->type) {
    case NGHTTP2_PRIORITY:
        *what = "PRIORITY";
        return true;
    case NGHTTP2_PING:
        *what = "PING";
        return !(hd->flags & NGHTTP2_FLAG_ACK);
    case NGHTTP2_SETTINGS:
        *what = "SETTINGS";
        return !(hd->flags & NGHTTP2_FLAG_ACK) && !c->head_due;
    case NGHTTP2_WINDOW_UPDATE:
        *what = "WINDOW_UPDATE";
        if (h->update_credit > 0) {
            h->update_credit--;
            return false;
        }
        return true;
    case NGHTTP2_DATA:          /* counted once its padding is known (on_frame_recv) */
    case NGHTTP2_HEADERS: case NGHTTP2_RST_STREAM: case NGHTTP2_PUSH_PROMISE: case NGHTTP2_GOAWAY:
    case NGHTTP2_CONTINUATION:
        return false;
    default:
        *what = "unknown";
        return true;
    }
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            c->head_due = false;    /* the preface is complete */
        break;
    case NGHTTP2_RST_STREAM:
        count_reset(c);
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA: {
        if (frame->hd.type == NGHTTP2_DATA && frame->hd.length == frame->data.padlen &&
            !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && glitch(c, "empty DATA"))
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        struct h2_stream *s = H(c)->receiving;
        if (!s || s->id != frame->hd.stream_id)
            s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!s)
            break;
        if (frame->hd.type == NGHTTP2_HEADERS && s->r.state == REQ_RECEIVING) {
            if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
                s->r.body_eof = true;
            /* RFC 8441's extended CONNECT (nghttp2 has checked its pseudo-headers): the
             * handler may make the stream a tunnel. */
            if (s->r.known[KF_PROTOCOL]) {       /* on hardly any request: looked at first */
                const char *m = req_known(&s->r, KF_METHOD);
                s->r.upgrade_offered = m && !strcmp(m, "CONNECT");
            }
            if (request_start(&s->r))
                nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
        } else if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            request_body_end(&s->r);
        }
        break;
    }
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t len,
                         void *user_data)
{
    (void)flags, (void)user_data;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
    /* Consumed (and the window reopened) only as the handler reads it, so a handler that
     * stops reading stops the peer after one window; body nobody will read reopens it
     * at once. */
    if (!s || s->r.state != REQ_HANDLING || !s->r.handler) {
        nghttp2_session_consume(session, stream_id, len);
        if (s)
            drop_unread(s, len);
        return 0;
    }
    return request_body(&s->r, (const char *)data, len) ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data)
{
    (void)error_code, (void)user_data;
    struct h2_stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!s)
        return 0;
    /* No need to take s back from the stream: with no_closed_streams nghttp2 destroys
     * the stream, and its pointer to s, as this returns. */
    request_closed(&s->r);
    return 0;
}

/* RFC 9113 section 5.1.1: a new stream's id must exceed every id the client used
 * before; a HEADERS frame for a lower id that is not an open stream is a connection
 * error.  nghttp2 ignores such frames when it no longer knows the stream, so check here.
 * Streams this side reset are exempt: the client may have sent on them before it saw
 * the RST_STREAM (section 5.1, "closed"). */
static bool recently_reset(const struct h2_conn *h, int32_t id)
{
    for (unsigned i = 0; i < sizeof h->reset_ids / sizeof h->reset_ids[0]; i++)
        if (h->reset_ids[i] == id)
            return true;
    return false;
}

/* The same monotony makes "closed" exact without remembering closed streams: an odd id
 * at or below the highest the client opened that nghttp2 does not know is closed (or
 * was skipped, which closes it).  DATA on it is a stream error STREAM_CLOSED (sections
 * 5.1 and 6.1) - except on the few streams this side reset lately, whose frames in
 * flight section 5.1 says to ignore.  nghttp2 drops such DATA without a callback, so
 * h2_feed asks before it hands over each DATA frame. */
static void check_data(struct conn *c, int32_t stream_id)
{
    struct h2_conn *h = H(c);
    if (!(stream_id & 1) || stream_id > h->max_client_stream)
        return;             /* an idle stream: nghttp2's PROTOCOL_ERROR */
    if (nghttp2_session_find_stream(h->session, stream_id) || recently_reset(h, stream_id))
        return;
    nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_STREAM_CLOSED);
}

static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *user_data)
{
    struct conn *c = user_data;
    struct h2_conn *h = H(c);
    const char *what;
    if (is_glitch(c, hd, &what) && glitch(c, what))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1))
        return 0;
    if (hd->stream_id > h->max_client_stream) {
        h->max_client_stream = hd->stream_id;
        return 0;
    }
    if (!nghttp2_session_find_stream(session, hd->stream_id) && !recently_reset(h, hd->stream_id)) {
        log_msg(LOG_DEBUG, "%s: HEADERS on stream %d after stream %d", conn_peer(c), hd->stream_id,
                h->max_client_stream);
        h->stream_id_error = true;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    struct h2_conn *h = H(c);
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        h->reset_ids[h->reset_next] = frame->hd.stream_id;
        h->reset_next = (uint8_t)((h->reset_next + 1) % (sizeof h->reset_ids / sizeof h->reset_ids[0]));
        /* NO_ERROR only asks the client to stop sending a body nobody reads (8.1). */
        if (frame->rst_stream.error_code != NGHTTP2_NO_ERROR)
            count_reset(c);
    } else if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
               (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct h2_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (s) {
            request_sent_all(&s->r);
            if (!s->r.body_eof) {       /* answered early: the rest of the body is dropped */
                drop_unread(s, 0);
                request_arm_timer(&s->r);   /* body_timeout for it */
            }
        }
    }
    if (frame->hd.type == NGHTTP2_DATA && h->update_credit < UPDATE_CREDIT_MAX)
        h->update_credit += UPDATE_CREDIT_PER_DATA;
    return 0;
}

/* Over TLS a DATA frame's header and payload together fill one 16 KiB TLS record (the
 * largest there is), rather than a full record and a 9-byte one: a full-size frame would
 * be 16393 bytes. */
static ssize_t data_length(nghttp2_session *session, uint8_t frame_type, int32_t stream_id, int32_t session_window,
                           int32_t stream_window, uint32_t max_frame, void *user_data)
{
    (void)session, (void)frame_type, (void)stream_id;
    const struct conn *c = user_data;
    ssize_t n = c->sock.ssl && max_frame >= TLS_RECORD_MAX ? TLS_RECORD_MAX - 9 : (ssize_t)max_frame;
    if (n > session_window)
        n = session_window;
    if (n > stream_window)
        n = stream_window;
    return n;
}

static int on_error(nghttp2_session *session, int lib_error_code, const char *msg, size_t len, void *user_data)
{
    (void)session, (void)lib_error_code;
    log_msg(LOG_DEBUG, "%s: nghttp2: %.*s", conn_peer(user_data), (int)len, msg);
    return 0;
}

static void init_once(void)
{
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_send_callback(callbacks, on_send);
    nghttp2_session_callbacks_set_send_data_callback(callbacks, on_send_data);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
    nghttp2_session_callbacks_set_error_callback2(callbacks, on_error);
    nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, on_begin_frame);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_send);
    nghttp2_session_callbacks_set_data_source_read_length_callback(callbacks, data_length);
}

/* Made for each session from the configuration it starts under (a reload changes them). */
static nghttp2_option *session_options(const struct config *cfg)
{
    nghttp2_option *o;
    if (nghttp2_option_new(&o))
        return NULL;
    nghttp2_option_set_no_auto_window_update(o, 1);
    /* Closed streams are not kept for the priority tree: their memory goes at once. */
    nghttp2_option_set_no_closed_streams(o, 1);
    /* Our own reset limit (max_resets_per_second) acts first; nghttp2's stays as a
     * backstop above it. */
    nghttp2_option_set_stream_reset_rate_limit(o, 4ull * cfg->max_resets_per_second, 2ull * cfg->max_resets_per_second);
    /* Every entry of the response HPACK table is memory a parked connection keeps. */
    nghttp2_option_set_max_deflate_dynamic_table_size(o, cfg->hpack_encoder_table_size);
    return o;
}

/* ---- the protocol, for the connection core ---- */

static int h2_start(struct conn *c)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
    struct h2_conn *h = sc_calloc(1, sizeof *h);
    if (!h)
        return -1;
    c->proto_state = h;
    nghttp2_mem mem = h2mem_allocator(&h->mem);   /* nghttp2 keeps a copy */
    const struct config *cfg = c->w->cfg;
    nghttp2_option *options = session_options(cfg);
    int failed = !options || nghttp2_session_server_new3(&h->session, callbacks, c, options, &mem);
    nghttp2_option_del(options);
    if (failed)
        return -1;
    /* Whole turns of h2_warm only, so that it never points past the struct's allocation. */
    size_t session_size = sc_usable_size(h->session);
    h->session_size = (uint32_t)(session_size < SESSION_WARM_MAX ? session_size : SESSION_WARM_MAX) & ~255u;
    h->in.magic_left = PREFACE_LEN;
    h->glitch_tokens = (float)GLITCH_BURST;
    h->glitch_at = ev_now(c->w->loop);
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->max_concurrent_streams },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, cfg->initial_window_size },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, cfg->max_header_list_size },
        { NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1 },   /* RFC 8441: WebSocket over a stream */
    };
    nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    if (cfg->connection_window_size > 65535)
        nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0, (int32_t)cfg->connection_window_size);
    if (c->sock.ssl && !tls_cipher_adequate(c->sock.ssl)) {
        log_msg(LOG_INFO, "%s: %s with %s is not allowed for HTTP/2, INADEQUATE_SECURITY", conn_peer(c),
                SSL_get_version(c->sock.ssl), SSL_get_cipher_name(c->sock.ssl));
        nghttp2_session_terminate_session(h->session, NGHTTP2_INADEQUATE_SECURITY);
        conn_set_state(c, CONN_CLOSING);
    }
    return 0;
}

static int mem_recv(struct conn *c, const char *data, size_t len)
{
    struct h2_conn *h = H(c);
    ssize_t rv = nghttp2_session_mem_recv(h->session, (const uint8_t *)data, len);
    if (rv < 0) {
        log_msg(LOG_DEBUG, "%s: %s", conn_peer(c), nghttp2_strerror((int)rv));
        /* A bad preface or a frame nghttp2 cannot take: tell the peer, then close. */
        uint32_t code = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || h->flood
                            ? NGHTTP2_ENHANCE_YOUR_CALM
                        : rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC || h->stream_id_error ? NGHTTP2_PROTOCOL_ERROR
                                                                                   : NGHTTP2_INTERNAL_ERROR;
        nghttp2_session_terminate_session(h->session, code);
        return -1;
    }
    return 0;
}

/* nghttp2 takes the bytes as they come; alongside, the frame boundaries are followed
 * (the preface, then a 9-byte header and its payload, again and again), so that just
 * before nghttp2 meets a DATA frame - everything ahead of it processed - its stream can
 * be checked (check_data). */
static int h2_feed(struct conn *c, const char *data, size_t len)
{
    struct h2_conn *h = H(c);
    if (!len)
        return -1;                  /* the peer is gone */
    size_t fed = 0, pos = 0;
    while (pos < len) {
        size_t left = len - pos, k;
        if (h->in.magic_left) {
            k = left < h->in.magic_left ? left : h->in.magic_left;
            h->in.magic_left -= (uint8_t)k;
        } else if (h->in.payload_left) {
            k = left < h->in.payload_left ? left : h->in.payload_left;
            h->in.payload_left -= (uint32_t)k;
        } else {
            k = left < 9u - h->in.hdr_len ? left : 9u - h->in.hdr_len;
            memcpy(h->in.hdr + h->in.hdr_len, data + pos, k);
            h->in.hdr_len += (uint8_t)k;
            if (h->in.hdr_len == 9) {
                const uint8_t *hd = h->in.hdr;
                h->in.hdr_len = 0;
                h->in.payload_left = (uint32_t)hd[0] << 16 | (uint32_t)hd[1] << 8 | hd[2];
                if (hd[3] == NGHTTP2_DATA) {
                    if (pos > fed && mem_recv(c, data + fed, pos - fed))
                        return -1;
                    fed = pos;
                    check_data(c, (int32_t)(((uint32_t)hd[5] << 24 | (uint32_t)hd[6] << 16 |
                                             (uint32_t)hd[7] << 8 | hd[8]) & 0x7fffffff));
                }
            }
        }
        pos += k;
    }
    return fed < len ? mem_recv(c, data + fed, len - fed) : 0;
}

static int h2_send(struct conn *c)
{
    struct h2_conn *h = H(c);
    if (h->goaway_pending) {
        h->goaway_pending = false;
        nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->session),
                              NGHTTP2_NO_ERROR, NULL, 0);
    }
    int rv = nghttp2_session_send(h->session);
    if (rv && rv != NGHTTP2_ERR_WOULDBLOCK) {
        log_msg(LOG_DEBUG, "%s: %s", conn_peer(c), nghttp2_strerror(rv));
        return -1;
    }
    return 0;
}

static bool h2_want_read(const struct conn *c) { return nghttp2_session_want_read(H(c)->session); }
static bool h2_want_write(const struct conn *c) { return H(c)->goaway_pending || nghttp2_session_want_write(H(c)->session); }

/* nghttp2's session struct (3 KiB as allocated: the frame being read, the settings, the
 * windows, the HPACK contexts, the stream map's header) is what every request's input
 * goes through first; at 1000 connections with one request each it is cold every time,
 * and read field by field it cost a miss after a miss (h2c 1 KiB -c 1000 -m 1: user time
 * 5.62 against 6.29 us per request with it fetched ahead, median of five interleaved
 * rounds, lower in four of them). */
static void h2_warm(const struct conn *c)
{
    const struct h2_conn *h = H(c);
    for (uint32_t off = 0; off < h->session_size; off += 256) {    /* four lines a turn */
        const char *p = (const char *)h->session + off;
        __builtin_prefetch(p);
        __builtin_prefetch(p + 64);
        __builtin_prefetch(p + 128);
        __builtin_prefetch(p + 192);
    }
}

static bool h2_finished(const struct conn *c)
{
    nghttp2_session *s = H(c)->session;
    return c->peer_eof || (!nghttp2_session_want_read(s) && !nghttp2_session_want_write(s));
}

/* A GOAWAY with code, then close once it is written. */
static bool goaway_then_close(struct conn *c, uint32_t code)
{
    nghttp2_session_terminate_session(H(c)->session, code);
    conn_set_state(c, CONN_CLOSING);
    return false;
}

static bool h2_timeout(struct conn *c, int kind)
{
    switch (kind) {
    case TIMEOUT_HEAD:
        log_msg(LOG_DEBUG, "%s: no SETTINGS within %.0fs, closing", conn_peer(c), c->w->cfg->preface_timeout);
        return goaway_then_close(c, NGHTTP2_SETTINGS_TIMEOUT);
    case TIMEOUT_IDLE:
        log_msg(LOG_DEBUG, "%s: idle for %.0fs, GOAWAY", conn_peer(c), c->w->cfg->idle_timeout);
        return goaway_then_close(c, NGHTTP2_NO_ERROR);
    default:
        log_msg(LOG_DEBUG, "%s: no progress on any stream, GOAWAY", conn_peer(c));
        return goaway_then_close(c, NGHTTP2_NO_ERROR);
    }
}

static void h2_shutdown(struct conn *c) { H(c)->goaway_pending = true; }

static void h2_destroy(struct conn *c)
{
    struct h2_conn *h = H(c);
    if (!h)
        return;
    if (h->session)
        nghttp2_session_del(h->session);
    sc_free(h);
    c->proto_state = NULL;
}

const struct conn_proto h2_proto = {
    .name = "h2", .start = h2_start, .feed = h2_feed, .send = h2_send, .want_read = h2_want_read,
    .want_write = h2_want_write, .finished = h2_finished, .timeout = h2_timeout, .shutdown = h2_shutdown,
    .destroy = h2_destroy, .trim = h2_trim, .warm = h2_warm,
};

/* HTTP/1.1's Upgrade: h2c (RFC 7540 section 3.2): the session starts from the client's
 * HTTP2-Settings, and the request that asked becomes stream 1, half closed, with its
 * head moved over as it was parsed. */
int h2_start_upgraded(struct conn *c, const uint8_t *settings, size_t len, struct buf *head)
{
    c->proto = &h2_proto;
    if (h2_start(c))
        return -1;
    struct h2_conn *h = H(c);
    struct h2_stream *s = stream_new(c, 1);
    if (!s)
        return -1;
    for (size_t off = 0; off < head->len;) {
        const char *n = head->data + off, *v = n + strlen(n) + 1;
        off = (size_t)(v - head->data) + strlen(v) + 1;
        request_add_header(&s->r, n, strlen(n), v, strlen(v));
    }
    const char *method = req_known(&s->r, KF_METHOD);
    bool head_request = method && !strcmp(method, "HEAD");
    if (nghttp2_session_upgrade2(h->session, settings, len, head_request, s)) {
        request_closed(&s->r);
        nghttp2_session_terminate_session(h->session, NGHTTP2_PROTOCOL_ERROR);
        conn_set_state(c, CONN_CLOSING);
        return 0;
    }
    h->max_client_stream = 1;
    c->since = ev_now(c->w->loop);      /* the client's preface is due now */
    c->head_due = true;
    s->r.body_eof = true;
    if (request_start(&s->r))
        nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, 1, NGHTTP2_REFUSED_STREAM);
    return 0;
}

/* The client's preface and frames that followed its upgrade request. */
int h2_feed_upgraded(struct conn *c, const char *data, size_t len) { return len ? h2_feed(c, data, len) : 0; }
