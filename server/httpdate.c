/* HTTP dates.  Formatting does not use strftime: it depends on the locale and costs
 * far more than the 29 bytes it makes, and every response carries a Date.  The current
 * date is formatted once a second per thread.  Parsing accepts the three forms RFC 9110
 * section 5.6.7 requires of a recipient: IMF-fixdate, the obsolete RFC 850 form and
 * asctime's, each exactly (no strptime: it is lenient about spaces and digits, and
 * depends on the locale). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "httpdate.h"

static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };

void http_date_format(time_t t, char *out)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    char text[64];      /* room for any year the compiler can imagine; real ones take 29 */
    snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
             months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    memcpy(out, text, HTTP_DATE_LEN);
    out[HTTP_DATE_LEN] = 0;
}

const char *http_date_now(void)
{
    static __thread time_t last;
    static __thread char text[HTTP_DATE_LEN + 1];
    time_t now = time(NULL);
    if (now != last) {
        http_date_format(now, text);
        last = now;
    }
    return text;
}

/* n digits at s, as a number in [lo, hi]: 0 and *out, or -1. */
static int digits(const char *s, size_t n, int lo, int hi, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int month_of(const char *s)
{
    for (int m = 0; m < 12; m++)
        if (!memcmp(s, months[m], 3))
            return m;
    return -1;
}

/* "HH:MM:SS" at s (a leap second allowed, as the RFC's grammar does). */
static int time_of_day(const char *s, struct tm *tm)
{
    return s[2] != ':' || s[5] != ':' || digits(s, 2, 0, 23, &tm->tm_hour) || digits(s + 3, 2, 0, 59, &tm->tm_min) ||
                   digits(s + 6, 2, 0, 60, &tm->tm_sec)
               ? -1
               : 0;
}

/* Exactly one of the three forms, case and spaces as the grammar has them and every
 * number its digits only (strptime would take spaces, signs and one-digit days). */
int64_t http_date_parse(const char *v)
{
    static const char *const long_days[7] = { "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                              "Saturday" };
    size_t n = strlen(v);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int year = -1, day = -1;
    bool two_digit_year = false;
    const char *comma = memchr(v, ',', n);
    if (n == 29 && comma == v + 3) {                         /* Sun, 06 Nov 1994 08:49:37 GMT */
        if (v[4] != ' ' || v[7] != ' ' || v[11] != ' ' || v[16] != ' ' || v[25] != ' ' || memcmp(v + 26, "GMT", 3) ||
            digits(v + 5, 2, 1, 31, &day) || (tm.tm_mon = month_of(v + 8)) < 0 || digits(v + 12, 4, 0, 9999, &year) ||
            time_of_day(v + 17, &tm))
            return -1;
        for (tm.tm_wday = 0; tm.tm_wday < 7 && memcmp(v, days[tm.tm_wday], 3); tm.tm_wday++) {
        }
    } else if (n == 24 && !comma) {                          /* Sun Nov  6 08:49:37 1994 */
        if (v[3] != ' ' || v[7] != ' ' || v[10] != ' ' || v[19] != ' ' || (tm.tm_mon = month_of(v + 4)) < 0 ||
            (v[8] == ' ' ? digits(v + 9, 1, 1, 9, &day) : digits(v + 8, 2, 10, 31, &day)) || time_of_day(v + 11, &tm) ||
            digits(v + 20, 4, 0, 9999, &year))
            return -1;
        for (tm.tm_wday = 0; tm.tm_wday < 7 && memcmp(v, days[tm.tm_wday], 3); tm.tm_wday++) {
        }
    } else if (comma && n == (size_t)(comma - v) + 24) {     /* Sunday, 06-Nov-94 08:49:37 GMT */
        const char *d = comma + 2;
        if (comma[1] != ' ' || d[2] != '-' || d[6] != '-' || d[9] != ' ' || d[18] != ' ' || memcmp(d + 19, "GMT", 3) ||
            digits(d, 2, 1, 31, &day) || (tm.tm_mon = month_of(d + 3)) < 0 || digits(d + 7, 2, 0, 99, &year) ||
            time_of_day(d + 10, &tm))
            return -1;
        for (tm.tm_wday = 0; tm.tm_wday < 7; tm.tm_wday++)
            if (strlen(long_days[tm.tm_wday]) == (size_t)(comma - v) && !memcmp(v, long_days[tm.tm_wday], (size_t)(comma - v)))
                break;
        two_digit_year = true;
        year += 1900;
    } else {
        return -1;
    }
    if (tm.tm_wday == 7)
        return -1;                                           /* no day's name */
    tm.tm_mday = day;
    tm.tm_year = year - 1900;
    int64_t t = (int64_t)timegm(&tm);
    /* RFC 850's two-digit year: one more than 50 years ahead is in the past century. */
    if (two_digit_year && t < (int64_t)time(NULL) - 50ll * 366 * 86400) {
        tm.tm_year += 100;
        t = (int64_t)timegm(&tm);
    }
    struct tm back;
    gmtime_r(&(time_t){ (time_t)t }, &back);
    return back.tm_mday == day ? t : -1;                     /* no 31 Feb */
}
