/* Why an exchange with an upstream failed, said once.
 *
 * A failure gets one error-log line (app/proxy_pass.c writes it, with the client, the
 * request and the server), and the same words go to the access log's upstream_error, so
 * that the two can be matched by eye or by grep.  The sentence is nginx's shape: what
 * happened, the errno behind it where a system call failed ("connect() failed (111:
 * Connection refused)"), the setting that fired for a timeout ("upstream timed out after
 * proxy_read_timeout 30s"), and the phase the exchange was in ("while reading the
 * response header"), since the same timeout means different things before the head, in
 * the middle of a body, and in an idle WebSocket tunnel.
 *
 * The lower layers (connect, the TLS handshake, the response parser) do not log: they
 * hand their words up (upstream_call_failed, upstream_text), so that nothing about one
 * failure is spread over lines that cannot be told apart on a busy server. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "scalloc.h"
#include "upstream/upstream.h"

const char *const upstream_failure_text[UF_COUNT] = {
    [UF_NONE] = "-", [UF_CONNECT] = "connect() failed", [UF_CONNECT_TIMEOUT] = "upstream timed out",
    [UF_SEND] = "upstream closed the connection", [UF_SEND_TIMEOUT] = "upstream timed out",
    [UF_READ_TIMEOUT] = "upstream timed out", [UF_CLOSED] = "upstream prematurely closed the connection",
    [UF_RESET] = "upstream reset the connection", [UF_INVALID] = "upstream sent an invalid response",
    [UF_NOLIVE] = "no live upstreams", [UF_BUSY] = "every upstream server is at max_conns",
    [UF_TLS] = "SSL handshake with upstream failed",
};

int upstream_failure_status(enum upstream_failure f)
{
    switch (f) {
    case UF_CONNECT_TIMEOUT: case UF_SEND_TIMEOUT: case UF_READ_TIMEOUT: return 504;
    case UF_BUSY: return 503;
    default: return 502;
    }
}

char *upstream_text(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    char *text = sc_malloc(len + 1);
    if (text) {
        memcpy(text, line, len);
        text[len] = 0;
    }
    return text;
}

char *upstream_call_failed(const char *call, int err)
{
    return upstream_text("%s() failed (%d: %s)", call, err, strerror(err));
}

size_t upstream_cause(const struct upstream_fault *f, char *buf, size_t cap)
{
    static const char *const phases[] = {
        [UP_NONE] = "", [UP_CONNECT] = " while connecting to upstream", [UP_SEND] = " while sending the request",
        [UP_HEADER] = " while reading the response header", [UP_BODY] = " while reading the response body",
        [UP_TUNNEL] = " in the websocket tunnel",
    };
    const struct proxy_conf *pc = f->pc;
    const char *setting = NULL;
    double limit = 0;
    switch (f->why) {
    case UF_CONNECT_TIMEOUT: setting = "proxy_connect_timeout", limit = pc->connect_timeout; break;
    case UF_SEND_TIMEOUT: setting = "proxy_send_timeout", limit = pc->send_timeout; break;
    case UF_READ_TIMEOUT: setting = "proxy_read_timeout", limit = pc->read_timeout; break;
    default: break;
    }
    int n;
    /* Silence both ways is how a tunnel's life ends when nobody closes it: not the
     * upstream's fault, and said so. */
    if (f->phase == UP_TUNNEL && f->why == UF_READ_TIMEOUT) {
        n = snprintf(buf, cap, "websocket tunnel idle for proxy_read_timeout %.10gs", limit);
    } else {
        char err[96] = "", after[64] = "";
        /* (An errno seen on the way - a send that failed before the upstream answered
         * late or wrongly - is not the cause of a timeout or of a bad response.) */
        bool call = f->why == UF_CONNECT || f->why == UF_SEND || f->why == UF_CLOSED || f->why == UF_RESET;
        if (f->err && call)
            snprintf(err, sizeof err, " (%d: %s)", f->err, strerror(f->err));
        if (setting)
            snprintf(after, sizeof after, " after %s %.10gs", setting, limit);
        n = snprintf(buf, cap, "%s%s%s%s", f->detail ? f->detail : upstream_failure_text[f->why], err, after,
                     phases[f->phase]);
    }
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}
