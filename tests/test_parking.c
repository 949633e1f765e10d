/* Parking, stepped in process: the fuzzers' daemon (tests/fuzz/harness.c: one worker's loop
 * in this thread, a configuration with sites, connections over socketpairs) driven a turn
 * of the loop at a time, and after each step what exists is asserted - which serve and
 * handler coroutines, which connections and handlers are parked - instead of inferring
 * it from a daemon's memory under load (e2e_parking.sh, e2e_waiting.sh).
 *
 * The steps: an idle HTTP/1.1 keep-alive connection after a response; an idle HTTP/2
 * connection after its preface and SETTINGS; a handler waiting for request body (the
 * harness parks every waiting handler at once, as H2PARK_DEBUG=parkhandlersatonce=1 does);
 * that handler finishing once the body comes; and each connection woken again by its
 * peer's bytes.  (A proxied request waiting on its upstream and a multiplexed upstream
 * stream are not stepped yet: the harness's configuration has no upstream.) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "core/conn.h"
#include "fuzz/fuzz.h"

struct peer {
    int fd;                        /* the test's end */
    struct conn *c;                /* the daemon's */
    char got[8192];                /* what the daemon answered */
    size_t len;
};

static struct worker *w;

static bool open_peer(struct peer *p)
{
    int sv[2];
    memset(p, 0, sizeof *p);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
        return false;
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(1) };
    p->fd = sv[1];
    p->c = conn_new(w, sv[0], 0, NO_LISTENER, (struct sockaddr *)&addr, sizeof addr);
    return p->c != NULL;
}

/* A few turns of the loop, reading what the daemon answers. */
static void turns(struct peer *p)
{
    for (int i = 0; i < 20; i++) {
        ev_run(w->loop, EVRUN_NOWAIT);
        ssize_t n;
        while (p->len < sizeof p->got - 1 && (n = read(p->fd, p->got + p->len, sizeof p->got - 1 - p->len)) > 0)
            p->len += (size_t)n;
        p->got[p->len] = 0;
    }
}

static void send_text(struct peer *p, const void *data, size_t n)
{
    if (write(p->fd, data, n) != (ssize_t)n)
        printf("# short write\n");
    turns(p);
}

static void close_peer(struct peer *p)
{
    close(p->fd);
    for (int i = 0; i < 50 && w->conns; i++)
        ev_run(w->loop, EVRUN_NOWAIT);
    while (w->conns) {
        conn_force_close(w->conns);
        ev_run(w->loop, EVRUN_NOWAIT);
    }
}

#define COUNT(field) ((long)w->n.field)

static void idle_http1_parks(void)
{
    struct peer p;
    CHECK(open_peer(&p));
    const char *req = "GET /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n";
    send_text(&p, req, strlen(req));
    CHECKF(strstr(p.got, "HTTP/1.1 200"), "%.80s", p.got);
    /* Answered, kept alive, nothing to do: no serve coroutine, the connection parked. */
    CHECK(!p.c->serve && !conn_runtime.open(p.c));
    CHECK(COUNT(serve_coroutines) == 0 && COUNT(parked_conns) == 1 && COUNT(handler_coroutines) == 0);
    /* Woken by the next request, and parked again after it. */
    long parks = COUNT(parks_total);
    p.len = 0;
    send_text(&p, req, strlen(req));
    CHECKF(strstr(p.got, "HTTP/1.1 200"), "%.80s", p.got);
    CHECK(!p.c->serve && COUNT(parks_total) > parks && COUNT(respawns_total) >= 1);
    close_peer(&p);
    CHECK(COUNT(parked_conns) == 0 && !w->conns);
}

static void idle_http2_parks(void)
{
    struct peer p;
    CHECK(open_peer(&p));
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                  "\x00\x00\x00\x04\x00\x00\x00\x00\x00";   /* an empty SETTINGS */
    send_text(&p, preface, sizeof preface - 1);
    /* The server's SETTINGS and its ACK of ours went out; then nothing to do. */
    CHECKF(p.len >= 18 && p.got[3] == 0x04, "%zu bytes", p.len);
    CHECK(!p.c->serve && !p.c->requests);
    CHECK(COUNT(serve_coroutines) == 0 && COUNT(parked_conns) == 1 && COUNT(handler_coroutines) == 0);
    /* A PING wakes it; its ACK goes out and it parks again. */
    static const char ping[] = "\x00\x00\x08\x06\x00\x00\x00\x00\x00" "12345678";
    size_t before = p.len;
    send_text(&p, ping, sizeof ping - 1);
    CHECK(p.len == before + 17 && p.got[before + 3] == 0x06 && p.got[before + 4] == 0x01);
    CHECK(!p.c->serve && COUNT(parked_conns) == 1);
    close_peer(&p);
    CHECK(COUNT(parked_conns) == 0);
}

static void waiting_handler_parks(void)
{
    struct peer p;
    CHECK(open_peer(&p));
    /* The echo handler streams a body of which 2 of 5 bytes came: it answers, passes them
     * on and waits for the rest. */
    const char *head = "POST /up/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nab";
    send_text(&p, head, strlen(head));
    CHECKF(!strstr(p.got, "abcde"), "%.200s", p.got);
    /* The connection parked, the handler too: its coroutine exists, its stack does not. */
    CHECK(!p.c->serve && conn_runtime.open(p.c));
    CHECK(COUNT(parked_conns) == 1 && COUNT(serve_coroutines) == 0);
    CHECK(COUNT(handler_coroutines) == 1 && COUNT(parked_handlers) == 1 && COUNT(parked_handler_bytes) > 0);
    /* The rest of the body: the handler is unparked, answers, and both are gone or parked. */
    send_text(&p, "cde", 3);
    CHECKF(strstr(p.got, "HTTP/1.1 200") && strstr(p.got, "abcde"), "%.200s", p.got);
    CHECK(COUNT(handler_coroutines) == 0 && COUNT(parked_handlers) == 0 && COUNT(parked_handler_bytes) == 0);
    CHECK(!p.c->serve && COUNT(parked_conns) == 1);
    close_peer(&p);
}

int main(void)
{
    fuzz_daemon_init();
    w = workers;
    RUN(idle_http1_parks);
    RUN(idle_http2_parks);
    RUN(waiting_handler_parks);
    CHECK_DONE();
}
