/* SCALLOC_CONF: the heap's settings from the environment, read once as the heap sets itself
 * up (jemalloc's MALLOC_CONF, Go's GODEBUG).
 *
 * The value is comma-separated key:value pairs:
 *   decay_ms:N     how long free pages beyond the retained goal may stay resident (pageheap.c):
 *                  the window of the in-use peak the goal follows; 0 follows the in-use pages
 *                  of the last tick or two, -1 never returns pages unasked (sc_scavenge still does)
 *   retain_pct:N   how far above that peak the goal lies, in percent of it (0..1000)
 * A program can change decay_ms later with sc_set_decay_ms.
 *
 * It runs inside the first allocation of the process, which may come from the dynamic linker
 * or a constructor before the C library is fully up: it must not allocate, so it parses the
 * string in place and reports a bad pair with write(2) - one line, the rest of the value still
 * read - never with stdio.  A setting it cannot read keeps its default: a typo in an environment
 * variable must not change how a program runs beyond what the reader meant to change. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define RETAIN_PCT_MAX 1000
#define DECAY_MS_MAX (24 * 3600 * 1000)     /* a day: longer is "never" in all but name */

static void warn_pair(const char *pair, size_t len)
{
    static const char head[] = "scalloc: SCALLOC_CONF: ignored '";
    static const char tail[] = "' (expected decay_ms:N (-1..86400000) or retain_pct:N (0..1000))\n";
    if (len > 64)
        len = 64;
    /* Nothing to do if stderr is gone; a failed write must not fail the allocation. */
    if (write(2, head, sizeof head - 1) < 0 || write(2, pair, len) < 0 || write(2, tail, sizeof tail - 1) < 0)
        return;
}

/* A decimal integer filling [s, end), optionally negative, within [lo, hi]. */
static bool parse_int(const char *s, const char *end, long lo, long hi, long *out)
{
    bool neg = s < end && *s == '-';
    s += neg;
    if (s == end)
        return false;
    long v = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9' || v > (hi > -lo ? hi : -lo))
            return false;
        v = v * 10 + (*s - '0');
    }
    v = neg ? -v : v;
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool key_is(const char *s, const char *colon, const char *key)
{
    size_t n = strlen(key);
    return (size_t)(colon - s) == n && !memcmp(s, key, n);
}

void sc_conf_parse(const char *v, struct sc_conf *conf)
{
    while (v && *v) {
        const char *end = strchr(v, ',');
        if (!end)
            end = v + strlen(v);
        const char *colon = memchr(v, ':', (size_t)(end - v));
        long n;
        bool ok = false;
        if (colon && key_is(v, colon, "decay_ms") && parse_int(colon + 1, end, -1, DECAY_MS_MAX, &n)) {
            conf->decay_ms = (int)n;
            ok = true;
        } else if (colon && key_is(v, colon, "retain_pct") && parse_int(colon + 1, end, 0, RETAIN_PCT_MAX, &n)) {
            conf->retain_pct = (unsigned)n;
            ok = true;
        }
        if (!ok && end > v)
            warn_pair(v, (size_t)(end - v));
        v = *end ? end + 1 : end;
    }
}

void sc_conf_read(struct sc_conf *conf) { sc_conf_parse(getenv("SCALLOC_CONF"), conf); }
