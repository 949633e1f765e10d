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
    if (in.len > head_len) {
        ssize_t rv = nghttp2_session_mem_recv(c->h2, (const uint8_t *)in.data + head_len, in.len - head_len);
        if (rv < 0) {
            nghttp2_session_terminate_session(c->h2, NGHTTP2_PROTOCOL_ERROR);
            c->closing = true;
            rc = -1;
        }
    }
    buf_free(&in);
    return rc;
}

int h1_handle(struct conn *c)
{
    if (!looks_like_h1_start(c->in.data, c->in.len))
        return protocol_error(c);
    char *end = memmem(c->in.data, c->in.len, "\r\n\r\n", 4);
    if (!end) {
        if (c->in.len > MAX_H1_HEAD) {
            respond_and_close(c, "431 Request Header Fields Too Large", "");
            return -1;
        }
        return 1;
    }
    size_t head_len = (size_t)(end - c->in.data) + 4;
    end[2] = 0;                          /* the head is now a string of CRLF lines */
    char *line = c->in.data, *eol = strstr(line, "\r\n");
    *eol = 0;
    char method[16], target[2048], version[16];
    if (sscanf(line, "%15s %2047s %15s", method, target, version) != 3 || strncmp(version, "HTTP/1.", 7)) {
        respond_and_close(c, "400 Bad Request", "");
        return -1;
    }
    const char *upgrade_h = "", *connection = "", *settings = NULL, *host = "";
    bool has_body = false;
    for (char *p = eol + 2; *p;) {
        char *next = strstr(p, "\r\n");
        if (next)
            *next = 0;
        char *colon = strchr(p, ':');
        if (colon) {
            *colon = 0;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (!strcasecmp(p, "upgrade"))
                upgrade_h = v;
            else if (!strcasecmp(p, "connection"))
                connection = v;
            else if (!strcasecmp(p, "http2-settings"))
                settings = v;
            else if (!strcasecmp(p, "host"))
                host = v;
            else if ((!strcasecmp(p, "content-length") && strcmp(v, "0")) || !strcasecmp(p, "transfer-encoding"))
                has_body = true;
        }
        if (!next)
            break;
        p = next + 2;
    }
    if (token_list_has(upgrade_h, "h2c") && settings && token_list_has(connection, "upgrade") &&
        token_list_has(connection, "http2-settings") && !has_body && target[0] == '/')
        return upgrade(c, method, target, host, settings, head_len);
    respond_and_close(c, "426 Upgrade Required", "Upgrade: h2c\r\n");
    return -1;
}
