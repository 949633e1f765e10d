/* HTTP dates (RFC 9110 section 5.6.7), formatted and parsed (httpdate.c). */
#ifndef H2PARK_HTTPDATE_H
#define H2PARK_HTTPDATE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define HTTP_DATE_LEN 29            /* "Sun, 06 Nov 1994 08:49:37 GMT" */

/* t as an IMF-fixdate into out (at least HTTP_DATE_LEN + 1 bytes). */
void http_date_format(time_t t, char *out);
/* The current second as an IMF-fixdate, formatted once a second per thread. */
const char *http_date_now(void);
/* Any of the three forms a recipient must accept; -1 if none fits. */
int64_t http_date_parse(const char *text);

#endif
