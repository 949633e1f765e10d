/* Address blocks for allow/deny and real_ip_from: parsing "10.0.0.0/8",
 * "2001:db8::/32", "192.0.2.7", "::1" and "all", and matching a client against them.
 *
 * Every address is compared as 16 bytes of IPv6, IPv4 mapped into ::ffff:0:0/96, so a
 * client of a dual-stack socket ("*:443"), which arrives as ::ffff:192.0.2.7, matches
 * the IPv4 rule written for it, and no IPv4 rule can be dodged by connecting over IPv6.
 * A block with bits set beyond its prefix ("10.1.2.3/8") is refused with the block the
 * writer probably meant: it is a typo more often than not. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static void map_v4(const struct in_addr *a, uint8_t out[16])
{
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &a->s_addr, 4);
}

static void block_text(const struct net *n, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN];
    static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (n->bits >= 96 && !memcmp(n->addr, mapped, 12)) {
        inet_ntop(AF_INET, n->addr + 12, host, sizeof host);
        snprintf(out, cap, "%s/%u", host, n->bits - 96);
    } else {
        inet_ntop(AF_INET6, n->addr, host, sizeof host);
        snprintf(out, cap, "%s/%u", host, n->bits);
    }
}

int net_parse(const char *text, struct net *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (!strcmp(text, "all"))
        return 0;                      /* ::/0: every address, IPv4 ones (mapped) included */
    char host[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(text, '/');
    size_t hl = slash ? (size_t)(slash - text) : strlen(text);
    if (hl == 0 || hl >= sizeof host)
        return snprintf(why, whylen, "'%.60s' is not an address or block (like 10.0.0.0/8 or 2001:db8::/32)", text), -1;
    memcpy(host, text, hl);
    host[hl] = 0;
    struct in_addr a4;
    struct in6_addr a6;
    unsigned max;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        map_v4(&a4, out->addr);
        max = 32;
    } else if (inet_pton(AF_INET6, host, &a6) == 1) {
        memcpy(out->addr, &a6, 16);
        max = 128;
    } else {
        return snprintf(why, whylen, "'%.60s' is not an address or block (like 10.0.0.0/8 or 2001:db8::/32)", text), -1;
    }
    unsigned bits = max;
    if (slash) {
        char *end;
        long b = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || b < 0 || b > (long)max || slash[1] == '+' || slash[1] == '-')
            return snprintf(why, whylen, "'%.60s': the prefix length must be 0..%u", text, max), -1;
        bits = (unsigned)b;
    }
    out->bits = (uint8_t)(bits + (max == 32 ? 96 : 0));
    /* Host bits set: say what the block would be. */
    struct net clean = *out;
    for (unsigned i = clean.bits; i < 128; i++)
        clean.addr[i / 8] &= (uint8_t)~(0x80u >> (i % 8));
    if (memcmp(clean.addr, out->addr, 16)) {
        char meant[64];
        block_text(&clean, meant, sizeof meant);
        return snprintf(why, whylen, "'%.60s' has bits set past its prefix: did you mean %s?", text, meant), -1;
    }
    return 0;
}

bool net_address(const struct sockaddr *sa, uint8_t out[16])
{
    if (sa->sa_family == AF_INET) {
        map_v4(&((const struct sockaddr_in *)sa)->sin_addr, out);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

bool net_contains(const struct net *n, const uint8_t addr[16])
{
    unsigned full = n->bits / 8, rest = n->bits % 8;
    if (memcmp(n->addr, addr, full))
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff00u >> rest);
    return (n->addr[full] & mask) == (addr[full] & mask);
}

bool net_trusted_proxy(const struct config *c, const struct sockaddr *sa)
{
    uint8_t a[16];
    if (!c->nreal_ip_from || !net_address(sa, a))
        return false;
    for (uint16_t i = 0; i < c->nreal_ip_from; i++)
        if (net_contains(&c->real_ip_from[i].net, a))
            return true;
    return false;
}

bool access_allows(const struct access_rule *rules, size_t n, const uint8_t addr[16])
{
    for (size_t i = 0; i < n; i++)
        if (net_contains(&rules[i].net, addr))
            return rules[i].allow;
    return true;
}
