/* The PROXY protocol (haproxy's specification, versions 1 and 2): on a listener with
 * proxy_protocol, a load balancer sends a header ahead of the connection's own bytes
 * that names the client it accepted, and that client becomes the connection's peer
 * (conn_peer: the access log, the logs, the statistics).
 *
 * The header is a stage of its own before the TLS handshake or protocol detection, and
 * takes exactly its own bytes from the socket: what follows belongs to OpenSSL or the
 * protocol, which read the socket themselves.  So the stage peeks, judges the bytes
 * (with any it kept from earlier reads), and reads only what is header: all of what it
 * peeked while the header is incomplete, exactly the rest once it is complete.  A peer
 * that trickles bytes therefore costs a read per arrival and never a busy loop.
 *
 * The parser is strict, since only a load balancer may speak here: anything but a
 * well-formed v1 or v2 header closes the connection, as does a header longer than
 * PROXY_HEADER_MAX, a v2 TLV that overruns, or a v1 line with a stray byte.  A header
 * that has not arrived within preface_timeout is a head that did not come (conn.c).
 * LOCAL (v2) and UNKNOWN (v1) headers, which balancers send for their own health
 * checks, keep the socket's address. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/conn.h"

static const uint8_t v2_signature[12] = { '\r', '\n', '\r', '\n', 0, '\r', '\n', 'Q', 'U', 'I', 'T', '\n' };
#define V1_MAX 107                   /* the longest v1 line, CRLF included */

/* A port in v1: decimal, no sign, no leading zero, at most 65535. */
static int v1_port(const char *s, uint16_t *out)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

/* "PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n" or "PROXY UNKNOWN[ anything]\r\n". */
static int parse_v1(const uint8_t *p, size_t len, struct sockaddr_storage *client)
{
    size_t end = 0;
    for (; end + 1 < len && end + 2 <= V1_MAX; end++) {
        if (p[end] == '\r' && p[end + 1] == '\n')
            break;
        if (p[end] < 0x20 || p[end] > 0x7e)
            return -1;
    }
    if (end + 1 >= len || p[end] != '\r' || p[end + 1] != '\n') {
        if (end + 2 > V1_MAX)
            return -1;               /* no CRLF where the longest line ends */
        if (end < len && p[end] != '\r' && (p[end] < 0x20 || p[end] > 0x7e))
            return -1;
        return 0;                    /* the line goes on */
    }
    char line[V1_MAX];
    memcpy(line, p, end);
    line[end] = 0;
    char *f[7];
    int n = 0;
    for (char *s = line, *sp; n < 7; s = sp + 1) {
        f[n++] = s;
        if (!(sp = strchr(s, ' ')))
            break;
        *sp = 0;
    }
    if (n >= 2 && !strcmp(f[1], "UNKNOWN"))
        return (int)end + 2;         /* addresses, if any, are not to be used */
    if (n != 6)
        return -1;
    for (int i = 0; i < 6; i++)
        if (!*f[i])
            return -1;               /* two spaces in a row */
    int family = !strcmp(f[1], "TCP4") ? AF_INET : !strcmp(f[1], "TCP6") ? AF_INET6 : 0;
    struct in6_addr src, dst;
    uint16_t sport, dport;
    if (!family || inet_pton(family, f[2], &src) != 1 || inet_pton(family, f[3], &dst) != 1 ||
        v1_port(f[4], &sport) || v1_port(f[5], &dport))
        return -1;
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)client;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, &src, 4);
        in->sin_port = htons(sport);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)client;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = src;
        in6->sin6_port = htons(sport);
    }
    return (int)end + 2;
}

/* Type-length-value records after the addresses: each must fit, exactly. */
static int v2_tlvs(const uint8_t *p, size_t len)
{
    while (len) {
        if (len < 3)
            return -1;
        size_t n = (size_t)p[1] << 8 | p[2];
        if (3 + n > len)
            return -1;
        p += 3 + n;
        len -= 3 + n;
    }
    return 0;
}

static int parse_v2(const uint8_t *p, size_t len, struct sockaddr_storage *client)
{
    if (len < 16)
        return 0;
    unsigned version = p[12] >> 4, command = p[12] & 0xf, family = p[13];
    size_t body = (size_t)p[14] << 8 | p[15];
    if (version != 2 || command > 1 || 16 + body > PROXY_HEADER_MAX)
        return -1;
    if (command == 0)                /* LOCAL: the balancer's own; the block is to be ignored */
        return len < 16 + body ? 0 : (int)(16 + body);
    /* A stream connection: UNSPEC, or TCP over IPv4 or IPv6, or a UNIX stream. */
    if (family != 0x00 && family != 0x11 && family != 0x21 && family != 0x31)
        return -1;
    size_t need = family == 0x11 ? 12 : family == 0x21 ? 36 : family == 0x31 ? 216 : 0;
    if (body < need)
        return -1;
    if (len < 16 + body)
        return 0;
    const uint8_t *a = p + 16;
    if (family == 0x00)
        return (int)(16 + body);     /* no address given: the socket's stands */
    if (v2_tlvs(a + need, body - need))
        return -1;
    if (family == 0x11) {
        struct sockaddr_in *in = (struct sockaddr_in *)client;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, a, 4);
        memcpy(&in->sin_port, a + 8, 2);
    } else if (family == 0x21) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)client;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, a, 16);
        memcpy(&in6->sin6_port, a + 32, 2);
    }
    return (int)(16 + body);
}

int proxy_parse(const uint8_t *p, size_t len, struct sockaddr_storage *client)
{
    memset(client, 0, sizeof *client);
    size_t n = len < sizeof v2_signature ? len : sizeof v2_signature;
    if (!memcmp(p, v2_signature, n))
        return len < sizeof v2_signature ? 0 : parse_v2(p, len, client);
    n = len < 6 ? len : 6;
    if (!memcmp(p, "PROXY ", n))
        return len < 6 ? 0 : parse_v1(p, len, client);
    return -1;
}

int proxy_stage(struct conn *c)
{
    uint8_t *buf = (uint8_t *)c->w->rbuf;                 /* what is known: kept + peeked */
    uint8_t *sink = buf + 2 * PROXY_HEADER_MAX;           /* what is read */
    _Static_assert(sizeof c->w->rbuf >= 3 * PROXY_HEADER_MAX, "rbuf holds the header twice");
    for (;;) {
        size_t kept = c->in.len;
        ssize_t n = recv(c->sock.fd, buf + kept, PROXY_HEADER_MAX - kept, MSG_PEEK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            c->peer_eof = true;
            return -1;
        }
        if (kept)
            memcpy(buf, c->in.data, kept);
        struct sockaddr_storage client;
        int r = proxy_parse(buf, kept + (size_t)n, &client);
        if (r < 0) {
            log_msg(LOG_DEBUG, "%s: malformed PROXY protocol header, closing", conn_peer(c));
            return -1;
        }
        size_t take = r > 0 ? (size_t)r - kept : (size_t)n;
        if (read(c->sock.fd, sink, take) != (ssize_t)take)
            return -1;
        if (r == 0) {
            if (buf_append(&c->in, sink, take))
                return -1;
            continue;
        }
        buf_free(&c->in);
        if (client.ss_family == AF_INET)
            memcpy(&c->peer.in, &client, sizeof c->peer.in);
        else if (client.ss_family == AF_INET6)
            memcpy(&c->peer.in6, &client, sizeof c->peer.in6);
        uint32_t per_client = c->listener != NO_LISTENER ? config_conns_per_client(c->w->cfg, c->listener) : 0;
        int counted = per_client ? connlimit_acquire(c->w, c->listener, per_client, &c->peer.sa) : 0;
        if (counted < 0)
            return -1;             /* before the handshake: nothing more is spent on it */
        c->client_counted = counted > 0;
        conn_begin(c);
        return 1;
    }
}
