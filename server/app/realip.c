/* The client's address from trusted proxies: nginx's set_real_ip_from and real_ip_header
 * (real_ip_from, real_ip_header), for logs, access rules and req_peer.
 *
 * Only a peer in real_ip_from is believed.  Its header lists the hops a request came
 * through, the nearest last (X-Forwarded-For: "client, proxy1, proxy2"; Forwarded,
 * RFC 7239: "for=client, for=proxy1"), and anyone may have written its left part: so
 * the list is read from the right, each address replacing the client while the one
 * before it was a trusted proxy, and the first address that is not trusted is the
 * client (nginx's real_ip_recursive on; with one proxy it is nginx's default too).  An
 * entry that is no address ("unknown", an obfuscated "_node", garbage) ends the walk:
 * the client is then the last hop that could be named.  PROXY protocol is another path
 * (core/proxyproto.c) and comes first: it sets the connection's peer, which this then reads.
 *
 * Parsing never trusts lengths: at most REALIP_HOPS entries are kept (the rightmost), an
 * address must parse as IPv4 or IPv6 (with or without a port, in brackets or not), and
 * a quoted-string of Forwarded may hold commas and semicolons. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "config.h"

#define REALIP_HOPS 32

struct hop {
    bool ok;
    struct sockaddr_storage sa;
};

/* "192.0.2.7", "192.0.2.7:8080", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:8080". */
static bool parse_addr(const char *s, size_t n, struct sockaddr_storage *out)
{
    char text[64];
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (!n || n >= sizeof text)
        return false;
    memcpy(text, s, n);
    text[n] = 0;
    char *host = text;
    unsigned long port = 0;
    char *colon = strchr(text, ':');
    if (text[0] == '[') {
        char *end = strchr(text, ']');
        if (!end || (end[1] && end[1] != ':'))
            return false;
        *end = 0;
        host = text + 1;
        colon = end[1] == ':' ? end + 1 : NULL;
    } else if (colon && strchr(colon + 1, ':')) {
        colon = NULL;              /* a bare IPv6 address: no port */
    }
    if (colon) {
        if (!colon[1] || strlen(colon + 1) > 5)
            return false;
        for (char *p = colon + 1; *p; p++)
            if (!isdigit((unsigned char)*p))
                return false;
        port = strtoul(colon + 1, NULL, 10);
        if (port > 65535)
            return false;
        if (text[0] != '[')
            *colon = 0;
    }
    memset(out, 0, sizeof *out);
    struct sockaddr_in *in4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        return true;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        /* an IPv4-mapped address is the IPv4 client it maps */
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            struct in_addr a;
            memcpy(&a, in6->sin6_addr.s6_addr + 12, 4);
            uint16_t p = in6->sin6_port;
            memset(out, 0, sizeof *out);
            in4->sin_family = AF_INET;
            in4->sin_addr = a;
            in4->sin_port = p;
        }
        return true;
    }
    return false;
}

static void keep(struct hop *hops, size_t *n, bool ok, const struct sockaddr_storage *sa)
{
    if (*n == REALIP_HOPS) {        /* keep the rightmost: they are the ones read */
        memmove(hops, hops + 1, (REALIP_HOPS - 1) * sizeof *hops);
        (*n)--;
    }
    hops[*n].ok = ok;
    if (ok)
        hops[*n].sa = *sa;
    (*n)++;
}

/* X-Forwarded-For (and X-Real-IP, one address): comma-separated addresses. */
static void parse_list(const char *v, struct hop *hops, size_t *n)
{
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        struct sockaddr_storage sa;
        const char *q = p;
        size_t l = len;
        while (l && (*q == ' ' || *q == '\t'))
            q++, l--;
        if (l)                      /* an empty element (",,") is skipped, as RFC 9110 5.6.1 allows */
            keep(hops, n, parse_addr(q, l, &sa), &sa);
        if (!comma)
            break;
        p = comma + 1;
    }
}

/* Forwarded (RFC 7239): elements by ',', pairs by ';', the for= of each element, its
 * value a token or a quoted-string. */
static void parse_forwarded(const char *v, struct hop *hops, size_t *n)
{
    const char *p = v;
    while (*p) {
        bool have_for = false, ok = false;
        struct sockaddr_storage sa;
        /* one element */
        while (*p && *p != ',') {
            while (*p == ' ' || *p == '\t' || *p == ';')
                p++;
            const char *name = p;
            while (*p && *p != '=' && *p != ';' && *p != ',')
                p++;
            size_t nl = (size_t)(p - name);
            while (nl && (name[nl - 1] == ' ' || name[nl - 1] == '\t'))
                nl--;
            if (*p != '=') {
                continue;           /* a pair without a value: ignored */
            }
            p++;
            char value[80];
            size_t vl = 0;
            bool too_long = false;
            if (*p == '"') {
                for (p++; *p && *p != '"'; p++) {
                    if (*p == '\\' && p[1])
                        p++;
                    if (vl + 1 < sizeof value)
                        value[vl++] = *p;
                    else
                        too_long = true;
                }
                if (*p == '"')
                    p++;
            } else {
                while (*p && *p != ';' && *p != ',') {
                    if (vl + 1 < sizeof value)
                        value[vl++] = *p;
                    else
                        too_long = true;
                    p++;
                }
                while (vl && (value[vl - 1] == ' ' || value[vl - 1] == '\t'))
                    vl--;
            }
            value[vl] = 0;
            if (nl == 3 && !strncasecmp(name, "for", 3) && !have_for) {
                have_for = true;
                ok = !too_long && parse_addr(value, vl, &sa);
            }
        }
        if (have_for)
            keep(hops, n, ok, &sa);
        if (*p == ',')
            p++;
    }
}

bool realip_resolve(const struct config *c, const uint8_t peer[16], const char *const *values, size_t nvalues,
                    struct sockaddr_storage *out)
{
    bool peer_trusted = false;
    for (uint16_t i = 0; i < c->nreal_ip_from && !peer_trusted; i++)
        peer_trusted = net_contains(&c->real_ip_from[i].net, peer);
    if (!peer_trusted || !nvalues)
        return false;
    struct hop hops[REALIP_HOPS];
    size_t n = 0;
    for (size_t i = 0; i < nvalues; i++) {
        if (c->real_ip_header == REAL_IP_FORWARDED)
            parse_forwarded(values[i], hops, &n);
        else
            parse_list(values[i], hops, &n);
    }
    if (c->real_ip_header == REAL_IP_X_REAL_IP && n > 1) {
        hops[0] = hops[n - 1];      /* one address: the last one given */
        n = 1;
    }
    bool found = false;
    for (size_t i = n; i-- > 0;) {
        if (!hops[i].ok)
            break;
        *out = hops[i].sa;
        found = true;
        if (!net_trusted_proxy(c, (const struct sockaddr *)out))
            break;
    }
    return found;
}

int realip_apply(struct request *r)
{
    const struct config *c = req_config(r);
    static const char *const names[] = { "x-forwarded-for", "forwarded", "x-real-ip" };
    const char *name = names[c->real_ip_header];
    uint8_t peer[16];
    if (!net_address(req_client(r), peer))
        return 0;
    /* The last lines: a proxy that adds its own line (haproxy's option forwardfor) adds
     * it at the end, after any number a client sent. */
    const char *values[16];
    size_t n = req_header_values(r, name, values, 16);
    struct sockaddr_storage client;
    if (realip_resolve(c, peer, values, n, &client))
        return req_set_client(r, (struct sockaddr *)&client);
    return 0;
}
