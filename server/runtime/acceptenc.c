/* Accept-Encoding (RFC 9110 12.5.3), read once per response that could be compressed.
 *
 *   Accept-Encoding = #( codings [ weight ] )
 *   codings         = content-coding / "identity" / "*"
 *   weight          = OWS ";" OWS "q=" qvalue
 *   qvalue          = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
 *
 * One pass over the field, no allocation, no copy: each element is cut at its commas,
 * its coding compared case-insensitively to the few h2park knows (x-gzip is gzip, RFC 9110
 * 8.4.1.3), and its weight kept in thousandths per coding.  The field is the client's, so
 * anything outside the grammar costs its element only: the rest of the field still counts.
 * Weights are integers, so no floating-point rounding decides between two codings. */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "runtime/acceptenc.h"

const char *const coding_name[CODING_COUNT] = { "", "gzip", "br", "zstd" };

/* RFC 9110 5.6.2's tchar. */
static bool tchar(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
        return true;
    return ch && strchr("!#$%&'*+-.^_`|~", ch);
}

static bool ows(char ch) { return ch == ' ' || ch == '\t'; }

/* A qvalue in thousandths from p..end, or -1 if it is not one. */
static int qvalue(const char *p, const char *end)
{
    if (p == end || (*p != '0' && *p != '1'))
        return -1;
    int q = (*p++ - '0') * 1000;
    if (p == end)
        return q;
    if (*p++ != '.')
        return -1;
    int scale = 100, digits = 0;
    for (; p < end; p++, digits++) {
        if (digits == 3 || *p < '0' || *p > '9')
            return -1;
        q += (*p - '0') * scale;
        scale /= 10;
    }
    return q > 1000 ? -1 : q;
}

/* Which of the known names (and '*') a coding token is: its index in weight[], or -1. */
enum { W_STAR = CODING_COUNT };
static int known(const char *t, size_t len)
{
    if (len == 1 && *t == '*')
        return W_STAR;
    if ((len == 4 && !strncasecmp(t, "gzip", 4)) || (len == 6 && !strncasecmp(t, "x-gzip", 6)))
        return CODING_GZIP;
    if (len == 2 && !strncasecmp(t, "br", 2))
        return CODING_BR;
    if (len == 4 && !strncasecmp(t, "zstd", 4))
        return CODING_ZSTD;
    if (len == 8 && !strncasecmp(t, "identity", 8))
        return CODING_IDENTITY;
    return -1;
}

/* One element, p..end: its coding's index and weight, or false if it is not the grammar's. */
static bool element(const char *p, const char *end, int *which, int *q)
{
    while (p < end && ows(*p))
        p++;
    while (end > p && ows(end[-1]))
        end--;
    const char *t = p;
    while (p < end && tchar((unsigned char)*p))
        p++;
    if (p == t)
        return false;
    *which = known(t, (size_t)(p - t));
    *q = 1000;
    while (p < end && ows(*p))
        p++;
    if (p == end)
        return true;
    if (*p++ != ';')
        return false;
    while (p < end && ows(*p))
        p++;
    if (end - p < 2 || (*p != 'q' && *p != 'Q') || p[1] != '=')
        return false;
    return (*q = qvalue(p + 2, end)) >= 0;
}

enum coding acceptenc_choose(const char *field, const uint8_t *prefs, size_t n)
{
    if (!field || !n)
        return CODING_IDENTITY;
    int weight[CODING_COUNT + 1];
    for (int i = 0; i <= CODING_COUNT; i++)
        weight[i] = -1;                 /* not named */
    for (const char *p = field; *p;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        int which, q;
        if (element(p, end, &which, &q) && which >= 0 && (weight[which] < 0 || q < weight[which]))
            weight[which] = q;
        p = comma ? comma + 1 : end;
    }
    enum coding best = CODING_IDENTITY;
    int best_q = 0;
    for (size_t i = 0; i < n; i++) {
        int c = prefs[i];
        if (c <= CODING_IDENTITY || c >= CODING_COUNT)
            continue;
        int q = weight[c] >= 0 ? weight[c] : weight[W_STAR] >= 0 ? weight[W_STAR] : 0;
        if (q > best_q)
            best = (enum coding)c, best_q = q;
    }
    /* identity named with a greater weight than every coding: the client would rather not. */
    if (best != CODING_IDENTITY && weight[CODING_IDENTITY] > best_q)
        return CODING_IDENTITY;
    return best;
}
