/* The transport: a socket's bytes, plain or TLS, and the output that waits for it -
 * written once, for the connections clients make (conn.c) and those h2park makes to its
 * upstreams (upstream/upstream.c).
 *
 * A transport is a socket, an SSL object over it or NULL, and the bytes queued for it:
 * a buffer (freed whenever it empties, so an idle transport holds none) and, after it, a
 * file range sent by sendfile (cleartext only: TLS seals every byte in the process).
 * Over TLS the sealed records leave in batches through tlsbatch.c's BIO, so the records
 * it still holds count as pending output too.  The transport knows nothing of protocols,
 * timers or counters: its callers keep those, from what each call reports. */
#ifndef H2PARK_TRANSPORT_H
#define H2PARK_TRANSPORT_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"

/* A file range that follows the buffer on the socket: sent with sendfile, from the page
 * cache, never copied through the process.  It holds a reference that keeps fd open
 * (release(arg) drops it), and exists only while it has bytes left. */
struct file_out {
    int fd;
    int64_t off;
    uint64_t left;
    void (*release)(void *arg);
    void *arg;
};

struct transport {
    SSL *ssl;                      /* NULL: plain */
    struct buf out;                /* bytes for the socket; freed whenever it empties */
    struct file_out *file;         /* a file range to send after out, or NULL */
    uint32_t out_off;              /* how much of out is written (out is bounded far below 4 GiB) */
    int fd;
};

/* Reads what is there into buf: > 0 bytes, 0 nothing now, -1 the peer's end (errno 0) or
 * an error (errno says which). */
ssize_t transport_read(struct transport *t, void *buf, size_t len);
/* A read of n bytes into a buffer of cap took everything the socket had (the next would
 * only say EAGAIN).  Over TLS a read ends at a record's end whatever the socket holds,
 * so it proves nothing. */
static inline bool transport_drained(const struct transport *t, ssize_t n, size_t cap)
{
    return !t->ssl && n > 0 && (size_t)n < cap;
}
/* Input read from the socket and not yet returned (OpenSSL's decrypted bytes). */
bool transport_holds_input(const struct transport *t);

/* Writes what is queued: out, the sealed records, the file range.  0: all written (and
 * the buffer freed), 1: the socket is full, -1: the peer is gone or the file failed.
 * *moved gets the bytes taken from the queue (plaintext, over TLS). */
int transport_flush(struct transport *t, uint64_t *moved);
/* Queues a file range after out (holding one reference on it); -1 without memory.  Only
 * where transport_sends_files. */
int transport_file(struct transport *t, int fd, int64_t off, uint64_t len, void (*release)(void *), void *arg);
void transport_file_done(struct transport *t);
static inline bool transport_sends_files(const struct transport *t) { return !t->ssl; }

/* The TLS handshake, either side: what it needs next. */
enum handshake { HANDSHAKE_DONE, HANDSHAKE_WANT_READ, HANDSHAKE_WANT_WRITE, HANDSHAKE_FAILED };
enum handshake transport_handshake(struct transport *t);

/* Frees what the transport holds but the socket, which the caller closes (or lingers
 * on).  notify: say close_notify first, over TLS, best effort. */
void transport_release(struct transport *t, bool notify);

/* tlsbatch.c: the socket under ssl, written through a BIO that keeps sealed records for
 * tls_send_sealed (1: all sent, 0: the socket is full, -1: failed); tls_unsent: bytes
 * sealed and not yet sent; tls_expect_sealing: n plaintext bytes are about to be sealed. */
#define TLS_RECORD_MAX 16384      /* plaintext bytes in one TLS record */
int tls_attach_socket(SSL *ssl, int fd);
size_t tls_unsent(SSL *ssl);
int tls_send_sealed(SSL *ssl);
void tls_expect_sealing(SSL *ssl, size_t n);

/* Queued bytes not yet on the socket. */
static inline size_t transport_pending(const struct transport *t)
{
    return t->out.len - t->out_off + (t->file ? t->file->left : 0) + (t->ssl ? tls_unsent(t->ssl) : 0);
}

#endif
