/* A response's bandwidth limit (limit_rate, limit_rate_after): a token bucket over a
 * clock its caller passes in, so that it is arithmetic alone (see rate.c). */
#ifndef H2PARK_RATE_H
#define H2PARK_RATE_H

#include <stddef.h>
#include <stdint.h>

struct rate_meter {
    double rate;                   /* bytes per second, > 0 */
    double tokens;                 /* the credit when last counted: at most rate; below 0 a debt */
    double at;                     /* when it was counted */
    uint64_t free_left;            /* of limit_rate_after: bytes that still go at full speed */
};

/* A meter for rate bytes a second (> 0) after the first `after`, its bucket full. */
void rate_start(struct rate_meter *m, uint64_t rate, uint64_t after, double now);
/* How many of want bytes may go now: all of them, as many as the credit covers, or 0
 * while the credit is less than a slice (or than want, if want is less). */
size_t rate_allows(const struct rate_meter *m, double now, size_t want);
/* n bytes went at now. */
void rate_took(struct rate_meter *m, double now, size_t n);
/* When rate_allows(want) will say more than 0: now, if it does already. */
double rate_due(const struct rate_meter *m, double now, size_t want);
/* The least burst worth waking for: an eighth of a second's worth, 1 byte to 16 KiB. */
size_t rate_slice(const struct rate_meter *m);

#endif
