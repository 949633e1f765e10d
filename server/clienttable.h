/* The per-client table (clienttable.c): what the limits know of each client - its open
 * connections, and each limit_req rule's leaky bucket - in one fixed block of memory
 * shared by every worker, nginx's limit_conn and limit_req zones in one.
 *
 * A client is a key of 16 bytes: its address cut to a prefix (IPv4 /32 and IPv6 /64 by
 * default: one host, one IPv6 subnet, since a single machine is handed a /64), or a hash
 * of a name (limit_req key=host).  Each entry is that key, the rule it belongs to (0: the
 * connection count) and its counters, 32 bytes, so a client with open connections and one
 * limit_req rule costs 64 bytes of table. */
#ifndef H2PARK_CLIENTTABLE_H
#define H2PARK_CLIENTTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct client_table;
struct client_key {
    uint8_t b[16];
};

/* The table's entries are 32 bytes, grouped 8 to a bucket. */
#define CLIENT_ENTRY_BYTES 32
#define CLIENT_BUCKET_BYTES (8 * CLIENT_ENTRY_BYTES)
/* limit_zone_size's range. */
#define CLIENT_TABLE_MIN (UINT64_C(64) << 10)
#define CLIENT_TABLE_MAX (UINT64_C(64) << 30)

/* A table of at most bytes (whole buckets, at least one), keying addresses by their
 * first v4_bits (IPv4) or v6_bits (IPv6) bits.  Its pages are touched only as entries
 * are used.  NULL without memory. */
struct client_table *client_table_new(size_t bytes, unsigned v4_bits, unsigned v6_bits);
void client_table_free(struct client_table *t);

/* An IPv4 or IPv6 address as the table keys it (its prefix); false for another family. */
bool client_key_addr(const struct client_table *t, const struct sockaddr *sa, struct client_key *k);
/* A name (already normalized) as a key: a hash keyed by the table's secret, so that no
 * sender can choose names that collide. */
void client_key_name(const struct client_table *t, const char *name, size_t len, struct client_key *k);

enum client_verdict { CLIENT_PASS, CLIENT_OVER, CLIENT_FULL };

/* One more connection of k if it holds fewer than limit: CLIENT_PASS (counted), or
 * CLIENT_OVER (*log_now: the first refusal of this client for log_interval seconds), or
 * CLIENT_FULL (every entry of its bucket belongs to clients holding connections).  An
 * entry that counts connections is never evicted, so every count acquired is found again
 * by client_conn_release. */
enum client_verdict client_conn_acquire(struct client_table *t, const struct client_key *k, uint32_t limit,
                                        uint64_t now_ms, unsigned log_interval, bool *log_now);
void client_conn_release(struct client_table *t, const struct client_key *k, uint64_t now_ms);

/* nginx's limit_req bucket: rate in thousandths of a request a second, burst and delay in
 * thousandths of a request (UINT32_MAX delay: nodelay). */
struct client_rate {
    uint32_t rate, burst, delay;
};
/* A request of k under rule (not 0): CLIENT_PASS after *wait_ms (0: at once), or
 * CLIENT_OVER with *wait_ms until one would pass, or CLIENT_FULL. */
enum client_verdict client_rate_take(struct client_table *t, const struct client_key *k, uint16_t rule,
                                     const struct client_rate *p, uint64_t now_ms, uint64_t *wait_ms);

struct client_table_stats {
    uint64_t capacity, entries, evictions, bytes;
};
void client_table_read(const struct client_table *t, struct client_table_stats *out);

#endif
