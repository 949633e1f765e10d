/* The access log: one line per request, written as its exchange ends, in one of two
 * formats (access_log_format):
 *
 *   combined  nginx's default format, which goaccess, awstats and the like read, with
 *             the host, the protocol and the request time in seconds after it:
 *             127.0.0.1 - - [30/Nov/2026:18:00:00 +0000] "GET / HTTP/2.0" 200 612 "-"
 *             "curl/7.88.1" "localhost:8080" h2c 0.000
 *   json      one object per line: time, client, method, target, protocol, status,
 *             bytes, duration_ms, host, referer, user_agent.
 *
 * Formatted only when there is a log (formatting costs more than serving a small file
 * from the cache).  What the client sent is escaped ("\xHH" in combined, as nginx
 * does; JSON escapes in json), so no request can forge a line. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "app/app.h"
#include "config.h"
#include "log.h"

#define LINE_MAX 4096

struct line {
    char text[LINE_MAX];
    size_t len;
};

static void put(struct line *l, const char *s, size_t n)
{
    if (n > LINE_MAX - 1 - l->len)
        n = LINE_MAX - 1 - l->len;
    memcpy(l->text + l->len, s, n);
    l->len += n;
}

static void putf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct line *l, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(l, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Client-supplied text: printable ASCII but for the quote and backslash goes as is. */
static void put_escaped(struct line *l, const char *s, bool json)
{
    if (!s) {
        put(l, json ? "null" : "-", json ? 4 : 1);
        return;
    }
    if (json)
        put(l, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p && l->len < LINE_MAX - 8; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
            put(l, (const char *)p, 1);
        else if (json && (*p == '"' || *p == '\\'))
            putf(l, "\\%c", *p);
        else if (json)
            putf(l, "\\u%04x", *p);
        else
            putf(l, "\\x%02X", *p);
    }
    if (json)
        put(l, "\"", 1);
}

static const char *request_protocol(const char *proto)
{
    return !strcmp(proto, "http/1.1") ? "HTTP/1.1" : "HTTP/2.0";
}

void access_log_request(const struct request *r)
{
    if (!access_log_enabled())
        return;
    struct line l = { .len = 0 };
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    double secs = req_now(r) - req_started(r);
    if (cfg.access_log_format == ACCESS_LOG_JSON) {
        char when[32];
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        putf(&l, "{\"time\":\"%s\",\"client\":\"%s\",\"method\":", when, req_peer(r));
        put_escaped(&l, req_method(r), true);
        put(&l, ",\"target\":", 10);
        put_escaped(&l, req_target(r), true);
        putf(&l, ",\"protocol\":\"%s\",\"status\":%d,\"bytes\":%llu,\"duration_ms\":%.3f,\"host\":", req_protocol(r),
             req_status(r), (unsigned long long)req_bytes_sent(r), secs * 1000);
        put_escaped(&l, req_authority(r), true);
        put(&l, ",\"referer\":", 11);
        put_escaped(&l, req_known(r, KF_REFERER), true);
        put(&l, ",\"user_agent\":", 14);
        put_escaped(&l, req_known(r, KF_USER_AGENT), true);
        put(&l, "}", 1);
    } else {
        char when[40];
        strftime(when, sizeof when, "%d/%b/%Y:%H:%M:%S +0000", &tm);
        putf(&l, "%s - - [%s] \"", req_peer_address(r), when);
        put_escaped(&l, req_method(r), false);
        put(&l, " ", 1);
        put_escaped(&l, req_target(r), false);
        putf(&l, " %s\" %d %llu \"", request_protocol(req_protocol(r)), req_status(r),
             (unsigned long long)req_bytes_sent(r));
        put_escaped(&l, req_known(r, KF_REFERER), false);
        put(&l, "\" \"", 3);
        put_escaped(&l, req_known(r, KF_USER_AGENT), false);
        put(&l, "\" \"", 3);
        put_escaped(&l, req_authority(r), false);
        putf(&l, "\" %s %.3f", req_protocol(r), secs);
    }
    put(&l, "\n", 1);
    if (l.text[l.len - 1] != '\n')       /* cut short: still one line */
        l.text[l.len - 1] = '\n';
    access_log_write(l.text, l.len);
}
