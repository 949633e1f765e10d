/* The built-in routes: /-/healthz, /-/echo (the request body back, streamed) and
 * /-/delay?ms=N (an answer after N ms, the handler sleeping meanwhile: a long poll).
 * A delay may last ten minutes: long enough for every request of a 20,000-connection
 * run to be still waiting when it is sampled, however slowly the clients connect. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"

#define MAX_DELAY_MS 600000
#define ECHO_CHUNK 8192

static void healthz(struct request *r) { reply_text(r, 200, "ok"); }

/* The first piece is read before the answer begins, so a body over its location's limit
 * gets a 413 (routes.c) rather than a 200 cut short. */
static void echo(struct request *r)
{
    char chunk[ECHO_CHUNK];
    ssize_t n = req_read_body(r, chunk, sizeof chunk);
    if (n < 0)
        return;
    struct header h[] = { { "content-type", "application/octet-stream" } };
    int64_t length = req_content_length(r);
    if (req_respond(r, 200, h, 1, length >= 0 ? length : BODY_STREAM))
        return;
    for (; n > 0; n = req_read_body(r, chunk, sizeof chunk))
        if (req_write(r, chunk, (size_t)n))
            return;
    if (n == 0)
        req_end(r);
}

long query_int(const char *target, const char *key)
{
    const char *q = strchr(target, '?');
    size_t kl = strlen(key);
    while (q) {
        q++;
        if (!strncmp(q, key, kl) && q[kl] == '=') {
            const char *v = q + kl + 1;
            uint64_t n;
            return u64_parse(v, strcspn(v, "&"), LONG_MAX, &n) ? -1 : (long)n;   /* digits only */
        }
        q = strchr(q, '&');
    }
    return -1;
}

static void delay(struct request *r)
{
    long ms = query_int(req_target(r), "ms");
    if (ms < 0 || ms > MAX_DELAY_MS) {
        reply_text(r, 400, "ms must be 0..600000\n");
        return;
    }
    req_sleep(r, (double)ms / 1000.0);
    char text[48];
    snprintf(text, sizeof text, "waited %ld ms\n", ms);
    reply_text(r, 200, text);
}

const struct route builtin_routes[] = {
    { "healthz", "/-/healthz", M_GET | M_HEAD, healthz, true },   /* for load balancers, from anywhere */
    { "echo", "/-/echo", M_POST, echo, false },
    { "delay", "/-/delay", M_GET | M_HEAD, delay, false },
    { NULL, NULL, 0, NULL, false },
};
