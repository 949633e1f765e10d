/* Unit tests of the upstream exchange's two clients (server/upstream/h1client.c and
 * h2client.c) on what the proxy hands them: one neutral request head, written by each in
 * its own protocol.  HTTP/1.1: the exact text - the request line, Host from the
 * authority, the fields as given, then the framing the body's length asks for
 * (Content-Length, the chunked coding, none) and the connection's fate (close, or the
 * upgrade and nothing of a body).  HTTP/2: the HEADERS as a real nghttp2 server session
 * reads them off a socket - the pseudo-headers from method, target and authority, every
 * name lower case though the proxy's own come capitalised (a server refuses a stream
 * with an upper-case name, RFC 9113 8.2.1; nghttp2 lowers them as it copies them),
 * content-length from the length, te: trailers only when asked, and no HTTP/1.1
 * connection field.  With content-length or te: trailers left out, or Connection
 * passed, these tests fail. */
#define _GNU_SOURCE
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "scalloc.h"
#include "upstream/upstream.h"

static const struct upstream_field fields[] = {
    { "user-agent", "t/1", 10, 3 },
    { "accept", "*/*", 6, 3 },
    { "X-Forwarded-For", "192.0.2.1", 15, 9 },
    { "Via", "1.1 h2park (0)", 3, 14 },
};

static struct upstream_request request(int64_t length)
{
    return (struct upstream_request){ .method = "POST", .target = "/a/b?c=d", .authority = "app.example",
                                      .fields = fields, .nfields = 4, .head_max = 65536, .length = length };
}

/* What the HTTP/1.1 client queues for rq, as text (static). */
static const char *h1_text(const struct upstream_request *rq)
{
    static char text[1024];
    struct upstream_conn uc = { .t = { .fd = -1 } };
    struct upstream_exchange ux = { .client = &upstream_h1_client, .uc = &uc };
    text[0] = 0;
    if (upstream_h1_client.submit(&ux, rq) == 0)
        snprintf(text, sizeof text, "%.*s", (int)uc.t.out.len, uc.t.out.data);
    buf_free(&uc.t.out);
    upstream_exchange_free(&ux);
    return text;
}

#define FIELDS_TEXT "user-agent: t/1\r\naccept: */*\r\nX-Forwarded-For: 192.0.2.1\r\nVia: 1.1 h2park (0)\r\n"

static void h1_head_with_length(void)
{
    struct upstream_request rq = request(5);
    const char *t = h1_text(&rq);
    CHECKF(!strcmp(t, "POST /a/b?c=d HTTP/1.1\r\nHost: app.example\r\n" FIELDS_TEXT "Content-Length: 5\r\n\r\n"), "%s", t);
    rq.length = 0;                 /* an empty body still says so */
    t = h1_text(&rq);
    CHECKF(strstr(t, "\r\nContent-Length: 0\r\n\r\n") != NULL, "%s", t);
}

static void h1_head_chunked_or_none(void)
{
    struct upstream_request rq = request(UPSTREAM_BODY_STREAM);
    const char *t = h1_text(&rq);
    CHECKF(!strcmp(t, "POST /a/b?c=d HTTP/1.1\r\nHost: app.example\r\n" FIELDS_TEXT "Transfer-Encoding: chunked\r\n\r\n"),
           "%s", t);
    rq = request(UPSTREAM_BODY_NONE);
    rq.method = "GET";
    rq.close = true;
    t = h1_text(&rq);
    CHECKF(!strcmp(t, "GET /a/b?c=d HTTP/1.1\r\nHost: app.example\r\n" FIELDS_TEXT "Connection: close\r\n\r\n"), "%s", t);
}

static void h1_head_upgrade(void)
{
    struct upstream_request rq = request(UPSTREAM_BODY_NONE);
    rq.method = "GET";
    rq.upgrade = "websocket";
    rq.close = true;               /* the upgrade's Connection wins: one Connection field */
    const char *t = h1_text(&rq);
    CHECKF(!strcmp(t, "GET /a/b?c=d HTTP/1.1\r\nHost: app.example\r\n" FIELDS_TEXT
                      "Connection: upgrade\r\nUpgrade: websocket\r\n\r\n"),
           "%s", t);
}

/* ---- HTTP/2: what a server reads ---- */

struct seen {
    char fields[2048];             /* "name=value\n" per field, in order */
    size_t len;
    int streams, invalid;
};

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl, uint8_t flags, void *ud)
{
    (void)s, (void)f, (void)flags;
    struct seen *z = ud;
    z->len += (size_t)snprintf(z->fields + z->len, sizeof z->fields - z->len, "%.*s=%.*s\n", (int)nl, name, (int)vl,
                               value);
    return 0;
}

static int on_invalid_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                             const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)s, (void)f, (void)name, (void)nl, (void)value, (void)vl, (void)flags;
    ((struct seen *)ud)->invalid++;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        ((struct seen *)ud)->streams++;
    return 0;
}

/* The HTTP/2 client sends rq on one end of a socket pair; a server session reads the
 * other into z. */
static int h2_seen(const struct upstream_request *rq, struct seen *z)
{
    int sv[2];
    memset(z, 0, sizeof *z);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
        return -1;
    struct upstream_conn uc = { .t = { .fd = sv[0] } };
    struct upstream_exchange ux = { .client = &upstream_h2_client, .uc = &uc };
    int events = 0, rc = -1;
    enum upstream_failure why = UF_NONE;
    nghttp2_session_callbacks *cb;
    nghttp2_session *server = NULL;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_invalid_header_callback(cb, on_invalid_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_server_new(&server, cb, z);
    if (!upstream_h2_client.open(&uc, 65536) && !upstream_h2_client.submit(&ux, rq) &&
        upstream_h2_client.step(&ux, NULL, &events, &why) == UPSTREAM_MORE) {
        uint8_t b[8192];
        ssize_t n = read(sv[1], b, sizeof b);
        rc = n > 0 && nghttp2_session_mem_recv(server, b, (size_t)n) == n ? 0 : -1;
    }
    upstream_h2_client.end(&ux);
    upstream_exchange_free(&ux);
    h2up_free(&uc);
    buf_free(&uc.t.out);
    nghttp2_session_del(server);
    nghttp2_session_callbacks_del(cb);
    close(sv[0]);
    close(sv[1]);
    return rc;
}

static void h2_fields_lower_case_and_pseudo(void)
{
    struct upstream_request rq = request(0);   /* (a body would be the request's: there is none here) */
    struct seen z;
    CHECK(h2_seen(&rq, &z) == 0);
    CHECKF(z.streams == 1 && !z.invalid, "%d streams, %d invalid fields:\n%s", z.streams, z.invalid, z.fields);
    CHECKF(!strcmp(z.fields, ":method=POST\n:scheme=http\n:authority=app.example\n:path=/a/b?c=d\n"
                             "user-agent=t/1\naccept=*/*\nx-forwarded-for=192.0.2.1\nvia=1.1 h2park (0)\n"
                             "content-length=0\n"),
           "%s", z.fields);
}

static void h2_trailers_asked_no_connection_fields(void)
{
    struct upstream_request rq = request(UPSTREAM_BODY_NONE);
    rq.method = "GET";
    rq.close = true;               /* HTTP/1.1's: nothing of it in HTTP/2 */
    rq.trailers = true;
    struct seen z;
    CHECK(h2_seen(&rq, &z) == 0);
    CHECKF(z.streams == 1 && !z.invalid, "%d streams, %d invalid fields:\n%s", z.streams, z.invalid, z.fields);
    CHECKF(strstr(z.fields, "\nte=trailers\n") && !strstr(z.fields, "connection") && !strstr(z.fields, "content-length"),
           "%s", z.fields);
}

int main(void)
{
    RUN(h1_head_with_length);
    RUN(h1_head_chunked_or_none);
    RUN(h1_head_upgrade);
    RUN(h2_fields_lower_case_and_pseudo);
    RUN(h2_trailers_asked_no_connection_fields);
    CHECK_DONE();
}
