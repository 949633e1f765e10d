/* The transport (transport.h): reads and writes of a socket, plain or TLS, and the
 * queued output - the buffer, the sealed records, a file range by sendfile.
 *
 * Each operation has a plain and a TLS half and chooses between them once, at its top;
 * nothing above this file asks which one a socket is, beyond whether it may send files.
 * Error handling follows from what a caller can do: EINTR retries, EAGAIN (or OpenSSL's
 * WANT_READ/WANT_WRITE) means "later", anything else ends the transport. */
#define _GNU_SOURCE
#include <errno.h>
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "copy.h"
#include "core/transport.h"
#include "log.h"
#include "mem.h"
#include "scalloc.h"

/* ---- reading ---- */

/* recv, not read: every transport is a socket (writes are send(2) already), and read(2)
 * reaches a socket through the generic file layer (vfs_read and its checks, then the
 * socket's read_iter) where recv(2) goes to it directly: system time per request 9.24
 * against 9.87 us over h2c at -c 1000 -m 1, 6.91 against 7.12 over HTTP/1.1 at -c 100. */
static ssize_t plain_read(struct transport *t, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(t->fd, buf, len, 0);
        if (n > 0)
            return n;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n == 0)
            errno = 0;
        return -1;
    }
}

static ssize_t tls_read(struct transport *t, void *buf, size_t len)
{
    ERR_clear_error();
    int n = SSL_read(t->ssl, buf, (int)len);
    if (n > 0)
        return n;
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
        errno = 0;
    else if (e != SSL_ERROR_SYSCALL || !errno)
        errno = EPROTO;
    return -1;
}

ssize_t transport_read(struct transport *t, void *buf, size_t len)
{
    return t->ssl ? tls_read(t, buf, len) : plain_read(t, buf, len);
}

bool transport_holds_input(const struct transport *t) { return t->ssl && SSL_pending(t->ssl) > 0; }

/* ---- writing ---- */

/* > 0 bytes written, 0 the socket is full, -1 failed.  more: bytes follow at once (a
 * file range), so the kernel holds these for them (MSG_MORE): an HTTP/1.1 head and the
 * start of its body leave in one segment, not a short packet first. */
static ssize_t plain_write(struct transport *t, const char *src, size_t len, bool more)
{
    for (;;) {
        ssize_t n = send(t->fd, src, len, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
}

static ssize_t tls_write(struct transport *t, const char *src, size_t len)
{
    if (len > 1u << 30)
        len = 1u << 30;
    /* OpenSSL copies each record's plaintext from src + k * 16 KiB to the same place;
     * where that place lies just after src modulo 4096 every copy is the CPU's slow case
     * (copy.h), so a shorter first record moves the rest clear. */
    if (len > TLS_RECORD_MAX && copy_near_behind((const void *)(uintptr_t)MEM_TLS_PAYLOAD_PAGE_OFFSET, src))
        len = TLS_RECORD_MAX - 64;
    ERR_clear_error();
    int r = SSL_write(t->ssl, src, (int)len);
    if (r > 0)
        return r;
    int e = SSL_get_error(t->ssl, r);
    return e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? 0 : -1;
}

/* The file range, by sendfile: 0 all sent, 1 the socket is full, -1 failed. */
static int send_file(struct transport *t, uint64_t *moved)
{
    while (t->file) {
        struct file_out *f = t->file;
        size_t chunk = f->left < (1u << 30) ? (size_t)f->left : 1u << 30;
        ssize_t n = sendfile(t->fd, f->fd, &f->off, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (n <= 0) {
            log_msg(LOG_WARN, "a file being sent ended early or failed: %s", n ? strerror(errno) : "EOF");
            return -1;
        }
        f->left -= (uint64_t)n;
        *moved += (uint64_t)n;
        if (!f->left)
            transport_file_done(t);
    }
    return 0;
}

int transport_flush(struct transport *t, uint64_t *moved)
{
    *moved = 0;
    /* TLS: room for all the records at once, so their buffer is not grown record by record. */
    if (t->ssl && t->out.len - t->out_off > TLS_RECORD_MAX)
        tls_expect_sealing(t->ssl, t->out.len - t->out_off);
    while (t->out_off < t->out.len) {
        const char *src = t->out.data + t->out_off;
        size_t left = t->out.len - t->out_off;
        ssize_t n = t->ssl ? tls_write(t, src, left) : plain_write(t, src, left, t->file != NULL);
        if (n <= 0)
            return n < 0 ? -1 : 1;
        t->out_off += (uint32_t)n;
        *moved += (uint64_t)n;
    }
    buf_free(&t->out);
    t->out_off = 0;
    if (t->ssl) {
        int r = tls_send_sealed(t->ssl);
        if (r <= 0)
            return r < 0 ? -1 : 1;
    }
    return send_file(t, moved);
}

int transport_file(struct transport *t, int fd, int64_t off, uint64_t len, void (*release)(void *), void *arg)
{
    struct file_out *f = sc_malloc(sizeof *f);
    if (!f)
        return -1;
    *f = (struct file_out){ fd, off, len, release, arg };
    t->file = f;
    return 0;
}

void transport_file_done(struct transport *t)
{
    struct file_out *f = t->file;
    if (!f)
        return;
    t->file = NULL;
    if (f->release)
        f->release(f->arg);
    sc_free(f);
}

/* ---- the TLS handshake, and the end ---- */

enum handshake transport_handshake(struct transport *t)
{
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1)
        return HANDSHAKE_DONE;
    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ: return HANDSHAKE_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return HANDSHAKE_WANT_WRITE;
    default: return HANDSHAKE_FAILED;        /* the reason stays in OpenSSL's error queue */
    }
}

void transport_release(struct transport *t, bool notify)
{
    transport_file_done(t);
    if (t->ssl) {
        if (notify && SSL_is_init_finished(t->ssl))
            SSL_shutdown(t->ssl);      /* close_notify, best effort */
        SSL_free(t->ssl);
        t->ssl = NULL;
    }
    buf_free(&t->out);
    t->out_off = 0;
}
