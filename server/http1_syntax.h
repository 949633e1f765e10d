/* What llhttp lets through in an HTTP/1.1 field and RFC 9112 forbids, checked the same way
 * for the requests of clients (proto/h1.c) and the responses of upstreams
 * (upstream/h1client.c): a field name that is not a token (whitespace in or before it), a
 * control character in a value. */
#ifndef H2PARK_HTTP1_SYNTAX_H
#define H2PARK_HTTP1_SYNTAX_H

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline bool http1_tchar(int ch) { return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch)); }

/* A token, lower-cased in place; false if empty or not a token. */
static inline bool http1_name_ok(char *name, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!http1_tchar((unsigned char)name[i]))
            return false;
        name[i] = (char)tolower((unsigned char)name[i]);
    }
    return true;
}

/* *n shortened past trailing whitespace; false on a control character but tab. */
static inline bool http1_value_ok(const char *v, size_t *n)
{
    while (*n && (v[*n - 1] == ' ' || v[*n - 1] == '\t'))
        (*n)--;
    for (size_t i = 0; i < *n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

#endif
