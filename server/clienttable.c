/* The per-client table: a fixed block, mapped once when a configuration first asks for
 * a limit, never grown, shared by every worker.
 *
 * Layout: buckets of 8 entries (256 bytes, four cache lines); a key and its rule hash,
 * with a secret drawn at creation, to one bucket, and a lookup compares the 8 entries
 * there.  A bucket belongs to one of 256 shards, each a mutex and its counts (entries,
 * evictions) on a line of its own, so that workers meet on a lock only when their
 * clients hash to the same shard, and a lookup holds it for the 8 compares.
 *
 * Eviction: a new key takes a free entry of its bucket, else the entry of its bucket
 * seen longest ago - least recently seen first, exactly within the bucket - but never
 * one that counts open connections: forgetting it would let its client past its limit
 * and make the count's release miss.  A bucket whose 8 entries all count connections
 * refuses the new key (CLIENT_FULL), as nginx refuses when its zone has no room; a table
 * sized well above the connections it may hold (max_conns) makes that rare, and a
 * client's address cannot choose its bucket (the hash's secret).  Under a spray of
 * addresses the table therefore stays its size, and what it forgets first are the
 * clients that came once and not since.
 *
 * An entry is 32 bytes: the key, when it was last seen (ms; 0: free), the rule (0: the
 * connection count, else a limit_req rule's id), and two counters: a connection entry's
 * connections and when its client's last refusal was logged, a rule's level (nginx's
 * excess) and what its drain left below a thousandth.  Every lookup, a refused one too,
 * makes the entry seen now - a client refused again and again stays the most recent, and
 * is not forgotten (which would let it in afresh) - so a rule's level is brought to now at
 * each, the remainder carried so that lookups every millisecond drain it exactly as one a
 * minute does.  Times are the workers' clocks in milliseconds; one that went back
 * (another worker's clock, read a little earlier) counts as no time. */
#define _GNU_SOURCE
#include <endian.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include "clienttable.h"
#include "config.h"
#include "scalloc.h"

struct entry {
    uint8_t key[16];
    uint64_t seen_ms;              /* 0: free */
    int32_t level;                 /* a rule's: excess (thousandths; > -1000); a connection entry's: last log (s) */
    uint16_t rule;
    uint16_t count;                /* a connection entry's: connections; a rule's: drain remainder (millionths) */
};
_Static_assert(sizeof(struct entry) == CLIENT_ENTRY_BYTES, "an entry is 32 bytes");

#define WAYS 8
#define SHARDS 256
struct bucket {
    struct entry e[WAYS];
};

struct shard {
    pthread_mutex_t lock;
    uint64_t entries, evictions;   /* written under lock, read without */
} __attribute__((aligned(64)));

struct client_table {
    struct bucket *buckets;
    uint64_t nbuckets;
    size_t map_bytes;
    uint64_t secret[3];
    uint8_t v4_bits, v6_bits;
    struct shard shards[SHARDS];
};

static uint64_t fold(uint64_t a, uint64_t b)
{
    __uint128_t m = (__uint128_t)a * b;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

struct client_table *client_table_new(size_t bytes, unsigned v4_bits, unsigned v6_bits)
{
    struct client_table *t = sc_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->nbuckets = bytes / CLIENT_BUCKET_BYTES ? bytes / CLIENT_BUCKET_BYTES : 1;
    t->map_bytes = (size_t)t->nbuckets * sizeof(struct bucket);
    /* Anonymous pages are zero (every entry free) and resident only once written. */
    void *m = mmap(NULL, t->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        sc_free(t);
        return NULL;
    }
    t->buckets = m;
    t->v4_bits = (uint8_t)v4_bits;
    t->v6_bits = (uint8_t)v6_bits;
    if (getrandom(t->secret, sizeof t->secret, 0) != sizeof t->secret) {
        struct timespec ts;           /* no entropy yet (early boot): still unknown to a client */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t->secret[0] ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u;
        t->secret[1] ^= (uint64_t)(uintptr_t)t;
    }
    t->secret[0] |= 1, t->secret[1] |= 1, t->secret[2] |= 1;
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_init(&t->shards[i].lock, NULL);
    return t;
}

void client_table_free(struct client_table *t)
{
    if (!t)
        return;
    munmap(t->buckets, t->map_bytes);
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_destroy(&t->shards[i].lock);
    sc_free(t);
}

bool client_key_addr(const struct client_table *t, const struct sockaddr *sa, struct client_key *k)
{
    if (!net_address(sa, k->b))
        return false;
    static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    unsigned bits = memcmp(k->b, v4_mapped, 12) ? t->v6_bits : 96u + t->v4_bits;
    /* The address is in network order: the prefix is the high bits of each big-endian half
     * (a loop over the 16 bytes cost a third of a limit_req's instructions). */
    uint64_t hi, lo;
    memcpy(&hi, k->b, 8);
    memcpy(&lo, k->b + 8, 8);
    hi &= htobe64(bits >= 64 ? ~0ull : bits ? ~0ull << (64 - bits) : 0);
    lo &= htobe64(bits >= 128 ? ~0ull : bits > 64 ? ~0ull << (128 - bits) : 0);
    memcpy(k->b, &hi, 8);
    memcpy(k->b + 8, &lo, 8);
    return true;
}

void client_key_name(const struct client_table *t, const char *name, size_t len, struct client_key *k)
{
    uint64_t a = t->secret[1] ^ len, b = t->secret[2] ^ (len << 32);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w = 0;
        memcpy(&w, name + i, len - i < 8 ? len - i : 8);
        a = fold(a ^ w, 0x9e3779b97f4a7c15u);
        b = fold(b ^ w, 0xc2b2ae3d27d4eb4fu) ^ a;
    }
    a = fold(a, t->secret[0]);
    b = fold(b ^ a, t->secret[0] ^ 0xff51afd7ed558ccdu);
    memcpy(k->b, &a, 8);
    memcpy(k->b + 8, &b, 8);
}

static uint64_t bucket_of(const struct client_table *t, const struct client_key *k, uint16_t rule)
{
    uint64_t lo, hi;
    memcpy(&lo, k->b, 8);
    memcpy(&hi, k->b + 8, 8);
    uint64_t h = fold(lo ^ t->secret[0], hi ^ t->secret[1]) ^ fold(hi ^ rule, t->secret[2]);
    return (uint64_t)(((__uint128_t)h * t->nbuckets) >> 64);
}

static struct shard *lock_bucket(struct client_table *t, uint64_t b)
{
    struct shard *s = &t->shards[b % SHARDS];
    pthread_mutex_lock(&s->lock);
    return s;
}

static void count(uint64_t *c, int64_t d) { __atomic_store_n(c, *c + (uint64_t)d, __ATOMIC_RELAXED); }

/* k's entry under rule in bucket b, made if need be (new: zero counters); NULL if every
 * entry there counts connections.  The shard's lock is held. */
static struct entry *entry_for(struct client_table *t, struct shard *s, uint64_t b, const struct client_key *k,
                               uint16_t rule, bool *fresh)
{
    struct entry *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < WAYS; i++) {
        struct entry *e = &t->buckets[b].e[i];
        if (!e->seen_ms) {
            if (!free_slot)
                free_slot = e;
            continue;
        }
        if (e->rule == rule && !memcmp(e->key, k->b, 16)) {
            *fresh = false;
            return e;
        }
        if ((e->rule || !e->count) && (!oldest || e->seen_ms < oldest->seen_ms))
            oldest = e;
    }
    struct entry *e = free_slot ? free_slot : oldest;
    if (!e)
        return NULL;
    if (free_slot)
        count(&s->entries, 1);
    else
        count(&s->evictions, 1);
    memcpy(e->key, k->b, 16);
    e->rule = rule;
    e->count = 0;
    e->level = 0;
    *fresh = true;
    return e;
}

enum client_verdict client_conn_acquire(struct client_table *t, const struct client_key *k, uint32_t limit,
                                        uint64_t now_ms, unsigned log_interval, bool *log_now)
{
    uint64_t b = bucket_of(t, k, 0);
    struct shard *s = lock_bucket(t, b);
    bool fresh;
    struct entry *e = entry_for(t, s, b, k, 0, &fresh);
    enum client_verdict v = CLIENT_FULL;
    *log_now = false;
    if (e) {
        e->seen_ms = now_ms ? now_ms : 1;
        if (e->count < limit && e->count < UINT16_MAX) {
            e->count++;
            v = CLIENT_PASS;
        } else {
            uint32_t now_s = (uint32_t)(now_ms / 1000);
            if (!e->level || now_s - (uint32_t)e->level >= log_interval) {
                e->level = (int32_t)(now_s ? now_s : 1);
                *log_now = true;
            }
            v = CLIENT_OVER;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return v;
}

void client_conn_release(struct client_table *t, const struct client_key *k, uint64_t now_ms)
{
    uint64_t b = bucket_of(t, k, 0);
    struct shard *s = lock_bucket(t, b);
    for (int i = 0; i < WAYS; i++) {
        struct entry *e = &t->buckets[b].e[i];
        if (e->seen_ms && !e->rule && e->count && !memcmp(e->key, k->b, 16)) {
            e->count--;
            if (now_ms > e->seen_ms)
                e->seen_ms = now_ms;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

/* nginx's leaky bucket (ngx_http_limit_req_module): a request adds 1000 to the level,
 * which drains at rate a second; a level past burst refuses it (its 1000 is not added),
 * a level past delay holds it until it would have drained back to delay.  A new entry's
 * first request passes at level 0, as nginx's does. */
enum client_verdict client_rate_take(struct client_table *t, const struct client_key *k, uint16_t rule,
                                     const struct client_rate *p, uint64_t now_ms, uint64_t *wait_ms)
{
    uint64_t b = bucket_of(t, k, rule);
    struct shard *s = lock_bucket(t, b);
    bool fresh;
    struct entry *e = entry_for(t, s, b, k, rule, &fresh);
    enum client_verdict v = CLIENT_FULL;
    *wait_ms = 0;
    if (e) {
        int64_t drained = 0, level = 0;
        if (!fresh) {
            uint64_t ms = now_ms > e->seen_ms ? now_ms - e->seen_ms : 0;
            if (ms > 86400000)
                ms = 86400000;        /* a day drains any bucket; the product stays in range */
            uint64_t total = (uint64_t)p->rate * ms + e->count;
            drained = (int64_t)(total / 1000);
            e->count = (uint16_t)(total % 1000);
            level = (int64_t)e->level - drained;
            if (level < -1000)
                level = -1000;        /* (drained past empty: the request's 1000 still counts from 0) */
        }
        e->seen_ms = now_ms ? now_ms : 1;
        if (!fresh && level + 1000 > (int64_t)p->burst) {
            e->level = (int32_t)level;   /* brought to now, the request not added */
            *wait_ms = ((uint64_t)(level + 1000 - (int64_t)p->burst) * 1000 + p->rate - 1) / p->rate;
            v = CLIENT_OVER;
        } else {
            level = fresh ? 0 : level + 1000 < 0 ? 0 : level + 1000;
            e->level = (int32_t)level;
            if (level > (int64_t)p->delay)
                *wait_ms = ((uint64_t)(level - (int64_t)p->delay) * 1000 + p->rate - 1) / p->rate;
            v = CLIENT_PASS;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return v;
}

void client_table_read(const struct client_table *t, struct client_table_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!t)
        return;
    out->capacity = t->nbuckets * WAYS;
    out->bytes = t->map_bytes;
    for (int i = 0; i < SHARDS; i++) {
        out->entries += __atomic_load_n(&t->shards[i].entries, __ATOMIC_RELAXED);
        out->evictions += __atomic_load_n(&t->shards[i].evictions, __ATOMIC_RELAXED);
    }
}
