/* Unit tests of the PROXY protocol parser (server/core/proxy.c): the headers haproxy
 * and cloud load balancers send, each prefix of them ("more, please"), the exact length
 * when the connection's own bytes follow, and every way a header can be malformed. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/conn.h"

static struct sockaddr_storage client;

static int parse(const void *p, size_t len) { return proxy_parse(p, len, &client); }
static int parse_text(const char *s) { return parse(s, strlen(s)); }

static const char *addr_text(void)
{
    static char text[80];
    char host[INET6_ADDRSTRLEN] = "?";
    if (client.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&client;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(text, sizeof text, "%s:%u", host, ntohs(in->sin_port));
    } else if (client.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&client;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(text, sizeof text, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(text, sizeof text, "(keep)");
    }
    return text;
}

/* Every proper prefix of a valid header asks for more. */
static int prefixes_want_more(const void *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (parse(p, i) != 0)
            return (int)i;
    return -1;
}

static void v1_headers(void)
{
    const char *h = "PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\r\n";
    CHECK(parse_text(h) == (int)strlen(h) && !strcmp(addr_text(), "192.0.2.7:51234"));
    CHECKF(prefixes_want_more(h, strlen(h)) < 0, "prefix %d", prefixes_want_more(h, strlen(h)));
    h = "PROXY TCP6 2001:db8::7 2001:db8::1 65535 0\r\n";
    CHECK(parse_text(h) == (int)strlen(h) && !strcmp(addr_text(), "[2001:db8::7]:65535"));
    CHECK(parse_text("PROXY UNKNOWN\r\n") == 15 && client.ss_family == 0);
    CHECK(parse_text("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n") == 35 && client.ss_family == 0);
    /* The connection's own bytes follow: exactly the header is taken. */
    char buf[200];
    snprintf(buf, sizeof buf, "PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\nGET / HTTP/1.1\r\n");
    CHECK(parse_text(buf) == 34);
    /* The longest line there can be: 107 bytes with its CRLF. */
    const char *longest = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                          "65535 65535\r\n";
    CHECKF(strlen(longest) == 104 && parse_text(longest) == 104, "%zu", strlen(longest));
}

static void v1_malformed(void)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\n",                                   /* no header at all */
        "\x16\x03\x01\x02\x00",                                 /* a TLS ClientHello */
        "PROXY TCP4 192.0.2.7 198.51.100.1 51234\r\n",          /* a field missing */
        "PROXY TCP4 192.0.2.7 198.51.100.1 51234 443 1\r\n",    /* one too many */
        "PROXY TCP4  192.0.2.7 198.51.100.1 51234 443\r\n",     /* two spaces */
        "PROXY TCP4 192.0.2.7 198.51.100.1 51234 443 \r\n",     /* a trailing space */
        "PROXY tcp4 192.0.2.7 198.51.100.1 51234 443\r\n",      /* lower case */
        "PROXY TCP5 192.0.2.7 198.51.100.1 51234 443\r\n",
        "PROXY TCP4 192.0.2 198.51.100.1 51234 443\r\n",        /* not an address */
        "PROXY TCP4 2001:db8::7 198.51.100.1 51234 443\r\n",    /* the other family */
        "PROXY TCP6 192.0.2.7 2001:db8::1 51234 443\r\n",
        "PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n",      /* port out of range */
        "PROXY TCP4 192.0.2.7 198.51.100.1 051234 443\r\n",     /* leading zero */
        "PROXY TCP4 192.0.2.7 198.51.100.1 -1 443\r\n",
        "PROXY TCP4 192.0.2.7 198.51.100.1 +80 443\r\n",
        "PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\n",        /* LF alone */
        "PROXY TCP4 192.0.2.7 198.51.100.1 51234 443\rX",       /* CR alone */
        "PROXY TCP4 192.0.2.7\t198.51.100.1 51234 443\r\n",     /* a control byte */
        "PROXY TCP4 192.0.2.7 198.51.100.1 51234 \x80\r\n",     /* not ASCII */
        "PROXY \r\n",
        "PROXY\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(parse_text(bad[i]) == -1, "case %zu: %d", i, parse_text(bad[i]));
    /* No CRLF where the longest line would have ended: refused, not waited for. */
    char endless[300];
    memset(endless, 'A', sizeof endless);
    memcpy(endless, "PROXY UNKNOWN ", 14);
    CHECK(parse(endless, 106) == 0 && parse(endless, 107) == -1 && parse(endless, sizeof endless) == -1);
    /* A bad byte is refused as soon as it arrives. */
    CHECK(parse_text("PROXY TCP4 1.2.3.4\n") == -1 && parse_text("P") == 0 && parse_text("PX") == -1);
}

/* A v2 header: signature, version/command, family, length, then body. */
static size_t v2(unsigned char *out, unsigned char ver_cmd, unsigned char family, const void *body, size_t len)
{
    static const unsigned char sig[12] = { 13, 10, 13, 10, 0, 13, 10, 'Q', 'U', 'I', 'T', 10 };
    memcpy(out, sig, 12);
    out[12] = ver_cmd;
    out[13] = family;
    out[14] = (unsigned char)(len >> 8);
    out[15] = (unsigned char)len;
    memcpy(out + 16, body, len);
    return 16 + len;
}

static void v2_headers(void)
{
    unsigned char h[2048];
    unsigned char tcp4[12] = { 192, 0, 2, 7, 198, 51, 100, 1, 0xc8, 0x22, 1, 187 };
    size_t n = v2(h, 0x21, 0x11, tcp4, sizeof tcp4);
    CHECK(parse(h, n) == 28 && !strcmp(addr_text(), "192.0.2.7:51234"));
    CHECKF(prefixes_want_more(h, n) < 0, "prefix %d", prefixes_want_more(h, n));
    unsigned char tcp6[36] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 7, 0x20, 0x01, 0x0d, 0xb8, [31] = 1, 0x01, 0xbb, 0, 80 };
    n = v2(h, 0x21, 0x21, tcp6, sizeof tcp6);
    CHECK(parse(h, n) == 52 && !strcmp(addr_text(), "[2001:db8::7]:443"));
    /* With TLVs (an AWS NLB sends its VPC endpoint id as type 0xEA), and a ClientHello after. */
    unsigned char body[12 + 3 + 22 + 3 + 4];
    memcpy(body, tcp4, 12);
    unsigned char tlvs[] = { 0xea, 0, 22, 1, 'v', 'p', 'c', 'e', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
                             'a', 'b', 'c', 'd', 'e', 'f', 0x04, 0, 4, 0, 0, 0, 0 };
    _Static_assert(sizeof tlvs == sizeof body - 12, "TLVs fill the body");
    memcpy(body + 12, tlvs, sizeof tlvs);
    n = v2(h, 0x21, 0x11, body, sizeof body);
    memcpy(h + n, "\x16\x03\x01", 3);
    CHECK(parse(h, n + 3) == (int)n && !strcmp(addr_text(), "192.0.2.7:51234"));
    /* LOCAL (the balancer's own health check): the socket's address stands, whatever follows. */
    n = v2(h, 0x20, 0x00, "", 0);
    CHECK(parse(h, n) == 16 && client.ss_family == 0);
    n = v2(h, 0x20, 0x11, tcp4, sizeof tcp4);
    CHECK(parse(h, n) == 28 && client.ss_family == 0);
    /* UNSPEC, and a UNIX stream: no IP address to take. */
    n = v2(h, 0x21, 0x00, "", 0);
    CHECK(parse(h, n) == 16 && client.ss_family == 0);
    unsigned char unix_addrs[216] = { 0 };
    n = v2(h, 0x21, 0x31, unix_addrs, sizeof unix_addrs);
    CHECK(parse(h, n) == 232 && client.ss_family == 0);
}

static void v2_malformed(void)
{
    unsigned char h[2048];
    unsigned char tcp4[12] = { 192, 0, 2, 7, 198, 51, 100, 1, 0xc8, 0x22, 1, 187 };
    size_t n = v2(h, 0x11, 0x11, tcp4, sizeof tcp4);          /* version 1 in the binary form */
    CHECK(parse(h, n) == -1 && parse(h, 16) == -1);
    n = v2(h, 0x22, 0x11, tcp4, sizeof tcp4);                 /* command 2 */
    CHECK(parse(h, n) == -1);
    n = v2(h, 0x21, 0x12, tcp4, sizeof tcp4);                 /* UDP on a TCP connection */
    CHECK(parse(h, n) == -1);
    n = v2(h, 0x21, 0x41, tcp4, sizeof tcp4);                 /* no such family */
    CHECK(parse(h, n) == -1);
    n = v2(h, 0x21, 0x11, tcp4, 8);                           /* too short for IPv4 */
    CHECK(parse(h, n) == -1 && parse(h, 16) == -1);
    n = v2(h, 0x21, 0x21, tcp4, 12);                          /* too short for IPv6 */
    CHECK(parse(h, n) == -1);
    unsigned char body[16];
    memcpy(body, tcp4, 12);
    memcpy(body + 12, "\x04\x00\x09\x00", 4);                 /* a TLV that overruns */
    n = v2(h, 0x21, 0x11, body, sizeof body);
    CHECK(parse(h, n) == -1);
    n = v2(h, 0x21, 0x11, body, 14);                          /* half a TLV */
    CHECK(parse(h, n) == -1);
    /* Longer than the stage keeps: refused from its first 16 bytes. */
    unsigned char big[PROXY_HEADER_MAX];
    memset(big, 0, sizeof big);
    memcpy(big, tcp4, 12);
    n = v2(h, 0x21, 0x11, big, PROXY_HEADER_MAX - 15);
    CHECK(parse(h, 16) == -1);
    n = v2(h, 0x21, 0x11, big, PROXY_HEADER_MAX - 16);
    CHECK(parse(h, 16) == 0);
    /* The signature, one byte off. */
    n = v2(h, 0x21, 0x11, tcp4, sizeof tcp4);
    h[5] = 'X';
    CHECK(parse(h, n) == -1 && parse(h, 6) == -1 && parse(h, 5) == 0);
}

int main(void)
{
    RUN(v1_headers);
    RUN(v1_malformed);
    RUN(v2_headers);
    RUN(v2_malformed);
    CHECK_DONE();
}
