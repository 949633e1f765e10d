/* What llhttp lets through in an HTTP/1.1 field and RFC 9112 forbids, checked the same way
 * for the requests of clients (proto/h1.c) and the responses of upstreams
 * (upstream/h1client.c): a field name that is not a token (whitespace in or before it), a
 * control character in a value. */
#ifndef H2PARK_HTTP1_SYNTAX_H
#define H2PARK_HTTP1_SYNTAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* RFC 9110 5.6.2's tchar, by table: the check runs on every byte of every field name
 * of every request and upstream response, where isalnum, strchr and tolower (calls into
 * the C library's locale tables) cost several times the table. */
static const bool http1_tchars[256] = {
    ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true, ['!'] = true, ['#'] = true,
    ['$'] = true, ['%'] = true, ['&'] = true, ['\''] = true, ['*'] = true, ['+'] = true, ['-'] = true,
    ['.'] = true, ['^'] = true, ['_'] = true, ['`'] = true, ['|'] = true, ['~'] = true,
};

/* A token, lower-cased in place; false if empty or not a token. */
static inline bool http1_name_ok(char *name, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!http1_tchars[ch])
            return false;
        if (ch >= 'A' && ch <= 'Z')
            name[i] = (char)(ch + ('a' - 'A'));
    }
    return true;
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

#endif
