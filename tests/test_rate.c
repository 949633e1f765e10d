/* Unit tests of a response's bandwidth limit (server/runtime/rate.c), driven through whole
 * transfers on a clock of the test's own, so the figures are exact and no timing is judged:
 * how long 1 MiB takes at 200k, the first limit_rate_after bytes free, that no span of t
 * seconds carries more than rate * (t + 1) beyond them whatever the reader does, a quiet
 * client earning no more than a second's worth, bursts of at least a slice, and the
 * hostile ends: a rate of 1 byte a second, 2^50 bytes a second, a clock stepping back. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "runtime/rate.h"

/* One burst of a simulated transfer. */
struct event {
    double at;
    size_t n;
};
#define EVENTS_MAX 20000

/* Sends total bytes in pieces of at most piece (a front end's write or frame), waiting
 * whenever the meter says so, and after one burst in four for a pause drawn from
 * pause_max (a client that stops reading now and then): the bursts in ev, their count
 * returned. */
static size_t transfer(struct rate_meter *m, double start, uint64_t total, size_t piece, double pause_max,
                       struct event *ev, double *end)
{
    double now = start;
    size_t k = 0;
    for (uint64_t left = total; left && k < EVENTS_MAX;) {
        size_t want = left < piece ? (size_t)left : piece;
        size_t n = rate_allows(m, now, want);
        if (!n) {
            double due = rate_due(m, now, want);
            if (!(due > now))
                return 0;           /* a wait that would never end */
            now = due;
            continue;
        }
        rate_took(m, now, n);
        ev[k++] = (struct event){ now, n };
        left -= n;
        if (pause_max > 0 && rand() % 4 == 0)
            now += pause_max * (double)rand() / RAND_MAX;
    }
    *end = now;
    return k;
}

static struct event ev[EVENTS_MAX];

/* 1 MiB at 200k: the first second's worth at once, the rest at the rate - 4.12 s, as
 * nginx's rate * (t + 1) gives, and a little more for each wait's millisecond. */
static void one_mib_at_200k(void)
{
    struct rate_meter m;
    rate_start(&m, 200 << 10, 0, 1000);
    double end;
    size_t k = transfer(&m, 1000, 1 << 20, 64 << 10, 0, ev, &end);
    CHECK(k > 0);
    double took = end - 1000;
    CHECKF(took >= 4.11 && took < 4.25, "%.3f s", took);
    size_t first = 0;
    for (size_t i = 0; i < k && ev[i].at == 1000; i++)
        first += ev[i].n;
    CHECKF(first > (200 << 10) - rate_slice(&m) && first <= 200 << 10, "%zu at once", first);
    for (size_t i = 0; i < k; i++)
        if (ev[i].at > 1000)
            CHECKF(ev[i].n >= rate_slice(&m) || i == k - 1, "burst %zu of %zu bytes", i, ev[i].n);
}

/* limit_rate_after: those bytes and the first second's worth go at once. */
static void after_goes_free(void)
{
    struct rate_meter m;
    rate_start(&m, 200 << 10, 512 << 10, 0);
    CHECK(rate_allows(&m, 0, SIZE_MAX) == (512 + 200) << 10);
    CHECK(rate_allows(&m, 0, 1000) == 1000);
    double end;
    size_t k = transfer(&m, 0, 1 << 20, 16 << 10, 0, ev, &end);
    CHECK(k > 0);
    CHECKF(end >= 1.5 && end < 1.6, "%.3f s", end);   /* (1024 - 512 - 200) / 200 */
}

/* Whatever the reader does, no span of t seconds carries more than rate * (t + 1) bytes
 * beyond the free ones: checked between every pair of bursts of transfers with random
 * pieces and pauses. */
static void no_span_beats_the_rate(void)
{
    srand(46);
    const uint64_t rates[] = { 1000, 100 << 10, 200 << 10, 1 << 20, 10 << 20 };
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++)
        for (int round = 0; round < 4; round++) {
            struct rate_meter m;
            uint64_t after = round & 1 ? 64 << 10 : 0;
            rate_start(&m, rates[r], after, 5);
            double end;
            size_t least = rate_slice(&m) / 2 + 1, piece = least + (size_t)rand() % (64 << 10);
            uint64_t total = rates[r] * 4 + after;
            size_t k = transfer(&m, 5, total, piece, round == 2 ? 0.3 : round == 3 ? 3 : 0, ev, &end);
            CHECKF(k > 0 && k < EVENTS_MAX && end - 5 > 2.9, "rate %llu: %zu bursts, %.3f s", (unsigned long long)rates[r], k,
                   end - 5);
            for (size_t i = 0; i < k; i++) {
                double sum = 0;
                for (size_t j = i; j < k; j++) {
                    sum += (double)ev[j].n;
                    double bound = (double)rates[r] * (ev[j].at - ev[i].at + 1) + (double)after + 1;
                    CHECKF(sum <= bound, "rate %llu: %.0f bytes in %.3f s", (unsigned long long)rates[r], sum,
                           ev[j].at - ev[i].at);
                }
            }
        }
}

/* A client that read nothing for a minute gets one second's worth at once, not sixty. */
static void quiet_earns_one_second(void)
{
    struct rate_meter m;
    rate_start(&m, 100 << 10, 0, 0);
    rate_took(&m, 0, 100 << 10);
    CHECK(rate_allows(&m, 0, 1) == 0);
    CHECK(rate_allows(&m, 60, SIZE_MAX) == 100 << 10);
}

/* A slice is an eighth of a second's worth, 1 byte to 16 KiB; less than a slice waits,
 * unless that is all that is left. */
static void slices(void)
{
    struct rate_meter m;
    rate_start(&m, 1, 0, 0);
    CHECK(rate_slice(&m) == 1);
    rate_start(&m, 800, 0, 0);
    CHECK(rate_slice(&m) == 100);
    rate_start(&m, 1 << 20, 0, 0);
    CHECK(rate_slice(&m) == 16384);
    rate_start(&m, UINT64_C(1) << 50, 0, 0);
    CHECK(rate_slice(&m) == 16384);
    rate_start(&m, 80 << 10, 0, 0);                  /* slice 10 KiB */
    rate_took(&m, 0, 80 << 10);
    CHECK(rate_allows(&m, 0.1, 1 << 20) == 0);        /* 8 KiB of credit: not yet */
    CHECK(rate_allows(&m, 0.1, 4096) == 4096);        /* ... but enough for a body's last 4 KiB */
    double due = rate_due(&m, 0, 1 << 20);
    CHECKF(fabs(due - 0.126) < 1e-9, "%.6f", due);    /* 10 KiB at 80k, and the millisecond */
    CHECK(rate_allows(&m, due, 1 << 20) == 10321);    /* a whole slice when it is due */
    CHECK(rate_due(&m, 0, 0) == 0);
}

/* The ends of what configuration lets through, and a clock that steps back. */
static void hostile_ends(void)
{
    struct rate_meter m;
    rate_start(&m, 1, 0, 0);                          /* 1 byte a second: 10 bytes in 9 s */
    double end;
    size_t k = transfer(&m, 0, 10, 4096, 0, ev, &end);
    CHECKF(k == 10 && end > 9 && end < 9.1, "%zu bursts, %.3f s", k, end);
    rate_start(&m, UINT64_C(1) << 50, UINT64_C(1) << 50, 0);   /* 1048576g, both */
    CHECK(rate_allows(&m, 0, SIZE_MAX) == (size_t)1 << 51);
    rate_took(&m, 0, (size_t)1 << 51);
    CHECK(m.free_left == 0 && m.tokens == 0);
    CHECK(rate_allows(&m, 1e9, SIZE_MAX) == (size_t)1 << 50);  /* a second's worth, long after */
    rate_start(&m, 100 << 10, 0, 500);
    rate_took(&m, 500, 100 << 10);
    CHECK(rate_allows(&m, 400, SIZE_MAX) == 0);       /* the clock went back: no credit */
    double due = rate_due(&m, 400, SIZE_MAX);
    CHECKF(due > 400 && due < 401, "%.3f", due);
    rate_took(&m, 400, 0);
    CHECK(m.at == 500);                               /* nor does a later count lose time */
    rate_start(&m, 100 << 10, 0, 0);                  /* more than allowed is a debt, paid by waiting */
    rate_took(&m, 0, 300 << 10);
    CHECK(rate_allows(&m, 1.9, 1) == 0 && rate_allows(&m, 2.01, 1) == 1);
}

int main(void)
{
    RUN(one_mib_at_200k);
    RUN(after_goes_free);
    RUN(no_span_beats_the_rate);
    RUN(quiet_earns_one_second);
    RUN(slices);
    RUN(hostile_ends);
    CHECK_DONE();
}
