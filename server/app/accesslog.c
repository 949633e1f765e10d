/* The access log: one line per request, written as its exchange ends, in one of two
 * formats (access_log_format):
 *
 *   combined  nginx's default format, which goaccess, awstats and the like read, with
 *             the host, the protocol and the request time in seconds after it:
 *             127.0.0.1 - - [30/Nov/2026:18:00:00 +0000] "GET / HTTP/2.0" 200 612 "-"
 *             "curl/7.88.1" "localhost:8080" h2c 0.000
 *   json      one object per line: time (UTC to the millisecond, as the error log's
 *             lines), client (the address, as combined has it), client_port, method,
 *             target, protocol, status, bytes, duration_ms, host, referer, user_agent.
 *             combined keeps nginx's time to the second and no port: the tools that read
 *             it expect exactly that.
 *
 * A proxied request adds what its upstream did, under nginx's variable names:
 * upstream_addr, upstream_status, upstream_connect_time, upstream_header_time and
 * upstream_response_time (seconds, "-" for none), and upstream_error with the cause of a
 * 502/503/504 (combined: key=value after the request time; json: keys of their own).
 * A response compressed on the fly adds its coding the same way (content_encoding).
 *
 * Formatted only when there is a log, and without printf on the way: the time once a
 * second per thread (json's milliseconds added to it), numbers by hand, client text copied a run of plain bytes at a time
 * (callgrind, 1 KiB over h2c: the line cost 9,200 instructions per request with
 * vsnprintf, strftime and a copy per byte).  What the client sent is escaped ("\xHH" in
 * combined, as nginx does; JSON escapes in json), so no request can forge a line,
 * and cut to its share of the line, so no request can push its status out of it. */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "app/app.h"
#include "config.h"
#include "fieldcopy.h"
#include "log.h"

#define LINE_MAX 4096

struct line {
    char text[LINE_MAX];
    size_t len;
};

static inline __attribute__((always_inline)) void put(struct line *l, const char *s, size_t n)
{
    if (n > LINE_MAX - 1 - l->len)
        n = LINE_MAX - 1 - l->len;
    field_copy(l->text + l->len, s, n);
    l->len += n;
}

static void put_str(struct line *l, const char *s) { put(l, s, strlen(s)); }

/* put for digits made here: a plain memcpy, whose bounds the compiler can see. */
static void put_digits(struct line *l, const char *s, size_t n)
{
    if (n > LINE_MAX - 1 - l->len)
        n = LINE_MAX - 1 - l->len;
    memcpy(l->text + l->len, s, n);
    l->len += n;
}

static void put_u64(struct line *l, uint64_t v)
{
    char d[24];
    put_digits(l, d, u64_dec(d, v));
}

/* Seconds to the millisecond, "0.003" (what %.3f gave, without printf). */
static void put_millis(struct line *l, double secs)
{
    uint64_t ms = secs > 0 ? (uint64_t)(secs * 1000 + 0.5) : 0;
    char d[32];
    size_t n = u64_dec(d, ms / 1000);
    d[n++] = '.';
    d[n++] = (char)('0' + ms / 100 % 10), d[n++] = (char)('0' + ms / 10 % 10), d[n++] = (char)('0' + ms % 10);
    put_digits(l, d, n);
}

/* Printable ASCII but for the quote and the backslash. */
static const bool plain_byte[256] = { [0x20 ... 0x21] = true, [0x23 ... 0x5b] = true, [0x5d ... 0x7e] = true };
static bool plain(unsigned char ch) { return plain_byte[ch]; }

/* Client-supplied text: printable ASCII but for the quote and backslash goes as is, a run
 * at a time; anything else is escaped.  Each field has a share of the line (TARGET_MAX
 * for the target, FIELD_MAX for the others, escapes included), so what follows a long
 * one - the status after a target a 414 refused, above all - is always there. */
#define TARGET_MAX 1536
#define FIELD_MAX 512

static void put_escaped(struct line *l, const char *s, bool json, size_t max)
{
    static const char hex[] = "0123456789ABCDEF", lhex[] = "0123456789abcdef";
    if (!s) {
        put(l, json ? "null" : "-", json ? 4 : 1);
        return;
    }
    if (json)
        put(l, "\"", 1);
    size_t stop = l->len + max < LINE_MAX - 8 ? l->len + max : LINE_MAX - 8;
    for (const unsigned char *p = (const unsigned char *)s; *p && l->len < stop;) {
        const unsigned char *run = p;
        while (plain(*p) && l->len + (size_t)(p - run) < stop)
            p++;
        if (p > run) {
            put(l, (const char *)run, (size_t)(p - run));
            continue;
        }
        if (!*p)
            break;
        char e[6];
        if (json && (*p == '"' || *p == '\\'))
            e[0] = '\\', e[1] = (char)*p, put(l, e, 2);
        else if (json)
            memcpy(e, "\\u00", 4), e[4] = lhex[*p >> 4], e[5] = lhex[*p & 15], put(l, e, 6);
        else
            e[0] = '\\', e[1] = 'x', e[2] = hex[*p >> 4], e[3] = hex[*p & 15], put(l, e, 4);
        p++;
    }
    if (json)
        put(l, "\"", 1);
}

/* An upstream time in seconds to the millisecond, or none ("-", JSON null). */
static void put_time(struct line *l, const char *key, double t, bool json)
{
    put(l, json ? ",\"" : " ", json ? 2 : 1);
    put_str(l, key);
    put(l, json ? "\":" : "=", json ? 2 : 1);
    if (t >= 0)
        put_millis(l, t);
    else
        put(l, json ? "null" : "-", json ? 4 : 1);
}

static void put_upstream(struct line *l, const struct req_upstream *u, bool json)
{
    if (json) {
        l->len--;                    /* inside the object: its closing brace goes last */
        put(l, ",\"upstream_addr\":", 17);
        put_escaped(l, u->addr, true, FIELD_MAX);
        put(l, ",\"upstream_status\":", 19);
    } else {
        put(l, " upstream_addr=", 15);
        put_escaped(l, u->addr, false, FIELD_MAX);
        put(l, " upstream_status=", 17);
    }
    put_u64(l, (uint64_t)u->status);
    put_time(l, "upstream_connect_time", u->connect_time, json);
    put_time(l, "upstream_header_time", u->header_time, json);
    put_time(l, "upstream_response_time", u->response_time, json);
    if (u->error) {
        put(l, json ? ",\"upstream_error\":" : " upstream_error=", json ? 18 : 16);
        put_escaped(l, u->error, true, FIELD_MAX);
    }
    if (json)
        put(l, "}", 1);
}

static const char *request_protocol(const char *proto)
{
    return proto[0] == 'h' && proto[1] == 't' ? "HTTP/1.1" : "HTTP/2.0";
}

/* The line's time, formatted once a second per thread (each format its own text): combined's
 * nginx's "30/Nov/2026:18:00:00 +0000", json's ISO 8601 "2026-11-30T18:00:00" to which
 * put_stamp adds the milliseconds. */
static const char *stamp(bool json, time_t now)
{
    static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    static __thread time_t at[2] = { -1, -1 };
    static __thread char text[2][40];
    if (at[json] != now) {
        struct tm tm;
        gmtime_r(&now, &tm);
        if (json)
            snprintf(text[1], sizeof text[1], "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        else
            snprintf(text[0], sizeof text[0], "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday, months[tm.tm_mon],
                     tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
        at[json] = now;
    }
    return text[json];
}

static void put_stamp(struct line *l, bool json)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    put_str(l, stamp(json, ts.tv_sec));
    if (json) {
        unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
        char d[5] = { '.', (char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), 'Z' };
        put_digits(l, d, sizeof d);
    }
}

/* The client's port, or 0 where it has none (a Unix socket; an address a trusted proxy's
 * header named without one). */
static unsigned client_port(const struct request *r)
{
    const struct sockaddr *sa = req_client(r);
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
    return 0;
}

void access_log_request(const struct request *r)
{
    if (!access_log_enabled())
        return;
    struct line l = { .len = 0 };
    double secs = req_duration(r);
    if (req_config(r)->access_log_format == ACCESS_LOG_JSON) {
        put(&l, "{\"time\":\"", 9);
        put_stamp(&l, true);
        put(&l, "\",\"client\":\"", 12);
        put_str(&l, req_peer_address(r));
        put(&l, "\",\"client_port\":", 16);
        unsigned port = client_port(r);
        if (port)
            put_u64(&l, port);
        else
            put(&l, "null", 4);
        put(&l, ",\"method\":", 10);
        put_escaped(&l, req_method(r), true, FIELD_MAX);
        put(&l, ",\"target\":", 10);
        put_escaped(&l, req_target(r), true, TARGET_MAX);
        put(&l, ",\"protocol\":\"", 13);
        put_str(&l, req_protocol(r));
        put(&l, "\",\"status\":", 11);
        put_u64(&l, (uint64_t)req_status(r));
        put(&l, ",\"bytes\":", 9);
        put_u64(&l, req_bytes_sent(r));
        put(&l, ",\"duration_ms\":", 15);
        put_millis(&l, secs * 1000);
        put(&l, ",\"host\":", 8);
        put_escaped(&l, req_authority(r), true, FIELD_MAX);
        put(&l, ",\"referer\":", 11);
        put_escaped(&l, req_known(r, KF_REFERER), true, FIELD_MAX);
        put(&l, ",\"user_agent\":", 14);
        put_escaped(&l, req_known(r, KF_USER_AGENT), true, FIELD_MAX);
        put(&l, "}", 1);
    } else {
        put_str(&l, req_peer_address(r));
        put(&l, " - - [", 6);
        put_stamp(&l, false);
        put(&l, "] \"", 3);
        put_escaped(&l, req_method(r), false, FIELD_MAX);
        put(&l, " ", 1);
        put_escaped(&l, req_target(r), false, TARGET_MAX);
        put(&l, " ", 1);
        put(&l, request_protocol(req_protocol(r)), 8);
        put(&l, "\" ", 2);
        put_u64(&l, (uint64_t)req_status(r));
        put(&l, " ", 1);
        put_u64(&l, req_bytes_sent(r));
        put(&l, " \"", 2);
        put_escaped(&l, req_known(r, KF_REFERER), false, FIELD_MAX);
        put(&l, "\" \"", 3);
        put_escaped(&l, req_known(r, KF_USER_AGENT), false, FIELD_MAX);
        put(&l, "\" \"", 3);
        put_escaped(&l, req_authority(r), false, FIELD_MAX);
        put(&l, "\" ", 2);
        put_str(&l, req_protocol(r));
        put(&l, " ", 1);
        put_millis(&l, secs);
    }
    bool json = req_config(r)->access_log_format == ACCESS_LOG_JSON;
    const char *refused_by = req_refused_by(r);
    if (refused_by) {
        if (json)
            l.len--;                 /* inside the object: its closing brace goes last */
        put(&l, json ? ",\"refused_by\":" : " refused_by=", json ? 14 : 12);
        put_escaped(&l, refused_by, true, FIELD_MAX);
        if (json)
            put(&l, "}", 1);
    }
    const char *coding = req_content_coding(r);
    if (coding) {                    /* compressed on the fly: nginx's $gzip_ratio's place */
        if (json)
            l.len--;
        put(&l, json ? ",\"content_encoding\":\"" : " content_encoding=", json ? 21 : 18);
        put_str(&l, coding);
        if (json)
            put(&l, "\"}", 2);
    }
    const struct req_upstream *u = req_upstream_info(r);
    if (u)
        put_upstream(&l, u, json);
    put(&l, "\n", 1);
    if (l.text[l.len - 1] != '\n')       /* cut short: still one line */
        l.text[l.len - 1] = '\n';
    access_log_write(l.text, l.len);
}
