/* The per-client table (server/clienttable.c): keys cut to their prefix, connection
 * counts that are never evicted, least recently seen entries evicted first, a spray of
 * addresses that leaves the table at its size, nginx's leaky bucket (burst, nodelay,
 * delay, a refused client's bucket still draining exactly), and workers counting at once
 * (run under TSAN=1 and SAN=1 too). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "clienttable.h"

static struct sockaddr_storage v4(const char *a)
{
    struct sockaddr_storage ss = { 0 };
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    inet_pton(AF_INET, a, &in->sin_addr);
    return ss;
}
static struct sockaddr_storage v6(const char *a)
{
    struct sockaddr_storage ss = { 0 };
    struct sockaddr_in6 *in = (struct sockaddr_in6 *)&ss;
    in->sin6_family = AF_INET6;
    inet_pton(AF_INET6, a, &in->sin6_addr);
    return ss;
}
static bool same_key(struct client_table *t, struct sockaddr_storage a, struct sockaddr_storage b)
{
    struct client_key x, y;
    return client_key_addr(t, (struct sockaddr *)&a, &x) && client_key_addr(t, (struct sockaddr *)&b, &y) &&
           !memcmp(&x, &y, sizeof x);
}

static void prefixes(void)
{
    struct client_table *t = client_table_new(1 << 16, 32, 64), *u = client_table_new(1 << 16, 24, 48);
    CHECK(t && u);
    CHECK(!same_key(t, v4("127.0.0.1"), v4("127.0.0.2")));
    CHECK(same_key(t, v6("2001:db8:1:2::1"), v6("2001:db8:1:2:ffff::9")));   /* one /64 */
    CHECK(!same_key(t, v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1")));
    CHECK(same_key(u, v4("10.1.2.3"), v4("10.1.2.200")));
    CHECK(!same_key(u, v4("10.1.2.3"), v4("10.1.3.3")));
    CHECK(same_key(u, v6("2001:db8:1:2::1"), v6("2001:db8:1:ff::1")));
    CHECK(!same_key(t, v4("127.0.0.1"), v6("::ffff:127.0.0.2")));
    CHECK(same_key(t, v4("127.0.0.1"), v6("::ffff:127.0.0.1")));            /* a dual-stack socket's */
    CHECK(!same_key(t, v4("0.0.0.1"), v6("::1")));
    struct sockaddr_storage unix_sa = { .ss_family = AF_UNIX };
    struct client_key k;
    CHECK(!client_key_addr(t, (struct sockaddr *)&unix_sa, &k));
    struct client_key h1, h2, h3;
    client_key_name(t, "example.com", 11, &h1);
    client_key_name(t, "example.com", 11, &h2);
    client_key_name(t, "example.org", 11, &h3);
    CHECK(!memcmp(&h1, &h2, sizeof h1) && memcmp(&h1, &h3, sizeof h1));
    client_table_free(t);
    client_table_free(u);
}

/* Every prefix length, v4 and v6, against the bytes cut one by one. */
static void every_prefix_length(void)
{
    uint64_t seed = 0x243f6a8885a308d3u;
    for (unsigned bits = 0; bits <= 128; bits++) {
        struct client_table *t = client_table_new(1 << 12, bits <= 32 ? bits : 32, bits);
        CHECK(t);
        for (int n = 0; n < 50; n++) {
            struct sockaddr_storage ss = { .ss_family = AF_INET6 };
            uint8_t *a = ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;
            for (int i = 0; i < 16; i++)
                a[i] = (uint8_t)((seed = seed * 6364136223846793005u + 1442695040888963407u) >> 56);
            bool mapped = n % 2;
            if (mapped)
                memcpy(a, (uint8_t[12]){ [10] = 0xff, [11] = 0xff }, 12);
            unsigned keep = mapped ? 96 + (bits <= 32 ? bits : 32) : bits;
            uint8_t want[16];
            for (unsigned i = 0; i < 16; i++)
                want[i] = keep >= i * 8 + 8 ? a[i] : keep > i * 8 ? a[i] & (uint8_t)(0xff00u >> (keep - i * 8)) : 0;
            struct client_key k;
            CHECK(client_key_addr(t, (struct sockaddr *)&ss, &k));
            CHECK(!memcmp(k.b, want, 16));
        }
        client_table_free(t);
    }
}

static void key_n(struct client_table *t, uint32_t n, struct client_key *k)
{
    struct sockaddr_storage a = v6("2001:db8::");
    uint32_t be = htonl(n);
    memcpy(&((struct sockaddr_in6 *)&a)->sin6_addr.s6_addr[4], &be, 4);   /* a /64 of its own */
    client_key_addr(t, (struct sockaddr *)&a, k);
}

static void connection_counts(void)
{
    struct client_table *t = client_table_new(1 << 16, 32, 64);
    struct client_key k, o;
    key_n(t, 1, &k);
    key_n(t, 2, &o);
    bool log;
    for (int i = 0; i < 3; i++)
        CHECK(client_conn_acquire(t, &k, 3, 1000, 60, &log) == CLIENT_PASS && !log);
    CHECK(client_conn_acquire(t, &k, 3, 1000, 60, &log) == CLIENT_OVER && log);       /* logged once */
    CHECK(client_conn_acquire(t, &k, 3, 2000, 60, &log) == CLIENT_OVER && !log);      /* not again */
    CHECK(client_conn_acquire(t, &k, 3, 62000, 60, &log) == CLIENT_OVER && log);      /* a minute later */
    CHECK(client_conn_acquire(t, &o, 3, 1000, 60, &log) == CLIENT_PASS);              /* another client */
    client_conn_release(t, &k, 3000);
    CHECK(client_conn_acquire(t, &k, 3, 3000, 60, &log) == CLIENT_PASS);
    client_table_free(t);
}

/* One bucket: 8 entries. */
static void pinned_never_evicted(void)
{
    struct client_table *t = client_table_new(CLIENT_BUCKET_BYTES, 32, 64);
    struct client_key k[10];
    bool log;
    for (uint32_t i = 0; i < 10; i++)
        key_n(t, i, &k[i]);
    for (int i = 0; i < 8; i++)
        CHECK(client_conn_acquire(t, &k[i], 5, 1000 + (uint64_t)i, 60, &log) == CLIENT_PASS);
    CHECK(client_conn_acquire(t, &k[8], 5, 2000, 60, &log) == CLIENT_FULL);
    struct client_rate r = { 10000, 0, UINT32_MAX };
    uint64_t wait;
    CHECK(client_rate_take(t, &k[8], 1, &r, 2000, &wait) == CLIENT_FULL);
    client_conn_release(t, &k[3], 2001);             /* k[3] holds none now: it may go */
    CHECK(client_conn_acquire(t, &k[8], 5, 2002, 60, &log) == CLIENT_PASS);
    struct client_table_stats st;
    client_table_read(t, &st);
    CHECK(st.capacity == 8 && st.entries == 8 && st.evictions == 1);
    for (int i = 0; i < 9; i++)                      /* every count is still there to release */
        if (i != 3) {
            client_conn_release(t, &k[i], 3000);
            CHECK(client_conn_acquire(t, &k[i], 1, 3000, 60, &log) == CLIENT_PASS);
        }
    client_table_free(t);
}

static void least_recently_seen_first(void)
{
    struct client_table *t = client_table_new(CLIENT_BUCKET_BYTES, 32, 64);
    struct client_rate r = { 1000, 0, UINT32_MAX };   /* 1 r/s: a second request at once is refused */
    struct client_key k[10];
    uint64_t wait;
    for (uint32_t i = 0; i < 10; i++)
        key_n(t, i, &k[i]);
    for (int i = 0; i < 8; i++)
        CHECK(client_rate_take(t, &k[i], 1, &r, 1000 + (uint64_t)i, &wait) == CLIENT_PASS);
    CHECK(client_rate_take(t, &k[0], 1, &r, 1100, &wait) == CLIENT_OVER);   /* k[0] is seen: now the newest */
    CHECK(client_rate_take(t, &k[8], 1, &r, 1101, &wait) == CLIENT_PASS);   /* evicts k[1], seen longest ago */
    CHECK(client_rate_take(t, &k[0], 1, &r, 1102, &wait) == CLIENT_OVER);   /* remembered */
    CHECK(client_rate_take(t, &k[2], 1, &r, 1103, &wait) == CLIENT_OVER);   /* remembered */
    CHECK(client_rate_take(t, &k[1], 1, &r, 1104, &wait) == CLIENT_PASS);   /* forgotten: new again */
    client_table_free(t);
}

static void spray_stays_bounded(void)
{
    struct client_table *t = client_table_new(64 << 10, 32, 64);
    struct client_rate r = { 10000, 5000, UINT32_MAX };
    struct client_key k;
    uint64_t wait;
    bool log;
    for (uint32_t i = 0; i < 100000; i++) {
        key_n(t, i, &k);
        CHECK(client_rate_take(t, &k, 7, &r, 5000 + i / 100, &wait) == CLIENT_PASS);
    }
    struct client_table_stats st;
    client_table_read(t, &st);
    printf("# spray: 100000 /64s into %llu entries (%llu bytes, %llu per entry): %llu held, %llu evicted\n",
           (unsigned long long)st.capacity, (unsigned long long)st.bytes,
           (unsigned long long)(st.bytes / st.capacity), (unsigned long long)st.entries,
           (unsigned long long)st.evictions);
    CHECK(st.capacity == (64 << 10) / 32 && st.bytes == 64 << 10);
    CHECK(st.entries == st.capacity && st.evictions == 100000 - st.capacity);
    /* Holding connections, the spray fills buckets with what cannot go: the table refuses
     * rather than grow or forget a count. */
    uint32_t full = 0, passed = 0;
    for (uint32_t i = 0; i < 100000; i++) {
        key_n(t, i, &k);
        enum client_verdict v = client_conn_acquire(t, &k, 1, 9000, 60, &log);
        full += v == CLIENT_FULL;
        passed += v == CLIENT_PASS;
    }
    client_table_read(t, &st);
    CHECK(st.entries == st.capacity && passed <= st.capacity && passed + full == 100000);
    CHECK(passed > st.capacity * 9 / 10);
    client_table_free(t);
}

static enum client_verdict take(struct client_table *t, const struct client_key *k, const struct client_rate *r,
                                uint64_t now, uint64_t *wait)
{
    return client_rate_take(t, k, 3, r, now, wait);
}

static void leaky_bucket(void)
{
    struct client_table *t = client_table_new(1 << 16, 32, 64);
    struct client_key k;
    uint64_t w;
    key_n(t, 9, &k);
    /* 10r/s burst=5: each at once is held 100 ms longer than the one before, the 7th refused. */
    struct client_rate delayed = { 10000, 5000, 0 };
    CHECK(take(t, &k, &delayed, 10000, &w) == CLIENT_PASS && w == 0);
    for (uint64_t i = 1; i <= 5; i++)
        CHECKF(take(t, &k, &delayed, 10000, &w) == CLIENT_PASS && w == 100 * i, "%llu: %llu", (unsigned long long)i,
               (unsigned long long)w);
    CHECK(take(t, &k, &delayed, 10000, &w) == CLIENT_OVER && w == 100);
    CHECK(take(t, &k, &delayed, 10099, &w) == CLIENT_OVER && w == 1);
    CHECK(take(t, &k, &delayed, 10100, &w) == CLIENT_PASS && w == 500);
    /* nodelay: the burst passes at once. */
    key_n(t, 10, &k);
    struct client_rate nodelay = { 10000, 5000, UINT32_MAX };
    for (int i = 0; i < 6; i++)
        CHECK(take(t, &k, &nodelay, 10000, &w) == CLIENT_PASS && w == 0);
    CHECK(take(t, &k, &nodelay, 10000, &w) == CLIENT_OVER && w == 100);
    /* delay=2: two at once, then held. */
    key_n(t, 11, &k);
    struct client_rate two = { 10000, 5000, 2000 };
    for (int i = 0; i < 3; i++)
        CHECK(take(t, &k, &two, 10000, &w) == CLIENT_PASS && w == 0);
    CHECK(take(t, &k, &two, 10000, &w) == CLIENT_PASS && w == 100);
    /* burst 0 (nginx's default): one per 1/rate. */
    key_n(t, 12, &k);
    struct client_rate none = { 10000, 0, 0 };
    CHECK(take(t, &k, &none, 10000, &w) == CLIENT_PASS && w == 0);
    CHECK(take(t, &k, &none, 10050, &w) == CLIENT_OVER && w == 50);
    CHECK(take(t, &k, &none, 10100, &w) == CLIENT_PASS && w == 0);
    /* 1r/m (16 thousandths a second): asked every millisecond, refused until the bucket
     * has drained as it would untouched - 62.5 s, not never (each lookup's remainder kept). */
    key_n(t, 13, &k);
    struct client_rate slow = { 16, 0, 0 };
    CHECK(take(t, &k, &slow, 100000, &w) == CLIENT_PASS);
    uint64_t now = 100001;
    while (now < 100000 + 62500 && take(t, &k, &slow, now, &w) == CLIENT_OVER)
        now++;
    CHECKF(now == 100000 + 62500, "passed at +%llu ms", (unsigned long long)(now - 100000));
    CHECK(take(t, &k, &slow, now, &w) == CLIENT_PASS);
    /* A clock that went back counts as no time. */
    key_n(t, 14, &k);
    CHECK(take(t, &k, &none, 50000, &w) == CLIENT_PASS);
    CHECK(take(t, &k, &none, 40000, &w) == CLIENT_OVER);
    client_table_free(t);
}

/* Workers at once: each counts connections up and down and takes requests on shared
 * clients; every count is back to zero at the end. */
static struct client_table *shared;
static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    struct client_rate r = { 1000000, 1000, UINT32_MAX };
    for (uint32_t i = 0; i < 20000; i++) {
        struct client_key k;
        key_n(shared, (i + (uint32_t)id) % 64, &k);
        bool log;
        uint64_t w;
        if (client_conn_acquire(shared, &k, 1000, 1000 + i, 60, &log) == CLIENT_PASS)
            client_conn_release(shared, &k, 1000 + i);
        client_rate_take(shared, &k, 5, &r, 1000 + i, &w);
    }
    return NULL;
}

static void threads(void)
{
    shared = client_table_new(1 << 16, 32, 64);
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    struct client_table_stats st;
    for (int i = 0; i < 100; i++)
        client_table_read(shared, &st);      /* read while they write */
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    bool log;
    for (uint32_t i = 0; i < 64; i++) {
        struct client_key k;
        key_n(shared, i, &k);
        CHECK(client_conn_acquire(shared, &k, 1, 100000, 60, &log) == CLIENT_PASS);   /* holds none */
    }
    client_table_read(shared, &st);
    CHECK(st.entries == 128 && st.evictions == 0);
    client_table_free(shared);
}

int main(void)
{
    RUN(prefixes);
    RUN(every_prefix_length);
    RUN(connection_counts);
    RUN(pinned_never_evicted);
    RUN(least_recently_seen_first);
    RUN(spray_stays_bounded);
    RUN(leaky_bucket);
    RUN(threads);
    CHECK_DONE();
}
