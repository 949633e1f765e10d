/* The nghttp2 session of a connection: its callbacks, settings and body sources.
 *
 * Everything here runs inside the serve coroutine (nghttp2 calls back from
 * nghttp2_session_mem_recv and nghttp2_session_send), so it may touch the connection
 * freely but never yields.  Output goes into conn->out, which the serve loop writes to
 * the socket; the callbacks refuse more (NGHTTP2_ERR_WOULDBLOCK) once it holds
 * OUT_HIGH bytes, which keeps a slow reader from growing it.  DATA payloads use
 * NGHTTP2_DATA_FLAG_NO_COPY: nghttp2 frames them and send_data copies the payload once,
 * straight from the file or the handler's output into conn->out, instead of twice
 * through nghttp2's frame buffer. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h2park.h"
#include "scalloc.h"

#define OUT_HIGH (64u << 10)
#define BIG_FRAME (8u << 10)

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

static size_t out_pending(const struct conn *c) { return c->out.len - c->out_off; }

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags, void *user_data)
{
    (void)session, (void)flags;
    struct conn *c = user_data;
    if (out_pending(c) >= OUT_HIGH)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (buf_append(&c->out, data, length))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)length;
}

static int on_send_data(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd, size_t length,
                        nghttp2_data_source *source, void *user_data)
{
    (void)session;
    struct conn *c = user_data;
    struct stream *s = source->ptr;
    if (out_pending(c) >= OUT_HIGH)
        return NGHTTP2_ERR_WOULDBLOCK;
    size_t pad = frame->data.padlen;
    /* A large body fills the buffer up to OUT_HIGH before each write: take that room at
     * once rather than growing (and copying) the buffer frame by frame. */
    size_t room = 9 + length + pad;
    if (c->out.cap == 0 && length >= BIG_FRAME)
        room += OUT_HIGH;
    if (buf_reserve(&c->out, room))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    char *p = c->out.data + c->out.len;
    memcpy(p, framehd, 9);
    p += 9;
    if (pad > 0)
        *p++ = (char)(pad - 1);
    if (s->file_mem) {
        memcpy(p, s->file_mem + s->file_off, length);
        s->file_off += (int64_t)length;
        s->file_left -= (int64_t)length;
    } else if (s->file_fd >= 0) {
        size_t done = 0;
        while (done < length) {
            ssize_t n = pread(s->file_fd, p + done, length - done, s->file_off);
            if (n <= 0) {
                if (n < 0 && errno == EINTR)
                    continue;
                log_msg(LOG_WARN, "%s: file for stream %d ended early", c->peer, s->id);
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            }
            done += (size_t)n;
            s->file_off += n;
        }
        s->file_left -= (int64_t)length;
    } else {
        memcpy(p, s->outb.data + s->outb_off, length);
        s->outb_off += length;
        if (s->outb_off == s->outb.len) {
            buf_free(&s->outb);
            s->outb_off = 0;
        }
        if (s->wait == WAIT_WRITE)
            stream_make_runnable(s);
    }
    p += length;
    if (pad > 1) {
        memset(p, 0, pad - 1);
        p += pad - 1;
    }
    c->out.len = (size_t)(p - c->out.data);
    s->bytes_sent += length;
    s->out_progress = ev_now(c->w->loop);
    return 0;
}

ssize_t data_source_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    (void)session, (void)stream_id, (void)buf, (void)user_data;
    struct stream *s = source->ptr;
    if (s->file_fd >= 0) {
        size_t n = s->file_left < (int64_t)length ? (size_t)s->file_left : length;
        *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if ((int64_t)n == s->file_left)
            *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    size_t avail = s->outb.len - s->outb_off;
    if (avail) {
        size_t n = avail < length ? avail : length;
        *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if (s->out_eof && n == avail)
            *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    if (s->out_eof || s->cancelled) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
    }
    s->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct stream *s = stream_new(c, frame->hd.stream_id);
    if (!s)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
    return 0;
}

/* An HTTP-date in any of the three forms RFC 9110 section 5.6.7 requires a recipient to
 * accept: IMF-fixdate, the obsolete RFC 850 form and asctime's.  -1 if none fits. */
static int64_t parse_http_date(const char *v)
{
    static const char *const forms[] = { "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                         "%a %b %e %H:%M:%S %Y" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(v, forms[i], &tm);
        if (!end || *end)
            continue;
        int64_t t = (int64_t)timegm(&tm);
        /* RFC 850's two-digit year: one more than 50 years ahead is in the past century. */
        if (i == 1 && t > (int64_t)time(NULL) + 50ll * 366 * 86400) {
            tm.tm_year -= 100;
            t = (int64_t)timegm(&tm);
        }
        return t;
    }
    return -1;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data)
{
    (void)flags, (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s || s->too_large)
        return 0;
    /* RFC 9113 section 6.5.2 counts each field as name + value + 32. */
    s->header_bytes += (uint32_t)(namelen + valuelen + 32);
    if (s->header_bytes > cfg.max_header_list_size) {
        s->too_large = true;
        return 0;
    }
    bool keep = (namelen == 7 && (!memcmp(name, ":method", 7))) || (namelen == 5 && !memcmp(name, ":path", 5)) ||
                (namelen == 10 && !memcmp(name, ":authority", 10));
    if (keep) {
        if (buf_append(&s->hdr, name, namelen) || buf_append(&s->hdr, "", 1) ||
            buf_append(&s->hdr, value, valuelen) || buf_append(&s->hdr, "", 1))
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    } else if (namelen == 17 && !memcmp(name, "if-modified-since", 17) && valuelen < 64) {
        char v[64];
        memcpy(v, value, valuelen);
        v[valuelen] = 0;
        s->if_modified_since = parse_http_date(v);
    } else if (namelen == 14 && !memcmp(name, "content-length", 14) && valuelen < 20) {
        char v[24];
        memcpy(v, value, valuelen);
        v[valuelen] = 0;
        s->content_length = strtoll(v, NULL, 10);
    }
    return 0;
}

/* Resets of every kind count toward one limit: those the client sends (rapid reset,
 * CVE-2023-44487) and the stream errors this side or nghttp2 sends because of what the
 * client sent (MadeYouReset, CVE-2025-8671), each a request started and thrown away. */
static void count_reset(struct conn *c)
{
    ev_tstamp now = ev_now(c->w->loop);
    if (now - c->rst_window >= 1.0) {
        c->rst_window = now;
        c->rst_count = 0;
    }
    if (++c->rst_count == cfg.max_resets_per_second + 1) {
        log_msg(LOG_WARN, "%s: more than %u stream resets in a second, sending GOAWAY(ENHANCE_YOUR_CALM)", c->peer,
                cfg.max_resets_per_second);
        nghttp2_session_terminate_session(c->h2, NGHTTP2_ENHANCE_YOUR_CALM);
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
    ev_tstamp now = ev_now(c->w->loop);
    double tokens = c->glitch_tokens + (now - c->glitch_at) * GLITCH_RATE;
    c->glitch_at = now;
    c->glitch_tokens = tokens > GLITCH_BURST ? GLITCH_BURST : tokens;
    if (--c->glitch_tokens >= 0)
        return false;
    log_msg(LOG_WARN, "%s: flood of %s frames, sending GOAWAY(ENHANCE_YOUR_CALM)", c->peer, what);
    c->flood = true;
    return true;
}

static bool is_glitch(struct conn *c, const nghttp2_frame_hd *hd, const char **what)
{
    switch (hd->type) {
    case NGHTTP2_PRIORITY:
        *what = "PRIORITY";
        return true;
    case NGHTTP2_PING:
        *what = "PING";
        return !(hd->flags & NGHTTP2_FLAG_ACK);
    case NGHTTP2_SETTINGS:
        *what = "SETTINGS";
        return !(hd->flags & NGHTTP2_FLAG_ACK) && c->settings_seen;
    case NGHTTP2_WINDOW_UPDATE:
        *what = "WINDOW_UPDATE";
        if (c->update_credit > 0) {
            c->update_credit--;
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
            c->settings_seen = true;
        break;
    case NGHTTP2_RST_STREAM:
        count_reset(c);
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA: {
        if (frame->hd.type == NGHTTP2_DATA && frame->hd.length == frame->data.padlen &&
            !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && glitch(c, "empty DATA"))
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        struct stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (!s)
            break;
        if (frame->hd.type == NGHTTP2_HEADERS && !s->headers_done) {
            s->headers_done = true;
            if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
                s->body_eof = true;
            stream_start_handler(s);
        } else if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            s->body_eof = true;
            if (s->wait == WAIT_BODY)
                stream_make_runnable(s);
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
    struct stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!s || s->handler_done || s->cancelled) {
        nghttp2_session_consume(session, stream_id, len);
        return 0;
    }
    /* Consumed (and the window reopened) only as the handler reads it, so a handler that
     * stops reading stops the peer after one window. */
    if (buf_append(&s->body, data, len))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    s->in_progress = ev_now(s->c->w->loop);
    if (s->wait == WAIT_BODY)
        stream_make_runnable(s);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data)
{
    (void)error_code;
    struct conn *c = user_data;
    struct stream *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    s->closed = true;
    if (s->headers_done && c->open_streams && --c->open_streams == 0)
        c->idle_since = ev_now(c->w->loop);
    if (s->status && access_log_enabled()) {
        char line[1400], when[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        int n = snprintf(line, sizeof line, "%s %s %s %.1000s %d %llu %.3f %s\n", when, c->peer,
                         s->method ? s->method : "-", s->path ? s->path : "-", s->status,
                         (unsigned long long)s->bytes_sent, (ev_now(c->w->loop) - s->started) * 1000,
                         c->tls ? "h2" : "h2c");
        if (n > 0)
            access_log_write(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
    if (!s->handler) {
        s->handler_done = true;        /* never started, or already returned */
    } else {
        s->cancelled = true;
        stream_make_runnable(s);
    }
    stream_release_if_done(s);
    return 0;
}

/* RFC 9113 section 5.1.1: a new stream's id must exceed every id the client used
 * before; a HEADERS frame for a lower id that is not an open stream is a connection
 * error.  nghttp2 ignores such frames when it no longer knows the stream, so check here.
 * Streams this side reset are exempt: the client may have sent on them before it saw
 * the RST_STREAM (section 5.1, "closed"). */
static bool recently_reset(const struct conn *c, int32_t id)
{
    for (unsigned i = 0; i < sizeof c->reset_ids / sizeof c->reset_ids[0]; i++)
        if (c->reset_ids[i] == id)
            return true;
    return false;
}

/* The same monotony makes "closed" exact without remembering closed streams: an odd id
 * at or below the highest the client opened that nghttp2 does not know is closed (or
 * was skipped, which closes it).  DATA on it is a stream error STREAM_CLOSED (sections
 * 5.1 and 6.1) - except on the few streams this side reset lately, whose frames in
 * flight section 5.1 says to ignore.  nghttp2 drops such DATA without a callback, so the
 * serve loop asks before it feeds each DATA frame (session_check_data). */
void session_check_data(struct conn *c, int32_t stream_id)
{
    if (!(stream_id & 1) || stream_id > c->max_client_stream)
        return;             /* an idle stream: nghttp2's PROTOCOL_ERROR */
    if (nghttp2_session_find_stream(c->h2, stream_id) || recently_reset(c, stream_id))
        return;
    nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_STREAM_CLOSED);
}

static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *user_data)
{
    struct conn *c = user_data;
    const char *what;
    if (is_glitch(c, hd, &what) && glitch(c, what))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1))
        return 0;
    if (hd->stream_id > c->max_client_stream) {
        c->max_client_stream = hd->stream_id;
        return 0;
    }
    if (!nghttp2_session_find_stream(session, hd->stream_id) && !recently_reset(c, hd->stream_id)) {
        log_msg(LOG_DEBUG, "%s: HEADERS on stream %d after stream %d", c->peer, hd->stream_id, c->max_client_stream);
        c->stream_id_error = true;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        c->reset_ids[c->reset_next] = frame->hd.stream_id;
        c->reset_next = (uint8_t)((c->reset_next + 1) % (sizeof c->reset_ids / sizeof c->reset_ids[0]));
        /* NO_ERROR only asks the client to stop sending a body nobody reads (8.1). */
        if (frame->rst_stream.error_code != NGHTTP2_NO_ERROR)
            count_reset(c);
    } else if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
               (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (s) {
            s->sent_all = true;
            stream_end_unread_request(s);
        }
    }
    if (frame->hd.type == NGHTTP2_DATA && c->update_credit < UPDATE_CREDIT_MAX)
        c->update_credit += UPDATE_CREDIT_PER_DATA;
    return 0;
}

static int on_error(nghttp2_session *session, int lib_error_code, const char *msg, size_t len, void *user_data)
{
    (void)session, (void)lib_error_code;
    struct conn *c = user_data;
    log_msg(LOG_DEBUG, "%s: nghttp2: %.*s", c->peer, (int)len, msg);
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
    nghttp2_option_new(&options);
    nghttp2_option_set_no_auto_window_update(options, 1);
    /* Closed streams are not kept for the priority tree: their memory goes at once. */
    nghttp2_option_set_no_closed_streams(options, 1);
    /* Our own reset limit (max_resets_per_second) acts first; nghttp2's stays as a
     * backstop above it. */
    nghttp2_option_set_stream_reset_rate_limit(options, 4ull * cfg.max_resets_per_second, 2ull * cfg.max_resets_per_second);
}

int session_create(struct conn *c)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
    nghttp2_mem mem = h2_mem;        /* nghttp2 keeps a copy */
    mem.mem_user_data = c;
    c->glitch_tokens = GLITCH_BURST;
    c->glitch_at = ev_now(c->w->loop);
    if (nghttp2_session_server_new3(&c->h2, callbacks, c, options, &mem))
        return -1;
    return 0;
}

void session_submit_settings(struct conn *c)
{
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg.max_concurrent_streams },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, cfg.initial_window_size },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, cfg.max_header_list_size },
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    if (cfg.connection_window_size > 65535)
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, (int32_t)cfg.connection_window_size);
}
