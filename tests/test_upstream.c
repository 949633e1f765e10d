/* Unit tests of one worker's upstream state (server/upstream/upstream.c), in process: the
 * balancer - smooth weighted round robin, least_conn, backup servers, max_fails and
 * fail_timeout, max_conns - and the keep-alive pool - a connection reused after a
 * complete exchange, the keepalive limit, never after an error or with request bytes
 * unsent, never once the server closed it or said something nobody asked for, never past
 * keepalive_timeout, never across protocols, and all of it gone when a reload changes the
 * servers.
 *
 * Each test parses a configuration of its own whose server list differs from the others'
 * (the state starts anew when the list changes, as on a reload), and the servers are unix
 * sockets in a temporary directory: connecting to one completes at once, so a request
 * whose only use is its worker's clock and loop stands in for a handler's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "core/conn.h"
#include "runtime/runtime.h"
#include "scalloc.h"
#include "upstream/upstream.h"

static char dir[64];
static struct ev_loop *loop;
static struct worker worker;
static struct conn conn;
static struct request req;         /* upstream_connect's clock and waits are a request's */
static struct config *configs[32];
static int nconfigs;
static struct config_errors e;

/* The embedded default, then text; the worker's upstream state takes it.  Kept until the
 * end: the state points at its server list. */
static struct config *configure(const char *text)
{
    struct config *c = config_new();
    memset(&e, 0, sizeof e);
    config_parse(c, default_conf_text, default_conf_size, CONFIG_BUILTIN, &e);
    config_parse(c, text, strlen(text), "test.conf", &e);
    config_finish(c, &e);
    if (e.count) {
        printf("# %s\n", e.text);
        config_unref(c);
        return NULL;
    }
    configs[nconfigs++] = c;
    worker.cfg = c;
    upstream_configure(c, loop);
    return c;
}

static const struct upstream_group *group(const struct config *c, const char *name)
{
    for (uint32_t i = 0; i < c->nupstreams; i++)
        if (!strcmp(c->upstreams[i].name, name))
            return &c->upstreams[i];
    return NULL;
}

/* A listening unix socket at dir/name. */
static int listen_at(const char *name)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir, name);
    unlink(a.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64))
        return -1;
    return fd;
}

/* Which server each of n picks chose, as letters ("aab..."), the clock at now. */
static void picks(const struct upstream_group *g, double now, int n, char *out)
{
    for (int i = 0; i < n; i++) {
        enum upstream_failure why;
        int s = upstream_pick(g, now, 0, &why);
        out[i] = s < 0 ? '-' : (char)('a' + s);
    }
    out[n] = 0;
}

static struct upstream_conn *connect_to(const struct upstream_server_conf *sc)
{
    enum upstream_failure why;
    char *detail = NULL;
    struct upstream_conn *uc = upstream_connect(&req, sc, NULL, 1.0, &why, &detail);
    sc_free(detail);
    return uc;
}

static struct upstream_stats stats_of(const struct config *c, int index)
{
    struct upstream_stats s[MAX_UPSTREAM_TOTAL];
    upstream_stats_sum(c, s, MAX_UPSTREAM_TOTAL);
    return s[index];
}

/* The server's end of the connection accepted last on lfd has seen it closed. */
static bool closed_at_server(int sfd)
{
    char b;
    ssize_t n = recv(sfd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);   /* (reset: it closed with bytes unread) */
}

/* The sockets listen_at made, and their directory. */
static void remove_sockets(void)
{
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.')
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static void turn(void) { ev_run(loop, EVRUN_NOWAIT); }

/* ---- the balancer ---- */

static void smooth_weighted_round_robin(void)
{
    char conf[512], seq[800];
    snprintf(conf, sizeof conf,
             "upstream wrr {\n server = unix:%s/wa weight=5\n server = unix:%s/wb\n server = unix:%s/wc\n}\n", dir,
             dir, dir);
    const struct config *c = configure(conf);
    CHECK(c);
    const struct upstream_group *g = group(c, "wrr");
    CHECK(g && g->nservers == 3);
    /* nginx's order: the heavy server spread out, never five in a row. */
    picks(g, 100, 7, seq);
    CHECKF(!strcmp(seq, "aabacaa"), "%s", seq);
    picks(g, 100, 700, seq);
    int n[3] = { 0 };
    for (int i = 0; i < 700; i++)
        n[seq[i] - 'a']++;
    CHECKF(n[0] == 500 && n[1] == 100 && n[2] == 100, "%d %d %d", n[0], n[1], n[2]);
    /* Equal weights: strict alternation. */
    snprintf(conf, sizeof conf, "upstream rr {\n server = unix:%s/ra\n server = unix:%s/rb\n}\n", dir, dir);
    CHECK((c = configure(conf)));
    picks(group(c, "rr"), 100, 6, seq);
    CHECKF(!strcmp(seq, "ababab"), "%s", seq);
    /* A server already tried by this request is skipped. */
    enum upstream_failure why;
    CHECK(upstream_pick(group(c, "rr"), 100, 1u << 0, &why) == 1);
    CHECK(upstream_pick(group(c, "rr"), 100, 3u, &why) < 0 && why == UF_NOLIVE);
}

static void least_conn(void)
{
    int la = listen_at("la"), lb = listen_at("lb");
    CHECK(la >= 0 && lb >= 0);
    char conf[512], seq[16];
    snprintf(conf, sizeof conf,
             "upstream lc {\n balance = least_conn\n server = unix:%s/la weight=2\n server = unix:%s/lb\n}\n", dir,
             dir);
    const struct config *c = configure(conf);
    CHECK(c);
    const struct upstream_group *g = group(c, "lc");
    /* None in use: the weights' round robin. */
    picks(g, 100, 3, seq);
    CHECKF(!strcmp(seq, "aba"), "%s", seq);
    /* a has 1 for its weight 2 (0.5), b none: b alone competes. */
    struct upstream_conn *a1 = connect_to(&g->servers[0]);
    CHECK(a1);
    picks(g, 100, 3, seq);
    CHECKF(!strcmp(seq, "bbb"), "%s", seq);
    /* b has 1 (1.0), a 1 (0.5): a alone. */
    struct upstream_conn *b1 = connect_to(&g->servers[1]);
    CHECK(b1);
    picks(g, 100, 3, seq);
    CHECKF(!strcmp(seq, "aaa"), "%s", seq);
    /* a 2 (1.0), b 1 (1.0): both again, by weight. */
    struct upstream_conn *a2 = connect_to(&g->servers[0]);
    CHECK(a2);
    picks(g, 100, 3, seq);
    CHECK(strchr(seq, 'a') && strchr(seq, 'b'));
    CHECK(stats_of(c, g->servers[0].index).active == 2 && stats_of(c, g->servers[1].index).active == 1);
    upstream_done(a1, false, 100);
    upstream_done(a2, false, 100);
    upstream_done(b1, false, 100);
    CHECK(stats_of(c, g->servers[0].index).active == 0 && stats_of(c, g->servers[1].index).active == 0);
    close(la);
    close(lb);
}

static void backup_servers(void)
{
    char conf[512], seq[16];
    snprintf(conf, sizeof conf,
             "upstream bk {\n server = unix:%s/ba max_fails=1 fail_timeout=10s\n server = unix:%s/bb backup\n}\n", dir,
             dir);
    const struct config *c = configure(conf);
    CHECK(c);
    const struct upstream_group *g = group(c, "bk");
    /* The backup takes nothing while the primary can. */
    picks(g, 100, 4, seq);
    CHECKF(!strcmp(seq, "aaaa"), "%s", seq);
    /* The primary tried by this request: the backup. */
    enum upstream_failure why;
    CHECK(upstream_pick(g, 100, 1u << 0, &why) == 1);
    /* The primary left out: the backup, until the primary is back. */
    upstream_failed(g, &g->servers[0], UF_CONNECT, 100);
    picks(g, 101, 3, seq);
    CHECKF(!strcmp(seq, "bbb"), "%s", seq);
    picks(g, 111, 2, seq);
    CHECKF(!strcmp(seq, "aa"), "%s", seq);
    /* Both tried: none live. */
    CHECK(upstream_pick(g, 111, 3u, &why) < 0 && why == UF_NOLIVE);
}

static void max_fails(void)
{
    char conf[512], seq[16];
    snprintf(conf, sizeof conf,
             "upstream mf {\n server = unix:%s/ma max_fails=2 fail_timeout=10s\n server = unix:%s/mb\n}\n"
             "upstream one {\n server = unix:%s/only max_fails=1\n}\n",
             dir, dir, dir);
    const struct config *c = configure(conf);
    CHECK(c);
    const struct upstream_group *g = group(c, "mf"), *one = group(c, "one");
    const struct upstream_server_conf *a = &g->servers[0];
    /* One failure is not max_fails: a still takes its turns. */
    upstream_failed(g, a, UF_CONNECT, 100);
    picks(g, 100, 2, seq);
    CHECKF(!strcmp(seq, "ab"), "%s", seq);
    /* Failures further apart than fail_timeout do not add up. */
    upstream_failed(g, a, UF_READ_TIMEOUT, 111);
    picks(g, 111, 2, seq);
    CHECKF(strchr(seq, 'a'), "%s", seq);
    /* Two within it: left out for fail_timeout, counted down in the gauge. */
    upstream_failed(g, a, UF_CLOSED, 112);
    CHECK(stats_of(c, a->index).down == 1);
    picks(g, 112, 4, seq);
    CHECKF(!strcmp(seq, "bbbb"), "%s", seq);
    picks(g, 121.9, 2, seq);
    CHECKF(!strcmp(seq, "bb"), "%s", seq);
    /* Back after it: tried again. */
    picks(g, 122.1, 4, seq);
    CHECKF(strchr(seq, 'a'), "%s", seq);
    /* A response clears the count: one failure after it does not leave a out. */
    upstream_failed(g, a, UF_CONNECT, 130);
    upstream_responded(a, 200);
    upstream_failed(g, a, UF_CONNECT, 131);
    picks(g, 131, 2, seq);
    CHECKF(strchr(seq, 'a'), "%s", seq);
    /* What is not the server's fault counts nothing (the client went; all busy). */
    for (int i = 0; i < 5; i++) {
        upstream_failed(g, a, UF_NONE, 140);
        upstream_failed(g, a, UF_BUSY, 140);
        upstream_failed(g, a, UF_NOLIVE, 140);
    }
    picks(g, 140, 2, seq);
    CHECKF(strchr(seq, 'a'), "%s", seq);
    CHECK(stats_of(c, a->index).failures[UF_CONNECT] == 3 && stats_of(c, a->index).failures[UF_CLOSED] == 1);
    /* A group of one server is never left out: there is nothing else to try. */
    for (int i = 0; i < 3; i++)
        upstream_failed(one, &one->servers[0], UF_CONNECT, 150);
    enum upstream_failure why;
    CHECK(upstream_pick(one, 150, 0, &why) == 0);
}

static void max_conns(void)
{
    int l = listen_at("xa");
    CHECK(l >= 0);
    char conf[512], seq[16];
    snprintf(conf, sizeof conf,
             "upstream mc {\n server = unix:%s/xa max_conns=1\n server = unix:%s/xb\n}\n"
             "upstream mc1 {\n server = unix:%s/xa max_conns=1\n}\n",
             dir, dir, dir);
    const struct config *c = configure(conf);
    CHECK(c);
    const struct upstream_group *g = group(c, "mc"), *g1 = group(c, "mc1");
    struct upstream_conn *uc = connect_to(&g->servers[0]);
    CHECK(uc);
    picks(g, 100, 3, seq);
    CHECKF(!strcmp(seq, "bbb"), "%s", seq);
    /* Its own group's server (another entry of the list) is counted apart. */
    struct upstream_conn *uc1 = connect_to(&g1->servers[0]);
    CHECK(uc1);
    enum upstream_failure why;
    CHECK(upstream_pick(g1, 100, 0, &why) < 0 && why == UF_BUSY);
    upstream_done(uc1, false, 100);
    CHECK(upstream_pick(g1, 100, 0, &why) == 0);
    upstream_done(uc, false, 100);
    picks(g, 100, 2, seq);
    CHECKF(strchr(seq, 'a'), "%s", seq);
    close(l);
}

/* ---- the pool ---- */

/* A configuration of one group with keepalive as given; its server listening, *lfd. */
static const struct upstream_server_conf *pool_server(const char *name, const char *pool, int *lfd,
                                                      const struct config **cp)
{
    char conf[512];
    snprintf(conf, sizeof conf, "upstream %s {\n server = unix:%s/%s\n %s\n}\n", name, dir, name, pool);
    *lfd = listen_at(name);
    const struct config *c = configure(conf);
    *cp = c;
    return c && *lfd >= 0 ? &group(c, name)->servers[0] : NULL;
}

static void pool_reuse(void)
{
    int l, s;
    const struct config *c;
    const struct upstream_server_conf *sc = pool_server("pr", "keepalive = 4", &l, &c);
    CHECK(sc);
    CHECK(!upstream_take(sc, NULL, 100, false, false));   /* nothing pooled yet */
    struct upstream_conn *uc = connect_to(sc);
    CHECK(uc && (s = accept(l, NULL, NULL)) >= 0);
    CHECK(stats_of(c, sc->index).active == 1);
    upstream_done(uc, true, 100);
    CHECK(stats_of(c, sc->index).idle == 1 && stats_of(c, sc->index).active == 0);
    turn();
    /* The same connection, the most recently used first. */
    struct upstream_conn *again = upstream_take(sc, NULL, 101, false, false);
    CHECK(again == uc && uc->exchanges == 1);
    CHECK(stats_of(c, sc->index).idle == 0 && stats_of(c, sc->index).active == 1);
    CHECK(!upstream_take(sc, NULL, 101, false, false));   /* taken: not twice */
    /* ... and asked once more with check, for a request that cannot go twice. */
    upstream_done(uc, true, 102);
    turn();
    CHECK(upstream_take(sc, NULL, 103, false, true) == uc);
    /* Not for an HTTP/2 request: pooled connections are of one protocol. */
    upstream_done(uc, true, 104);
    CHECK(!upstream_take(sc, NULL, 104, true, false));
    CHECK(upstream_take(sc, NULL, 104, false, false) == uc);
    upstream_done(uc, false, 105);
    CHECK(closed_at_server(s));
    close(s);
    close(l);
}

static void pool_limit(void)
{
    int l, s[3];
    const struct config *c;
    const struct upstream_server_conf *sc = pool_server("pl", "keepalive = 2", &l, &c);
    CHECK(sc);
    struct upstream_conn *uc[3];
    for (int i = 0; i < 3; i++)
        CHECK((uc[i] = connect_to(sc)) && (s[i] = accept(l, NULL, NULL)) >= 0);
    for (int i = 0; i < 3; i++)
        upstream_done(uc[i], true, 100);
    /* Two kept, the third closed. */
    CHECK(stats_of(c, sc->index).idle == 2);
    CHECK(!closed_at_server(s[0]) && !closed_at_server(s[1]) && closed_at_server(s[2]));
    turn();
    CHECK(upstream_take(sc, NULL, 100, false, false) == uc[1]);
    CHECK(upstream_take(sc, NULL, 100, false, false) == uc[0]);
    CHECK(!upstream_take(sc, NULL, 100, false, false));
    upstream_done(uc[0], false, 100);
    upstream_done(uc[1], false, 100);
    /* keepalive = 0 keeps none. */
    int l0, s0;
    const struct config *c0;
    const struct upstream_server_conf *sc0 = pool_server("p0", "keepalive = 0", &l0, &c0);
    CHECK(sc0);
    struct upstream_conn *u0 = connect_to(sc0);
    CHECK(u0 && (s0 = accept(l0, NULL, NULL)) >= 0);
    upstream_done(u0, true, 100);
    CHECK(closed_at_server(s0) && stats_of(c0, sc0->index).idle == 0);
    for (int i = 0; i < 3; i++)
        close(s[i]);
    close(s0);
    close(l);
    close(l0);
}

static void pool_never_after_error(void)
{
    int l, s;
    const struct config *c;
    const struct upstream_server_conf *sc = pool_server("pe", "keepalive = 4", &l, &c);
    CHECK(sc);
    /* An exchange that failed (or whose response was cut short, or not read to its end). */
    struct upstream_conn *uc = connect_to(sc);
    CHECK(uc && (s = accept(l, NULL, NULL)) >= 0);
    upstream_done(uc, false, 100);
    CHECK(closed_at_server(s) && stats_of(c, sc->index).idle == 0);
    CHECK(!upstream_take(sc, NULL, 100, false, false));
    close(s);
    /* Request bytes still unsent (a body the upstream answered before taking it all): the
     * next request would follow them. */
    CHECK((uc = connect_to(sc)) && (s = accept(l, NULL, NULL)) >= 0);
    CHECK(!buf_append(&uc->t.out, "0\r\n\r\n", 5));
    upstream_done(uc, true, 100);
    CHECK(closed_at_server(s) && stats_of(c, sc->index).idle == 0);
    close(s);
    close(l);
}

static void pool_server_side(void)
{
    int l, s;
    const struct config *c;
    const struct upstream_server_conf *sc = pool_server("ps", "keepalive = 4\n keepalive_timeout = 5s", &l, &c);
    CHECK(sc);
    /* The server closes a pooled connection: the watcher closes it too. */
    struct upstream_conn *uc = connect_to(sc);
    CHECK(uc && (s = accept(l, NULL, NULL)) >= 0);
    upstream_done(uc, true, 100);
    close(s);
    turn();
    CHECK(stats_of(c, sc->index).idle == 0);
    CHECK(!upstream_take(sc, NULL, 100, false, false));
    /* ... or before the loop has looked: take asks the socket. */
    CHECK((uc = connect_to(sc)) && (s = accept(l, NULL, NULL)) >= 0);
    upstream_done(uc, true, 100);
    close(s);
    CHECK(!upstream_take(sc, NULL, 100, false, false));
    /* Bytes nobody asked for would be the next request's response. */
    CHECK((uc = connect_to(sc)) && (s = accept(l, NULL, NULL)) >= 0);
    upstream_done(uc, true, 100);
    CHECK(write(s, "H", 1) == 1);
    CHECK(!upstream_take(sc, NULL, 100, false, true));
    CHECK(closed_at_server(s));
    close(s);
    /* Past keepalive_timeout: not taken, and the tick closes it anyway. */
    CHECK((uc = connect_to(sc)) && (s = accept(l, NULL, NULL)) >= 0);
    upstream_done(uc, true, 100);
    turn();
    CHECK(!upstream_take(sc, NULL, 105.5, false, false) && closed_at_server(s));
    close(s);
    CHECK((uc = connect_to(sc)) && (s = accept(l, NULL, NULL)) >= 0);
    upstream_done(uc, true, 100);
    upstream_tick(104);
    CHECK(stats_of(c, sc->index).idle == 1);
    upstream_tick(105.5);
    CHECK(stats_of(c, sc->index).idle == 0 && closed_at_server(s));
    close(s);
    close(l);
}

static void pool_reload(void)
{
    int l, s;
    const struct config *c;
    const struct upstream_server_conf *sc = pool_server("pa", "keepalive = 4", &l, &c);
    CHECK(sc);
    struct upstream_conn *pooled = connect_to(sc), *busy = connect_to(sc);
    CHECK(pooled && busy && (s = accept(l, NULL, NULL)) >= 0);
    int s2 = accept(l, NULL, NULL);
    CHECK(s2 >= 0);
    upstream_done(pooled, true, 100);
    /* Another server list: what was pooled is closed, what is in use is closed as it ends. */
    char conf[256];
    snprintf(conf, sizeof conf, "upstream pa {\n server = unix:%s/pa\n server = unix:%s/pb\n}\n", dir, dir);
    const struct config *c2 = configure(conf);
    CHECK(c2);
    CHECK(closed_at_server(s));
    upstream_done(busy, true, 101);
    CHECK(closed_at_server(s2) && stats_of(c2, 0).idle == 0 && stats_of(c2, 0).active == 0);
    /* Nothing pooled under the old list is handed out under the new. */
    CHECK(!upstream_take(sc, NULL, 101, false, false));
    close(s);
    close(s2);
    close(l);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/h2park-upstream-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    loop = ev_loop_new(EVFLAG_AUTO);
    worker.loop = loop;
    conn.w = &worker;
    req.c = &conn;
    log_set_level(LOG_ERROR);
    RUN(smooth_weighted_round_robin);
    RUN(least_conn);
    RUN(backup_servers);
    RUN(max_fails);
    RUN(max_conns);
    RUN(pool_reuse);
    RUN(pool_limit);
    RUN(pool_never_after_error);
    RUN(pool_server_side);
    RUN(pool_reload);
    remove_sockets();
    for (int i = 0; i < nconfigs; i++)
        config_unref(configs[i]);
    CHECK_DONE();
}
