/* HTTP/1.1 on the cleartext port: the Upgrade to h2c (RFC 7540 section 3.2), and a short
 * error for every other HTTP/1.1 request.
 *
 * A request that asks to upgrade, carries HTTP2-Settings, names both in Connection and
 * has no body is answered with 101 and becomes stream 1 of a new HTTP/2 session; the
 * bytes after it (the client's preface) go to nghttp2.  Any other request gets 426
 * Upgrade Required and the connection closes.  Bytes that are neither HTTP/1.1 nor the
 * HTTP/2 preface get GOAWAY(PROTOCOL_ERROR). */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "h2park.h"

#define MAX_H1_HEAD 16384

static int b64url_value(int ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '-' || ch == '+') return 62;
    if (ch == '_' || ch == '/') return 63;
    return -1;
}

static ssize_t b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '=')
            break;
        int v = b64url_value((unsigned char)in[i]);
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

static void respond_and_close(struct conn *c, const char *status, const char *extra)
{
    static const char body[] = "h2park speaks HTTP/2 only: use h2c prior knowledge, Upgrade: h2c, or h2 over TLS\n";
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                     status, sizeof body - 1, extra);
    buf_append(&c->out, head, (size_t)n);
    buf_append(&c->out, body, sizeof body - 1);
    c->closing = true;
}

static bool token_list_has(const char *list, const char *token)
{
    size_t tl = strlen(token);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - p) == tl && !strncasecmp(p, token, tl))
            return true;
        p = e;
    }
    return false;
}

/* Not HTTP/1.1 and not the preface: answer as HTTP/2 would to a bad preface. */
static int protocol_error(struct conn *c)
{
    if (conn_h2_start(c))
        return -1;
    nghttp2_session_terminate_session(c->h2, NGHTTP2_PROTOCOL_ERROR);
    c->closing = true;
    buf_free(&c->in);
    return -1;
}

static bool looks_like_h1_start(const char *p, size_t len)
{
    size_t i = 0;
    while (i < len && isupper((unsigned char)p[i]))
        i++;
    if (i == len)
        return i < 16;          /* could still be a method */
    return i > 0 && p[i] == ' ';
}

static int upgrade(struct conn *c, const char *method, const char *target, const char *host, const char *settings,
                   size_t head_len)
{
    uint8_t payload[512];
    ssize_t plen = b64url_decode(settings, strlen(settings), payload, sizeof payload);
    if (plen < 0 || plen % 6) {
        respond_and_close(c, "400 Bad Request", "");
        return -1;
    }
    static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
    if (buf_append(&c->out, switching, sizeof switching - 1) || conn_h2_start(c))
        return -1;
    bool head = !strcmp(method, "HEAD");
    if (nghttp2_session_upgrade2(c->h2, payload, (size_t)plen, head, NULL)) {
        nghttp2_session_terminate_session(c->h2, NGHTTP2_PROTOCOL_ERROR);
        c->closing = true;
        return -1;
    }
    c->max_client_stream = 1;
    struct stream *s = stream_new(c, 1);
    if (!s)
        return -1;
    nghttp2_session_set_stream_user_data(c->h2, 1, s);
    const char *fields[][2] = { { ":method", method }, { ":path", target }, { ":authority", host } };
    for (int i = 0; i < 3; i++)
        if (buf_append(&s->hdr, fields[i][0], strlen(fields[i][0]) + 1) ||
            buf_append(&s->hdr, fields[i][1], strlen(fields[i][1]) + 1))
            return -1;
    s->headers_done = true;
    s->body_eof = true;
    stream_start_handler(s);
    /* What followed the request is the client's HTTP/2 preface and frames. */
    struct buf in = c->in;
    c->in = (struct buf){ 0 };
    int rc = 0;
    if (in.len > head_len)
        rc = conn_feed_h2(c, in.data + head_len, in.len - head_len);
    buf_free(&in);
    return rc;
}

/* A slice of the input: the head is parsed by length, never as a C string, so a NUL
 * or a stray CR in it is just a byte that fails validation. */
struct slice { const char *p; size_t n; };

static bool slice_is(struct slice s, const char *lit)
{
    return s.n == strlen(lit) && !strncasecmp(s.p, lit, s.n);
}

static bool token_list_has_slice(struct slice list, const char *token)
{
    char copy[256];
    if (list.n >= sizeof copy)
        return false;
    memcpy(copy, list.p, list.n);
    copy[list.n] = 0;
    return token_list_has(copy, token);
}

/* Only visible ASCII, spaces and tabs; no NUL, no CR or LF inside a line. */
static bool clean_line(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

static bool next_word(const char **p, const char *end, struct slice *out)
{
    const char *s = *p, *e = memchr(s, ' ', (size_t)(end - s));
    if (!e)
        e = end;
    if (e == s)
        return false;
    *out = (struct slice){ s, (size_t)(e - s) };
    *p = e < end ? e + 1 : end;
    return true;
}

int h1_handle(struct conn *c)
{
    if (!looks_like_h1_start(c->in.data, c->in.len))
        return protocol_error(c);
    const char *end = memmem(c->in.data, c->in.len, "\r\n\r\n", 4);
    if (!end) {
        if (c->in.len > MAX_H1_HEAD) {
            respond_and_close(c, "431 Request Header Fields Too Large", "");
            return -1;
        }
        return 1;
    }
    size_t head_len = (size_t)(end - c->in.data) + 4;
    const char *line = c->in.data, *stop = end + 2;    /* the head: CRLF-terminated lines */
    const char *eol = memmem(line, (size_t)(stop - line), "\r\n", 2);
    struct slice method, target, version;
    const char *w = line;
    if (!clean_line(line, (size_t)(eol - line)) || !next_word(&w, eol, &method) || !next_word(&w, eol, &target) ||
        !next_word(&w, eol, &version) || w != eol || method.n > 15 || target.n > 2047 || version.n != 8 ||
        strncmp(version.p, "HTTP/1.", 7)) {
        respond_and_close(c, "400 Bad Request", "");
        return -1;
    }
    struct slice upgrade_h = { "", 0 }, connection = { "", 0 }, settings = { NULL, 0 }, host = { "", 0 };
    bool has_body = false;
    for (const char *p = eol + 2; p < stop;) {
        const char *next = memmem(p, (size_t)(stop - p), "\r\n", 2);
        const char *colon = memchr(p, ':', (size_t)(next - p));
        if (!clean_line(p, (size_t)(next - p)) || !colon || colon == p) {
            respond_and_close(c, "400 Bad Request", "");
            return -1;
        }
        struct slice name = { p, (size_t)(colon - p) };
        const char *v = colon + 1, *ve = next;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        struct slice value = { v, (size_t)(ve - v) };
        if (slice_is(name, "upgrade"))
            upgrade_h = value;
        else if (slice_is(name, "connection"))
            connection = value;
        else if (slice_is(name, "http2-settings"))
            settings = value;
        else if (slice_is(name, "host"))
            host = value;
        else if ((slice_is(name, "content-length") && !slice_is(value, "0")) || slice_is(name, "transfer-encoding"))
            has_body = true;
        p = next + 2;
    }
    if (token_list_has_slice(upgrade_h, "h2c") && settings.p && token_list_has_slice(connection, "upgrade") &&
        token_list_has_slice(connection, "http2-settings") && !has_body && target.p[0] == '/' && host.n < 256 &&
        settings.n < 1024) {
        char m[16], t[2048], h[256], st[1024];
        snprintf(m, sizeof m, "%.*s", (int)method.n, method.p);
        snprintf(t, sizeof t, "%.*s", (int)target.n, target.p);
        snprintf(h, sizeof h, "%.*s", (int)host.n, host.p);
        snprintf(st, sizeof st, "%.*s", (int)settings.n, settings.p);
        return upgrade(c, m, t, h, st, head_len);
    }
    respond_and_close(c, "426 Upgrade Required", "Upgrade: h2c\r\n");
    return -1;
}
