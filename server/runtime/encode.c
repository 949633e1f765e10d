/* A response body's compressor, one interface over three libraries (Debian's, linked):
 *
 *   gzip  zlib's deflate with the gzip wrapper (windowBits 15 + 16), Z_SYNC_FLUSH at a
 *         flush point, Z_FINISH at the end;
 *   br    libbrotli's streaming encoder, BROTLI_OPERATION_FLUSH / _FINISH;
 *   zstd  a ZSTD_CCtx driven by ZSTD_compressStream2, ZSTD_e_flush / ZSTD_e_end.
 *
 * The library's state - hundreds of KiB for each: deflate's window and hash chains,
 * brotli's ring buffer, zstd's tables - is made on the first input, not with the encoder,
 * and freed as the stream finishes: a HEAD response, which says it is compressed and
 * carries no body, never makes one, and a response that has ended holds none while its
 * last bytes go out.  Nothing outside this file sees a library's type, so what an encoder
 * keeps between two flush points can change here alone (dropping the state of a waiting
 * event stream and making it anew for the next event).
 *
 * Every byte a library allocates goes through the allocators here, which count it in the
 * worker's live total (and the encoder's own): what compress_memory bounds is measured, not
 * estimated (zlib's 256 KiB, zstd's and brotli's tables as their levels and windows make
 * them).
 *
 * Output is appended to the caller's buffer, which grows as the library asks: a piece of
 * input gives at most about its own size out (each library's bound), so the caller bounds
 * the buffer by the pieces it passes. */
#include <stdlib.h>
#include <string.h>

#include <brotli/encode.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY    /* ZSTD_createCCtx_advanced: its memory through ours */
#include <zstd.h>

#include "counters.h"
#include "runtime/encode.h"
#include "scalloc.h"

struct encoder {
    uint8_t coding;                /* enum coding */
    bool started, finished, failed;
    int level;
    int64_t size_hint;
    uint64_t *live;                /* the worker's total of library state */
    struct worker_counters *n;
    uint64_t budget;
    union {
        z_stream *z;
        BrotliEncoderState *br;
        ZSTD_CCtx *zstd;
    } s;
};

/* Output room asked for at each step: enough that most pieces take one step. */
#define OUT_STEP 16384

void encoder_levels(enum coding coding, int *lo, int *hi)
{
    switch (coding) {
    case CODING_GZIP: *lo = 1, *hi = 9; break;
    case CODING_BR: *lo = BROTLI_MIN_QUALITY, *hi = BROTLI_MAX_QUALITY; break;
    case CODING_ZSTD: *lo = 1, *hi = ZSTD_maxCLevel(); break;
    default: *lo = *hi = 0; break;
    }
}

/* The libraries' allocations, counted: each block carries its size before it. */
#define HDR 16
static void *count_alloc(void *opaque, size_t n)
{
    struct encoder *e = opaque;
    char *p = sc_malloc(n + HDR);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof n);
    counter_add(e->live, (int64_t)n);
    return p + HDR;
}
static void count_free(void *opaque, void *q)
{
    struct encoder *e = opaque;
    if (!q)
        return;
    char *p = (char *)q - HDR;
    size_t n;
    memcpy(&n, p, sizeof n);
    counter_add(e->live, -(int64_t)n);
    sc_free(p);
}

struct encoder *encoder_new(enum coding coding, int level, int64_t size_hint, struct worker_counters *n,
                            uint64_t budget)
{
    if (coding <= CODING_IDENTITY || coding >= CODING_COUNT)
        return NULL;
    struct encoder *e = sc_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->coding = (uint8_t)coding;
    e->level = level;
    e->size_hint = size_hint;
    e->n = n;
    e->live = &n->compress_state_bytes;
    e->budget = budget;
    return e;
}

enum coding encoder_coding(const struct encoder *e) { return (enum coding)e->coding; }

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    return count_alloc(opaque, (size_t)items * size);
}
static void z_free(voidpf opaque, voidpf p) { count_free(opaque, p); }
static void *br_alloc(void *opaque, size_t n) { return count_alloc(opaque, n); }
static void br_free(void *opaque, void *p) { count_free(opaque, p); }

/* The library's state, on the first input: as configured, or small when the worker's
 * compressors hold the budget already - when many waiting streams get their first input at
 * once (an event sent to all), the budget is passed by their small states alone. */
static int start(struct encoder *e)
{
    bool small = __atomic_load_n(e->live, __ATOMIC_RELAXED) >= e->budget;
    if (small) {
        counter_add(&e->n->compress_lowered, 1);
        e->level = 1;
    }
    switch (e->coding) {
    case CODING_GZIP:
        if (!(e->s.z = sc_calloc(1, sizeof *e->s.z)))
            return -1;
        e->s.z->zalloc = z_alloc;
        e->s.z->zfree = z_free;
        e->s.z->opaque = e;
        /* small: a 512-byte window and the least hash memory (3 KiB in all, not 256) */
        if (deflateInit2(e->s.z, e->level, Z_DEFLATED, (small ? 9 : 15) + 16, small ? 1 : 8, Z_DEFAULT_STRATEGY) !=
            Z_OK) {
            sc_free(e->s.z);
            e->s.z = NULL;
            return -1;
        }
        break;
    case CODING_BR:
        if (!(e->s.br = BrotliEncoderCreateInstance(br_alloc, br_free, e)))
            return -1;
        BrotliEncoderSetParameter(e->s.br, BROTLI_PARAM_QUALITY, (uint32_t)e->level);
        /* ngx_brotli's window (512 KiB), not the library's 4 MiB: a response's state is
         * bounded by it, and a web response gains little from a longer reach. */
        BrotliEncoderSetParameter(e->s.br, BROTLI_PARAM_LGWIN, small ? BROTLI_MIN_WINDOW_BITS : 19);
        if (e->size_hint > 0)
            BrotliEncoderSetParameter(e->s.br, BROTLI_PARAM_SIZE_HINT,
                                      e->size_hint > (1 << 30) ? 1u << 30 : (uint32_t)e->size_hint);
        break;
    case CODING_ZSTD:
        if (!(e->s.zstd = ZSTD_createCCtx_advanced((ZSTD_customMem){ br_alloc, br_free, e })))
            return -1;
        ZSTD_CCtx_setParameter(e->s.zstd, ZSTD_c_compressionLevel, e->level);
        if (small) {
            ZSTD_CCtx_setParameter(e->s.zstd, ZSTD_c_windowLog, ZSTD_WINDOWLOG_MIN);
            ZSTD_CCtx_setParameter(e->s.zstd, ZSTD_c_hashLog, ZSTD_HASHLOG_MIN);
            ZSTD_CCtx_setParameter(e->s.zstd, ZSTD_c_chainLog, ZSTD_CHAINLOG_MIN);
        }
        /* A known length lets zstd size its tables to the body (a small one small). */
        if (e->size_hint >= 0)
            ZSTD_CCtx_setPledgedSrcSize(e->s.zstd, (unsigned long long)e->size_hint);
        break;
    }
    e->started = true;
    return 0;
}

static void stop(struct encoder *e)
{
    if (!e->started)
        return;
    switch (e->coding) {
    case CODING_GZIP:
        deflateEnd(e->s.z);
        sc_free(e->s.z);
        break;
    case CODING_BR: BrotliEncoderDestroyInstance(e->s.br); break;
    case CODING_ZSTD: ZSTD_freeCCtx(e->s.zstd); break;
    }
    e->started = false;
    memset(&e->s, 0, sizeof e->s);
}

static int put_gzip(z_stream *z, const void *in, size_t len, enum encode_op op, struct buf *out)
{
    int flush = op == ENC_FINISH ? Z_FINISH : op == ENC_FLUSH ? Z_SYNC_FLUSH : Z_NO_FLUSH;
    z->next_in = (Bytef *)(uintptr_t)in;
    for (;;) {
        size_t chunk = len > (1u << 30) ? 1u << 30 : len;
        z->avail_in = (uInt)chunk;
        if (buf_reserve(out, OUT_STEP))
            return -1;
        z->next_out = (Bytef *)out->data + out->len;
        z->avail_out = (uInt)(out->cap - out->len);
        size_t room = z->avail_out;
        int rc = deflate(z, chunk == len ? flush : Z_NO_FLUSH);
        out->len += room - z->avail_out;
        len -= chunk - z->avail_in;
        if (rc == Z_STREAM_END)
            return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return -1;
        /* Done once the input is in and the library had room to spare (all it had is out). */
        if (!len && z->avail_in == 0 && z->avail_out && op != ENC_FINISH)
            return 0;
    }
}

static int put_br(BrotliEncoderState *s, const void *in, size_t len, enum encode_op op, struct buf *out)
{
    BrotliEncoderOperation o = op == ENC_FINISH ? BROTLI_OPERATION_FINISH
                               : op == ENC_FLUSH ? BROTLI_OPERATION_FLUSH : BROTLI_OPERATION_PROCESS;
    const uint8_t *next_in = in;
    for (;;) {
        if (buf_reserve(out, OUT_STEP))
            return -1;
        size_t avail_out = out->cap - out->len;
        uint8_t *next_out = (uint8_t *)out->data + out->len;
        size_t room = avail_out;
        if (!BrotliEncoderCompressStream(s, o, &len, &next_in, &avail_out, &next_out, NULL))
            return -1;
        out->len += room - avail_out;
        if (len || BrotliEncoderHasMoreOutput(s))
            continue;
        if (op != ENC_FINISH || BrotliEncoderIsFinished(s))
            return 0;
    }
}

static int put_zstd(ZSTD_CCtx *cc, const void *in, size_t len, enum encode_op op, struct buf *out)
{
    ZSTD_EndDirective mode = op == ENC_FINISH ? ZSTD_e_end : op == ENC_FLUSH ? ZSTD_e_flush : ZSTD_e_continue;
    ZSTD_inBuffer ib = { in, len, 0 };
    for (;;) {
        if (buf_reserve(out, OUT_STEP))
            return -1;
        ZSTD_outBuffer ob = { out->data + out->len, out->cap - out->len, 0 };
        size_t left = ZSTD_compressStream2(cc, &ob, &ib, mode);
        if (ZSTD_isError(left))
            return -1;
        out->len += ob.pos;
        if (ib.pos == ib.size && (mode == ZSTD_e_continue || left == 0))
            return 0;
    }
}

int encoder_put(struct encoder *e, const void *in, size_t len, enum encode_op op, struct buf *out)
{
    if (e->failed || e->finished)
        return -1;
    if (!len && op == ENC_CONTINUE)
        return 0;
    if (!len && op == ENC_FLUSH && !e->started)
        return 0;                   /* nothing taken, nothing to flush */
    if (!e->started && start(e))
        return e->failed = true, -1;
    int rc;
    switch (e->coding) {
    case CODING_GZIP: rc = put_gzip(e->s.z, in, len, op, out); break;
    case CODING_BR: rc = put_br(e->s.br, in, len, op, out); break;
    default: rc = put_zstd(e->s.zstd, in, len, op, out); break;
    }
    if (rc)
        e->failed = true;
    if (rc || op == ENC_FINISH) {
        e->finished = op == ENC_FINISH && !rc;
        stop(e);                    /* the state goes as soon as it has nothing more to give */
    }
    return rc;
}

void encoder_free(struct encoder *e)
{
    if (!e)
        return;
    stop(e);
    sc_free(e);
}
