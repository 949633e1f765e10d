/* TLS records leave in batches: a filter BIO between OpenSSL and the socket.
 *
 * OpenSSL hands its write BIO each record as soon as it is sealed, and a socket BIO
 * makes a write() of each: 64 system calls, and as many TCP pushes, per MiB of body
 * where cleartext makes 16 (server system time per 1 MiB response over TLS: 590 us,
 * against 340 us over h2c and h2o's 360 us over TLS; h2load -c 100 -m 1).  This BIO
 * keeps what OpenSSL writes and transport_flush sends it whole: it seals all the pending
 * output first (SSL_write then never waits on the socket) and sends the records in
 * one call (tls_send_sealed).  A lone short record - a small response - is written at
 * once, as before, without the copy.  OpenSSL's own flushes - after handshake messages and
 * alerts - send at once, so the handshake and close_notify see the socket as before.
 *
 * Invariants: the buffer exists only while it holds unsent bytes (an idle connection
 * pays for the BIO struct alone); those bytes are the connection's pending output
 * (conn_out_pending counts them), so a connection holding some neither parks nor
 * escapes write_timeout, and the protocols' OUT_HIGH bounds them as it bounds the
 * plaintext. */
#include <limits.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <pthread.h>

#include "copy.h"
#include "core/conn.h"
#include "scalloc.h"

struct sealed {
    struct buf b;
    size_t off;                    /* how much of b is on the socket */
};

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

/* 1: nothing left, 0: the socket is full (retry flags set on bio), -1: failed. */
static int send_sealed(BIO *bio)
{
    struct sealed *q = BIO_get_data(bio);
    BIO *next = BIO_next(bio);
    BIO_clear_retry_flags(bio);
    while (q && q->off < q->b.len) {
        size_t left = q->b.len - q->off;
        int n = BIO_write(next, q->b.data + q->off, left > INT_MAX ? INT_MAX : (int)left);
        if (n <= 0) {
            BIO_copy_next_retry(bio);
            return BIO_should_retry(next) ? 0 : -1;
        }
        q->off += (size_t)n;
    }
    if (q) {
        buf_free(&q->b);
        sc_free(q);
        BIO_set_data(bio, NULL);
    }
    return 1;
}

static struct sealed *sealed_get(BIO *bio)
{
    struct sealed *q = BIO_get_data(bio);
    if (!q && (q = sc_malloc(sizeof *q))) {
        *q = (struct sealed){ 0 };
        BIO_set_data(bio, q);
    }
    return q;
}

static int sealed_write(BIO *bio, const char *data, int len)
{
    BIO_clear_retry_flags(bio);
    if (len <= 0)
        return 0;
    int whole = len;
    const struct sealed *pending = BIO_get_data(bio);
    /* A record short of the largest ends what SSL_write was given (OpenSSL cuts full
     * ones first): with nothing ahead of it, it goes straight out, as a small response
     * did before, and only what the socket does not take is kept. */
    if ((!pending || pending->off == pending->b.len) && len < TLS_RECORD_MAX) {
        int n = BIO_write(BIO_next(bio), data, len);
        if (n == len)
            return len;
        if (n <= 0 && !BIO_should_retry(BIO_next(bio)))
            return -1;
        if (n > 0) {
            data += n;
            len -= n;
        }
    }
    struct sealed *q = sealed_get(bio);
    if (!q || buf_reserve(&q->b, (size_t)len))
        return -1;
    copy_apart(q->b.data + q->b.len, data, (size_t)len);
    q->b.len += (size_t)len;
    return whole;
}

static long sealed_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    BIO *next = BIO_next(bio);
    switch (cmd) {
    case BIO_CTRL_FLUSH: {
        int r = send_sealed(bio);
        return r == 1 ? BIO_ctrl(next, cmd, num, ptr) : -1;
    }
    case BIO_CTRL_WPENDING: {
        const struct sealed *q = BIO_get_data(bio);
        return (long)(q ? q->b.len - q->off : 0) + BIO_ctrl(next, cmd, num, ptr);
    }
#ifdef BIO_CTRL_GET_KTLS_SEND
    /* Asked before every record (ten times a small response): records pass through
     * here sealed, so this chain never hands sealing to the kernel. */
    case BIO_CTRL_GET_KTLS_SEND:
    case BIO_CTRL_GET_KTLS_RECV:
        return 0;
#endif
    default:
        return next ? BIO_ctrl(next, cmd, num, ptr) : 0;
    }
}

static int sealed_create(BIO *bio)
{
    BIO_set_init(bio, 1);
    return 1;
}

static int sealed_destroy(BIO *bio)
{
    struct sealed *q = BIO_get_data(bio);
    if (q) {
        buf_free(&q->b);
        sc_free(q);
        BIO_set_data(bio, NULL);
    }
    return 1;
}

static void make_method(void)
{
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "h2park sealed records");
    if (method && (!BIO_meth_set_write(method, sealed_write) || !BIO_meth_set_ctrl(method, sealed_ctrl) ||
                   !BIO_meth_set_create(method, sealed_create) || !BIO_meth_set_destroy(method, sealed_destroy))) {
        BIO_meth_free(method);
        method = NULL;
    }
}

int tls_attach_socket(SSL *ssl, int fd)
{
    pthread_once(&method_once, make_method);
    BIO *sock = method ? BIO_new_socket(fd, BIO_NOCLOSE) : NULL;
    BIO *batch = sock ? BIO_new(method) : NULL;
    if (!batch || !BIO_up_ref(sock)) {
        BIO_free(batch);
        BIO_free(sock);
        return -1;
    }
    /* The socket BIO is both the read BIO and the batch's next: one reference each,
     * which SSL_free's two BIO_free_all calls give back. */
    BIO_push(batch, sock);
    SSL_set_bio(ssl, sock, batch);
    return 0;
}

size_t tls_unsent(SSL *ssl)
{
    const struct sealed *q = BIO_get_data(SSL_get_wbio(ssl));
    return q ? q->b.len - q->off : 0;
}

int tls_send_sealed(SSL *ssl) { return send_sealed(SSL_get_wbio(ssl)); }

/* Room for sealing n bytes at once, so the buffer is not grown (and copied) record by
 * record: each record adds at most 5 bytes of header, 1 of type, 16 of tag and, in TLS
 * 1.2, 8 of explicit nonce. */
void tls_expect_sealing(SSL *ssl, size_t n)
{
    struct sealed *q = sealed_get(SSL_get_wbio(ssl));
    if (q)
        (void)buf_reserve(&q->b, n + (n / TLS_RECORD_MAX + 1) * 32);
}
