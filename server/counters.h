/* The workers' counters, summed for /-/stats and /metrics (core/worker.c).  Each is
 * written by its own worker only and read by anyone with relaxed loads. */
#ifndef H2PARK_COUNTERS_H
#define H2PARK_COUNTERS_H

#include <stdint.h>

/* Why a connection closed (core/serve.c decides). */
enum close_reason { CLOSED_PEER, CLOSED_IDLE, CLOSED_TIMEOUT, CLOSED_GOAWAY, CLOSED_ERROR, CLOSED_REASONS };
extern const char *const close_reason_names[CLOSED_REASONS];
/* Why max_conns_per_client refused a connection (core/connlimit.c). */
enum conn_refusal { REFUSED_OVER_LIMIT, REFUSED_TABLE_FULL, CONN_REFUSALS };
/* How a TLS handshake ended (core/serve.c). */
enum handshake_end { HS_FULL, HS_RESUMED, HS_FAILED, HS_TIMED_OUT, HANDSHAKE_ENDS };
extern const char *const handshake_end_names[HANDSHAKE_ENDS];
/* runtime/acceptenc.h's CODING_COUNT (checked there). */
#define COUNTED_CODINGS 4

struct worker_counters {
    uint64_t conns, parked_conns, serve_coroutines, handler_coroutines;
    uint64_t parked_handlers, parked_handler_bytes;  /* handlers whose stacks went back (runtime/park.c) */
    uint64_t wide_output_bytes;                    /* of the budget REQUEST_OUTPUT_WIDE_BUDGET (request.c) */
    uint64_t conns_total, streams_total, parks_total, respawns_total, handler_parks_total;
    uint64_t bytes_in, bytes_out;                  /* on the sockets, after TLS */
    uint64_t closed[CLOSED_REASONS];
    uint64_t conns_refused[CONN_REFUSALS];
    uint64_t handshakes[HANDSHAKE_ENDS];
    uint64_t handshakes_waiting;                   /* ClientHellos in, queued for a turn (worker.c) */
    /* Compression on the fly, by coding (enum coding's order: identity, gzip, br, zstd):
     * responses compressed, and the body bytes into and out of the compressors. */
    uint64_t compressed_responses[COUNTED_CODINGS], compress_in_bytes[COUNTED_CODINGS],
        compress_out_bytes[COUNTED_CODINGS];
    uint64_t compress_state_bytes;                 /* the compressors' library state now (compress_memory) */
    uint64_t compress_skipped;                     /* responses sent as they are: compress_memory was used */
    uint64_t compress_lowered;                     /* compressors made small: compress_memory was used */
};

static inline void counter_add(uint64_t *c, int64_t d)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + (uint64_t)d, __ATOMIC_RELAXED);
}

void workers_sum(struct worker_counters *out);
extern int nworkers;

#endif
