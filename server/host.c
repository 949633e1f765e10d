/* A request's host, from :authority, Host or an absolute-form target: checked against
 * RFC 3986's reg-name and IP-literal grammar (anything else is a 400: a host with a
 * slash, a NUL or a space never reaches a site), its port and a trailing dot dropped,
 * lowered only where a site lookup or an answer needs it.
 *
 * Every request pays for the check, so it is done once: HTTP/1.1's front end checks
 * Host as it reads it (host_span) and hands the length to the request; HTTP/2's is
 * measured when the request is routed (host_length).  One scan serves both: the
 * bounded and the NUL-ended spelling are the same inline code.  A reg-name's bytes are
 * one table load each; the empty-label check runs at dots only. */
#include <stdbool.h>
#include <stdint.h>

#include "host.h"

/* RFC 3986 3.2.2 reg-name: unreserved / pct-encoded / sub-delims.  1 for each such
 * byte but '.', which is 2; 0 for every other byte, NUL included. */
enum { REG = 1, DOT = 2 };
static const uint8_t reg_class[256] = {
    ['0' ... '9'] = REG, ['a' ... 'z'] = REG, ['A' ... 'Z'] = REG, ['-'] = REG, ['_'] = REG, ['~'] = REG,
    ['%'] = REG, ['!'] = REG, ['$'] = REG, ['&'] = REG, ['\''] = REG, ['('] = REG, [')'] = REG, ['*'] = REG,
    ['+'] = REG, [','] = REG, [';'] = REG, ['='] = REG, ['.'] = DOT,
};

static inline bool ip_literal_byte(unsigned ch)
{
    return ch - '0' < 10 || (ch | 0x20) - 'a' < 6 || ch == ':' || ch == '.';
}

/* What the compiler must take as changed: after a loop it then reads the byte again
 * instead of carrying it (and the index before it) through the loop, which costs three
 * instructions a byte more. */
#define opaque(x) __asm__("" : "+r"(x))

/* bounded: n bytes end a; else a NUL does (the compiler keeps one of the two spellings). */
static inline __attribute__((always_inline)) int scan(const char *a, size_t n, bool bounded)
{
#define AT_END(k) (bounded ? (k) == n : !u[k])
    const unsigned char *u = (const unsigned char *)a;
    size_t i = 0;
    if (AT_END(i))
        return 0;
    if (u[0] == '[') {
        for (i = 1; !AT_END(i) && u[i] != ']'; i++)
            if (!ip_literal_byte(u[i]))
                return -1;
        if (AT_END(i))
            return -1;             /* no closing bracket */
        i++;
    } else {
        for (;;) {
            unsigned cls;
            if (bounded) {
                while (i < n && reg_class[u[i]] == REG)
                    i++;
                cls = i < n ? reg_class[u[i]] : 0;
            } else {
                while (reg_class[u[i]] == REG)
                    i++;
                opaque(i);
                cls = reg_class[u[i]];
            }
            if (cls != DOT)
                break;
            if (i == 0 || u[i - 1] == '.')
                return -1;         /* no empty label: ".example", "a..b" (nginx refuses them too) */
            i++;
        }
    }
    size_t len = i;
    if (!AT_END(i)) {
        if (u[i] != ':')
            return -1;             /* a byte no host has */
        size_t digits = ++i;       /* the port: digits, or nothing */
        while ((!bounded || i < n) && (unsigned)(u[i] - '0') < 10)
            i++;
        opaque(i);
        if (!AT_END(i) || i - digits > 5)
            return -1;
    }
    if (len && u[len - 1] == '.' && u[0] != '[')
        len--;                     /* "example.com." is example.com */
    return len == 0 || len > 255 ? -1 : (int)len;
#undef AT_END
}

int host_length(const char *authority) { return authority ? scan(authority, 0, false) : 0; }

int host_span(const char *s, size_t n) { return scan(s, n, true); }

void host_lower(const char *authority, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        unsigned ch = (unsigned char)authority[i];
        out[i] = (char)(ch - 'A' < 26 ? ch + 32 : ch);
    }
    out[n] = 0;
}

int host_normalize(const char *authority, char *out, size_t cap)
{
    int n = host_length(authority);
    if (n <= 0)
        return n;
    if ((size_t)n >= cap)
        return -1;
    host_lower(authority, (size_t)n, out);
    return n;
}
