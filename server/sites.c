/* Finding a request's site and location in a configuration tree (config.h).
 *
 * The host is taken from :authority or Host, checked against RFC 3986's reg-name and
 * IP-literal grammar (anything else is a 400: a host with a slash, a NUL or a space
 * never reaches a site), lowered, its port and a trailing dot dropped.  A site is found
 * by its exact name, then by the longest wildcard ("*.example.com" for a.example.com
 * and a.b.example.com, as nginx), then it is its listener's default.
 *
 * Locations are matched against the decoded path: an exact location by hash, then the
 * prefix locations longest first.  Both lookups cost a hash of the host or the path
 * and a compare or two, so neither shows beside serving a request; a listener with one
 * site skips the host entirely. */
#include <string.h>

#include "config.h"

/* A reg-name's bytes (RFC 3986 3.2.2: unreserved / pct-encoded / sub-delims), each as
 * it is kept (lowered); 0 for every other byte. */
static const char host_byte[256] = {
    ['!'] = '!', ['$'] = '$', ['%'] = '%', ['&'] = '&', ['\''] = '\'', ['('] = '(', [')'] = ')',
    ['*'] = '*', ['+'] = '+', [','] = ',', ['-'] = '-', ['.'] = '.', ['0'] = '0', ['1'] = '1',
    ['2'] = '2', ['3'] = '3', ['4'] = '4', ['5'] = '5', ['6'] = '6', ['7'] = '7', ['8'] = '8',
    ['9'] = '9', [';'] = ';', ['='] = '=', ['A'] = 'a', ['B'] = 'b', ['C'] = 'c', ['D'] = 'd',
    ['E'] = 'e', ['F'] = 'f', ['G'] = 'g', ['H'] = 'h', ['I'] = 'i', ['J'] = 'j', ['K'] = 'k',
    ['L'] = 'l', ['M'] = 'm', ['N'] = 'n', ['O'] = 'o', ['P'] = 'p', ['Q'] = 'q', ['R'] = 'r',
    ['S'] = 's', ['T'] = 't', ['U'] = 'u', ['V'] = 'v', ['W'] = 'w', ['X'] = 'x', ['Y'] = 'y',
    ['Z'] = 'z', ['_'] = '_', ['a'] = 'a', ['b'] = 'b', ['c'] = 'c', ['d'] = 'd', ['e'] = 'e',
    ['f'] = 'f', ['g'] = 'g', ['h'] = 'h', ['i'] = 'i', ['j'] = 'j', ['k'] = 'k', ['l'] = 'l',
    ['m'] = 'm', ['n'] = 'n', ['o'] = 'o', ['p'] = 'p', ['q'] = 'q', ['r'] = 'r', ['s'] = 's',
    ['t'] = 't', ['u'] = 'u', ['v'] = 'v', ['w'] = 'w', ['x'] = 'x', ['y'] = 'y', ['z'] = 'z',
    ['~'] = '~'
};

int host_length(const char *authority)
{
    const char *a = authority, *p = a;
    if (!a || !*a)
        return 0;
    if (*p == '[') {
        for (p++; *p != ']'; p++)
            if (!((unsigned)*p - '0' < 10 || (unsigned)(*p | 0x20) - 'a' < 6 || *p == ':' || *p == '.'))
                return -1;         /* a NUL too: no closing bracket */
        p++;
    } else {
        /* A table and a register for the last byte: a few instructions a byte, as every
         * request pays for it. */
        char prev = '.', ch;
        for (; (ch = host_byte[(unsigned char)*p]); p++) {
            if (ch == '.' && prev == '.')
                return -1;         /* no empty label: ".example", "a..b" (nginx refuses them too) */
            prev = ch;
        }
    }
    size_t n = (size_t)(p - a);
    if (*p == ':') {                  /* the port: digits, or nothing */
        const char *digits = ++p;
        for (; *p; p++)
            if ((unsigned)*p - '0' >= 10)
                return -1;
        if (p - digits > 5)
            return -1;
    } else if (*p) {
        return -1;                    /* a byte no host has */
    }
    if (n && a[n - 1] == '.' && a[0] != '[')
        n--;                          /* "example.com." is example.com */
    return n == 0 || n > 255 ? -1 : (int)n;
}

int host_normalize(const char *authority, char *out, size_t cap)
{
    int n = host_length(authority);
    if (n <= 0)
        return n;
    if ((size_t)n >= cap)
        return -1;
    for (int i = 0; i < n; i++) {
        unsigned ch = (unsigned char)authority[i];
        out[i] = (char)(ch - 'A' < 26 ? ch + 32 : ch);
    }
    out[n] = 0;
    return n;
}

const struct site_table *config_sites_of(const struct config *c, unsigned slot)
{
    if (slot < MAX_LISTEN && c->listen_of_slot[slot] >= 0)
        return &c->listen_sites[c->listen_of_slot[slot]];
    return &c->all_sites;             /* its listener went away: it is being drained */
}

static uint32_t hash_start(void) { return 2166136261u; }
static uint32_t hash_more(uint32_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* The site named exactly (prefix, then name), or NULL. */
static const struct site *lookup(const struct site_table *t, const char *prefix, size_t pl, const char *name, size_t n)
{
    uint32_t h = hash_more(hash_more(hash_start(), prefix, pl), name, n) & t->mask;
    for (; t->names[h].name; h = (h + 1) & t->mask) {
        const struct site_name *e = &t->names[h];
        if (e->len == pl + n && !memcmp(e->name, prefix, pl) && !memcmp(e->name + pl, name, n))
            return e->site;
    }
    return NULL;
}

const struct site *site_for_host(const struct site_table *t, const char *host, size_t len)
{
    if (t->nsites <= 1 || !len)
        return t->dflt;
    const struct site *s = lookup(t, "", 0, host, len);
    if (s)
        return s;
    /* *.example.com: the longest suffix first, which is the leftmost dot. */
    for (size_t i = 0; i < len; i++)
        if (host[i] == '.' && (s = lookup(t, "*", 1, host + i, len - i)))
            return s;
    return t->dflt;
}

const struct site *site_for_sni(const struct site_table *t, const char *name)
{
    char host[256];
    /* A name, not an authority: no port, no IP literal (RFC 6066 section 3). */
    int n = name && !strchr(name, ':') ? host_normalize(name, host, sizeof host) : -1;
    return n > 0 ? site_for_host(t, host, (size_t)n) : t->dflt;
}

const struct location *location_for_path(const struct site *s, const char *path, size_t len, bool skip_implicit)
{
    if (s->exact_sieve & (UINT64_C(1) << location_sieve_bit(path, len))) {
        uint32_t h = hash_more(hash_start(), path, len) & s->exact_mask;
        for (const struct location *l; (l = s->exact[h]); h = (h + 1) & s->exact_mask)
            if (l->path_len == len && !memcmp(l->path, path, len) && !(skip_implicit && l->implicit))
                return l;
    }
    for (uint32_t i = 0; i < s->nprefixes; i++) {   /* "/" (every path's) needs no compare */
        const struct location *l = s->prefixes[i];
        if (l->path_len <= len && (l->path_len == 1 || !memcmp(l->path, path, l->path_len)))
            return l;
    }
    return NULL;                      /* every site has "/": only for a path without it */
}
