/* Listening sockets: bound by the main thread, accepted from by the workers.
 *
 * A listen address is one socket per worker, each bound with SO_REUSEPORT, so the
 * kernel spreads connections over the workers and no lock is shared on accept - unless
 * systemd handed the socket over (socket activation, LISTEN_FDS): then every worker
 * accepts from that one socket, which systemd keeps open across a restart, so no
 * connection waiting in its queue is refused while h2park is replaced.
 *
 * The table (listeners[], a slot per address) is the main thread's.  A configuration
 * is applied in two steps, so that a reload whose new address cannot be bound keeps the
 * running one: listeners_prepare opens what the new configuration adds (keeping the
 * sockets of addresses it still has, by slot) into a plan, and listeners_commit makes
 * the plan the table.  The workers then take the table with the configuration
 * (worker.c); each closes its own socket of an address that went away, and drains the
 * connections it accepted there.  A slot's serial changes whenever its sockets do.
 * Inherited sockets are never closed: systemd holds them anyway, and a later reload may
 * want them back. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/conn.h"
#include "scalloc.h"

struct listener listeners[MAX_LISTEN];
static unsigned last_serial;

/* Sockets from systemd, and whether a listen line took each. */
#define MAX_INHERITED 64
static struct inherited {
    int fd;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    bool taken;
} inherited[MAX_INHERITED];
static int ninherited;

static bool same_sockaddr(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
    if (x->ss_family != y->ss_family)
        return false;
    if (x->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)x, *b = (const void *)y;
        return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *a = (const void *)x, *b = (const void *)y;
    return x->ss_family == AF_INET6 && a->sin6_port == b->sin6_port &&
           !memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr);
}

static bool is_any(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
    return sa->ss_family == AF_INET6 &&
           !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &in6addr_any, sizeof in6addr_any);
}

static uint16_t port_of(const struct sockaddr_storage *sa)
{
    return ntohs(sa->ss_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
                                          : ((const struct sockaddr_in6 *)sa)->sin6_port);
}

/* Whether a socket bound to sa serves listen address a: "*:PORT" takes a socket on
 * every address of either family, anything else its own address only. */
static bool serves(const struct listen_addr *a, const struct sockaddr_storage *sa)
{
    if (a->dual)
        return is_any(sa) && port_of(sa) == port_of(&a->addr);
    return same_sockaddr(&a->addr, sa);
}

/* LISTEN_PID and LISTEN_FDS as sd_listen_fds(3) defines them: descriptors 3 .. 3+N-1,
 * meant for this process only.  Each must be a listening TCP socket; anything else is
 * a deployment mistake, reported rather than guessed around.  The variables are
 * removed so that nothing started later takes them for its own. */
int listen_inherit(char *err, size_t errlen)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds)
        return 0;
    char *end;
    errno = 0;
    long p = strtol(pid, &end, 10);
    bool ours = !errno && *pid && !*end && p == (long)getpid();
    errno = 0;
    long n = strtol(fds, &end, 10);
    bool n_ok = !errno && *fds && !*end && n >= 0 && n <= MAX_INHERITED;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (!ours)
        return 0;                  /* for another process (sd_listen_fds does the same) */
    if (!n_ok) {
        snprintf(err, errlen, "socket activation: LISTEN_FDS='%.40s' is not a count of 0..%d sockets", fds,
                 MAX_INHERITED);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = 3 + i, type = 0, listening = 0;
        socklen_t len = sizeof type;
        struct inherited *h = &inherited[ninherited];
        h->addrlen = sizeof h->addr;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_STREAM ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &(socklen_t){ sizeof listening }) || !listening ||
            getsockname(fd, (struct sockaddr *)&h->addr, &h->addrlen) ||
            (h->addr.ss_family != AF_INET && h->addr.ss_family != AF_INET6)) {
            snprintf(err, errlen, "socket activation: descriptor %d is not a listening TCP socket", fd);
            return -1;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) || fcntl(fd, F_SETFD, FD_CLOEXEC)) {
            snprintf(err, errlen, "socket activation: descriptor %d: %s", fd, strerror(errno));
            return -1;
        }
        h->fd = fd;
        ninherited++;
    }
    return 0;
}

int listen_inherited_unused(char *err, size_t errlen)
{
    for (int i = 0; i < ninherited; i++)
        if (!inherited[i].taken) {
            char text[80];
            sockaddr_text((const struct sockaddr *)&inherited[i].addr, text, sizeof text);
            snprintf(err, errlen, "socket activation: socket %d (%s) matches no listen line", inherited[i].fd, text);
            return -1;
        }
    return 0;
}

/* A bound socket for a: "*:PORT" as IPv6 with IPV6_V6ONLY off, falling back to IPv4
 * where the host has no IPv6; anything else in its own family.  -1 with errno. */
static int make_socket(const struct listen_addr *a, bool reuseport)
{
    struct sockaddr_storage sa = a->addr;
    socklen_t len = a->addrlen;
    for (;;) {
        int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            int one = 1, v6only = !a->dual;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (reuseport)
                setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
            if (sa.ss_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
            if (!bind(fd, (struct sockaddr *)&sa, len))
                return fd;
            int e = errno;
            close(fd);
            errno = e;
        }
        if (!a->dual || sa.ss_family != AF_INET6 || (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL))
            return -1;
        uint16_t port = port_of(&a->addr);
        struct sockaddr_in *in = (struct sockaddr_in *)&sa;
        memset(&sa, 0, sizeof sa);
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_ANY);
        in->sin_port = htons(port);
        len = sizeof *in;
    }
}

/* SO_REUSEPORT would let this process share a port with another that also set it (a
 * second h2park), the kernel splitting connections between them.  A socket bound
 * without it fails on any port something listens on, so binding one first (and closing
 * it) finds the conflict; SO_REUSEADDR keeps old TIME_WAIT connections from counting. */
static int probe(const struct listen_addr *a, char *err, size_t errlen)
{
    int fd = make_socket(a, false);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: listen %s: %s%s", a->from ? a->from : "listen", a->text, strerror(e),
                 e == EADDRINUSE ? " (another process listens there)" : "");
        errno = e;
        return -1;
    }
    close(fd);
    return 0;
}

static int bound_socket(const struct listen_addr *a, char *err, size_t errlen)
{
    int fd = make_socket(a, true);
    if (fd < 0 || listen(fd, 4096)) {
        snprintf(err, errlen, "%s: listen %s: %s", a->from ? a->from : "listen", a->text, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void close_fresh(struct listener *l)
{
    if (!l->fresh || !l->fds)
        return;
    for (int i = 0; !l->shared && i < nworkers; i++)
        if (l->fds[i] >= 0)
            close(l->fds[i]);
    for (int i = 0; l->shared && i < ninherited; i++)
        if (inherited[i].fd == l->fds[0])
            inherited[i].taken = false;
    sc_free(l->fds);
    l->fds = NULL;
}

void listeners_abort(struct listener *plan)
{
    for (int s = 0; s < MAX_LISTEN; s++)
        if (plan[s].serial)
            close_fresh(&plan[s]);
}

/* Sockets for an address the table does not have: systemd's if it passed one, else one
 * per worker, after the probe. */
static int open_listener(struct listener *l, char *err, size_t errlen)
{
    const struct listen_addr *a = &l->a;
    l->fresh = true;
    for (int i = 0; i < ninherited; i++) {
        if (!serves(a, &inherited[i].addr))
            continue;
        if (!(l->fds = sc_malloc(sizeof *l->fds)))
            goto oom;
        l->fds[0] = inherited[i].fd;
        l->shared = true;
        inherited[i].taken = true;
        return 0;
    }
    /* A port this process holds already (an address changed from 127.0.0.1:8080 to
     * *:8080, say) would fail the probe against itself. */
    bool held = false;
    for (int s = 0; s < MAX_LISTEN; s++)
        held |= listeners[s].serial && port_of(&listeners[s].a.addr) == port_of(&a->addr);
    if (!held && probe(a, err, errlen))
        return -1;
    if (!(l->fds = sc_malloc(sizeof *l->fds * (size_t)nworkers)))
        goto oom;
    for (int i = 0; i < nworkers; i++)
        l->fds[i] = -1;
    for (int i = 0; i < nworkers; i++)
        if ((l->fds[i] = bound_socket(a, err, errlen)) < 0)
            return -1;
    return 0;
oom:
    snprintf(err, errlen, "listen %s: out of memory", a->text);
    return -1;
}

/* --check: is every address free (or held by an h2park that shares it)? */
static int check_listener(const struct listen_addr *a, char *err, size_t errlen)
{
    if (!probe(a, err, errlen))
        return 0;
    if (errno != EADDRINUSE)
        return -1;
    /* A running h2park holds its ports with SO_REUSEPORT, as the same user: fine for a
     * reload of it, a conflict for a second instance. */
    int fd = make_socket(a, true);
    if (fd < 0)
        return -1;
    close(fd);
    log_msg(LOG_WARN, "listen %s: in use by a process that shares it (SO_REUSEPORT, same user), as a running "
            "h2park does: fine to reload that one, a conflict for a second instance", a->text);
    return 0;
}

int listeners_prepare(const struct config *next, struct listener *plan, int8_t *listen_of_slot, bool check_only,
                      char *err, size_t errlen)
{
    memset(plan, 0, sizeof *plan * MAX_LISTEN);
    for (int s = 0; s < MAX_LISTEN; s++)
        listen_of_slot[s] = -1;
    bool placed[MAX_LISTEN] = { false };
    /* Addresses the table has keep their slot (and sockets), with this configuration's
     * options; they are placed first, so a new address never takes a slot one of them
     * still needs. */
    for (int i = 0; i < next->nlisten; i++) {
        const struct listen_addr *a = &next->listen[i];
        for (int j = 0; j < i; j++)
            if (same_sockaddr(&next->listen[j].addr, &a->addr)) {
                snprintf(err, errlen, "listen %s: given twice", a->text);
                goto fail;
            }
        if (check_only) {
            if (check_listener(a, err, errlen))
                goto fail;
            continue;
        }
        for (int s = 0; s < MAX_LISTEN && !placed[i]; s++)
            if (listeners[s].serial && same_sockaddr(&listeners[s].a.addr, &a->addr) && listeners[s].a.dual == a->dual) {
                plan[s] = listeners[s];
                plan[s].a = *a;
                plan[s].fresh = false;
                placed[i] = true;
                listen_of_slot[s] = (int8_t)i;
            }
    }
    for (int i = 0; i < next->nlisten && !check_only; i++) {
        if (placed[i])
            continue;
        int slot = -1;
        for (int s = 0; s < MAX_LISTEN && slot < 0; s++)    /* a slot nobody used last time */
            if (!plan[s].serial && !listeners[s].serial)
                slot = s;
        for (int s = 0; s < MAX_LISTEN && slot < 0; s++)
            if (!plan[s].serial)
                slot = s;
        plan[slot] = (struct listener){ .serial = ++last_serial, .a = next->listen[i] };
        listen_of_slot[slot] = (int8_t)i;
        if (open_listener(&plan[slot], err, errlen))
            goto fail;
    }
    return 0;
fail:
    listeners_abort(plan);
    return -1;
}

/* The plan becomes the table.  Sockets of addresses that went away are the workers' to
 * close (each its own); only the arrays that named them are freed here. */
void listeners_commit(const struct listener *plan)
{
    for (int s = 0; s < MAX_LISTEN; s++) {
        struct listener *old = &listeners[s];
        const struct listener *l = &plan[s];
        if (old->serial && old->serial != l->serial) {
            log_msg(LOG_INFO, "no longer listening on %s: its connections are drained", old->a.text);
            for (int i = 0; old->shared && i < ninherited; i++)
                if (inherited[i].fd == old->fds[0])
                    inherited[i].taken = false;
            sc_free(old->fds);
        }
        if (l->fresh)
            log_msg(LOG_INFO, "listening on %s (%s%s%s)", l->a.text,
                    l->a.tls ? "h2 and HTTP/1.1 over TLS" : "HTTP/1.1 and h2c",
                    l->a.proxy_protocol ? ", after a PROXY protocol header" : "",
                    l->shared ? ", a socket from systemd" : "");
    }
    memcpy(listeners, plan, sizeof listeners);
    for (int s = 0; s < MAX_LISTEN; s++)
        listeners[s].fresh = false;
}
