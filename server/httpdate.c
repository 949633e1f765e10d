/* HTTP dates.  Formatting does not use strftime: it depends on the locale and costs
 * far more than the 29 bytes it makes, and every response carries a Date.  The current
 * date is formatted once a second per thread.  Parsing accepts the three forms RFC 9110
 * section 5.6.7 requires of a recipient: IMF-fixdate, the obsolete RFC 850 form and
 * asctime's. */
#define _GNU_SOURCE
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

int64_t http_date_parse(const char *v)
{
    static const char *const forms[] = { "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                         "%a %b %e %H:%M:%S %Y" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(v, forms[i], &tm);
        if (!end || *end)
            continue;
        int64_t t = (int64_t)timegm(&tm);
        /* RFC 850's two-digit year: one more than 50 years ahead is in the past century. */
        if (i == 1 && t > (int64_t)time(NULL) + 50ll * 366 * 86400) {
            tm.tm_year -= 100;
            t = (int64_t)timegm(&tm);
        }
        return t;
    }
    return -1;
}
