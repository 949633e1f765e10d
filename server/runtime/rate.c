/* A response's bandwidth limit - nginx's limit_rate and limit_rate_after - as a token
 * bucket: arithmetic on a clock the caller passes in (the worker's), nothing else, so the
 * request runtime decides where bytes are metered (request.c: where a front end takes a
 * response's body) and a unit test drives it through a whole transfer without a clock.
 *
 * The first limit_rate_after bytes go at full speed.  After them the bucket holds at most
 * one second's worth of credit and starts full - nginx lets a response send rate * (its
 * seconds + 1) bytes, the "+ 1" being that first second.  nginx's credit is the average
 * since the response began, so a client that read nothing for a minute may then take a
 * minute's worth at once; a bucket capped at one second never lends more than a second.
 * Over any t seconds, then, at most rate * (t + 1) bytes go beyond the free ones.
 *
 * Bytes go in bursts of at least a slice (an eighth of a second's worth, 1 byte to 16 KiB,
 * or what is left of the body if that is less): each burst costs a timer, a wake-up of the
 * connection and a write or a DATA frame, so a limited response pays that about eight
 * times a second at most (12 at 200k, where 16 KiB is the cap), instead of a few bytes at
 * every incidental wake-up (another stream's frame on the same HTTP/2 connection).  16 KiB
 * is an HTTP/2 DATA frame's usual payload, so a burst over HTTP/2 is a frame or two.
 *
 * Invariants: tokens <= rate; tokens < 0 only if more was taken than rate_allows said (a
 * debt, paid by waiting); free_left only falls.  A clock that steps back gives no credit. */
#include "runtime/rate.h"

#define SLICE_MAX 16384.0

void rate_start(struct rate_meter *m, uint64_t rate, uint64_t after, double now)
{
    m->rate = (double)rate;
    m->tokens = m->rate;
    m->at = now;
    m->free_left = after;
}

static double tokens_at(const struct rate_meter *m, double now)
{
    double t = m->tokens + (now > m->at ? (now - m->at) * m->rate : 0);
    return t < m->rate ? t : m->rate;
}

size_t rate_slice(const struct rate_meter *m)
{
    double s = m->rate / 8;
    return s < 1 ? 1 : s > SLICE_MAX ? (size_t)SLICE_MAX : (size_t)s;
}

size_t rate_allows(const struct rate_meter *m, double now, size_t want)
{
    double t = tokens_at(m, now);
    if (m->free_left) {
        double credit = (double)m->free_left + (t > 0 ? t : 0);
        return (double)want <= credit ? want : (size_t)credit;
    }
    size_t slice = rate_slice(m), least = want < slice ? want : slice;
    if (t < (double)least)
        return 0;
    return (double)want <= t ? want : (size_t)t;
}

void rate_took(struct rate_meter *m, double now, size_t n)
{
    double t = tokens_at(m, now);
    uint64_t free_part = n < m->free_left ? n : m->free_left;
    m->free_left -= free_part;
    m->tokens = t - (double)(n - free_part);
    if (now > m->at)
        m->at = now;
}

double rate_due(const struct rate_meter *m, double now, size_t want)
{
    if (!want || rate_allows(m, now, want))
        return now;
    size_t slice = rate_slice(m), least = want < slice ? want : slice;
    /* A millisecond late, as nginx's timer is: a timer that fires exactly when the credit
     * comes to the slice must not find it a rounding short. */
    return now + ((double)least - tokens_at(m, now)) / m->rate + 0.001;
}
