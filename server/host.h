/* A request's host (host.c): RFC 3986's grammar, measured once, lowered on demand. */
#ifndef H2PARK_HOST_H
#define H2PARK_HOST_H

#include <stddef.h>

/* The length of an authority's host, its port and a trailing dot left out: 0 for none,
 * -1 if it is no valid host (RFC 9110 4.2.3, RFC 3986 3.2.2). */
int host_length(const char *authority);
/* The same for the n bytes at s (no NUL needed): what a front end checks Host with. */
int host_span(const char *s, size_t n);
/* The host of an authority ("Example.COM.:443" -> "example.com") in out, lowered: its
 * length, as host_length. */
int host_normalize(const char *authority, char *out, size_t cap);
/* The first n bytes of authority, a host host_length measured, lowered into out (n + 1
 * bytes). */
void host_lower(const char *authority, size_t n, char *out);

#endif
