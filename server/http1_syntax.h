/* What llhttp lets through in an HTTP/1.1 message and RFC 9112 forbids, checked the same
 * way for the requests of clients (proto/h1.c) and the responses of upstreams
 * (upstream/h1resp.c): a field name that is not a token (whitespace in or before it), a
 * control character in a value, a bare CR in the framing. */
#ifndef H2PARK_HTTP1_SYNTAX_H
#define H2PARK_HTTP1_SYNTAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* RFC 9110 5.6.2's tchar, lower-cased, by table (0: not a tchar): the check runs on
 * every byte of every field name of every request and upstream response, where isalnum,
 * strchr and tolower (calls into the C library's locale tables) cost several times the
 * table, and a branch per byte twice the table's one load. */
#define H1_TCHAR(c)                                                                                          \
    (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'z') || (c) == '!' || (c) == '#' || (c) == '$' ||   \
     (c) == '%' || (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' || (c) == '-' || (c) == '.' ||       \
     (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' || (c) == '~')
#define H1_TL(c) ((c) >= 'A' && (c) <= 'Z' ? ((c) | 0x20) : H1_TCHAR(c) ? (c) : 0)
#define H1_TL4(c) H1_TL(c), H1_TL((c) + 1), H1_TL((c) + 2), H1_TL((c) + 3)
#define H1_TL16(c) H1_TL4(c), H1_TL4((c) + 4), H1_TL4((c) + 8), H1_TL4((c) + 12)
#define H1_TL64(c) H1_TL16(c), H1_TL16((c) + 16), H1_TL16((c) + 32), H1_TL16((c) + 48)
static const unsigned char http1_token_lower[256] = { H1_TL64(0), H1_TL64(64), H1_TL64(128), H1_TL64(192) };
#undef H1_TL64
#undef H1_TL16
#undef H1_TL4
#undef H1_TL
#undef H1_TCHAR

/* A token, lower-cased in place; false if empty or not a token (then the name is left
 * changed: it is refused anyway). */
static inline bool http1_name_ok(char *name, size_t n)
{
    unsigned char missing = !n;
    for (size_t i = 0; i < n; i++) {
        unsigned char lower = http1_token_lower[(unsigned char)name[i]];
        missing |= !lower;
        name[i] = (char)lower;
    }
    return !missing;
}

/* *n shortened past trailing whitespace; false on a control character but tab.  Eight
 * bytes at a time first (values are most of a head's bytes): a word with no byte below
 * 0x20 and none of 0x7f is clean; one with either is looked at byte by byte. */
static inline bool http1_value_ok(const char *v, size_t *n)
{
    while (*n && (v[*n - 1] == ' ' || v[*n - 1] == '\t'))
        (*n)--;
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    size_t i = 0;
    for (; i + 8 <= *n; i += 8) {
        uint64_t w;
        memcpy(&w, v + i, 8);
        uint64_t x7f = w ^ (0x7f * ones);
        if (((w - 0x20 * ones) & ~w & highs) | ((x7f - ones) & ~x7f & highs))
            break;
    }
    for (; i < *n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

/* Whether f[0..n), bytes llhttp took as framing (a start line, fields, chunk lines,
 * trailers: all but a body's bytes), holds a CR that is not followed by LF.  llhttp,
 * lenient as it is built, takes the byte after the CR that ends a line for its LF in
 * several places - a status or request line, a chunk size, the last chunk, the end of
 * the fields or trailers - so "0" CR LF CR "XGET /admin ..." would be the end of a body
 * and a second message to it and one message to a parser that treats the bare CR as RFC
 * 9112 2.2 lets it.  A CR that ends one stretch of framing (*cr_last) is judged by the
 * first byte of the next; one memchr per CR, which framing has one of per line. */
static inline bool http1_bare_cr(const char *f, size_t n, bool *cr_last)
{
    const char *c = f, *end = f + n;
    if (*cr_last && n) {
        if (*c != '\n')
            return true;
        *cr_last = false;
    }
    while ((c = memchr(c, '\r', (size_t)(end - c)))) {
        if (++c == end) {
            *cr_last = true;
            break;
        }
        if (*c != '\n')
            return true;
    }
    return false;
}

/* Whether f[0..n), the framing after a chunk's data, fails to begin with the CRLF that
 * ends the chunk (*due: how many bytes of it are still to come, 2 after the data's last
 * byte).  llhttp, lenient, skips whichever two bytes follow the data: "hello" "XY" "0"
 * CRLF CRLF is a chunk and the end to it, "hello" LF "10" CRLF a chunk of 16 bytes to a
 * parser that takes an LF alone for a line end, and the last chunk to llhttp. */
static inline bool http1_chunk_end_bad(const char *f, size_t n, uint8_t *due)
{
    for (; *due && n; f++, n--, (*due)--)
        if (*f != (*due == 2 ? '\r' : '\n'))
            return true;
    return false;
}

#endif
