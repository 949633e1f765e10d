/* TLS session tickets: a returning client resumes without a full handshake, and the
 * server keeps nothing per session.
 *
 * A ticket is the session's state encrypted under a key only the server knows (RFC 5077's
 * layout, which OpenSSL writes: a 16-byte key name, an IV, the state in AES-CBC, and an
 * HMAC-SHA256 over them).  The keys are a short list: the first encrypts new tickets, each
 * of them decrypts the tickets it made; a ticket made under any key but the first is
 * accepted and replaced by a fresh one.
 *
 * Where the keys come from:
 * - ssl_session_ticket_key files (nginx's format: 80 bytes - name, HMAC key, AES-256 key -
 *   or 48 bytes - name, HMAC key, AES-128 key - as `openssl rand 80` writes them): read when
 *   a configuration is prepared, so a reload with a missing or malformed file keeps the old
 *   configuration; the same files on every machine of a fleet let a client resume on any
 *   of them.  Rotating is the operator's: add the new key second everywhere, reload, move it
 *   first, reload, drop the old one.
 * - Without files, keys made in memory at start, one per ssl_session_timeout: the newest
 *   encrypts, the one before still decrypts, so every ticket is honoured for its whole
 *   lifetime and no key is older than two lifetimes.  They belong to the process, not to a
 *   configuration: a reload keeps them, and clients keep resuming across it.
 *
 * The tickets' lifetime is ssl_session_timeout (OpenSSL refuses an older ticket itself).
 * Resuming is confined to the certificate it began with: each site's context has a
 * session id context derived from its certificate, which OpenSSL checks before it
 * resumes, so a ticket from one site presented with another's name is a full handshake.
 * Identical certificates give identical contexts, so a fleet sharing its keys shares its
 * tickets.
 *
 * Memory: the keys live as long as their configuration (or the process); a session's
 * state is in the client's ticket, not here, so an idle connection costs what it did
 * without tickets. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/conn.h"
#include "scalloc.h"

#define TICKET_KEYS_MAX 8

struct ticket_key {
    uint8_t name[16];
    uint8_t hmac[32];
    uint8_t aes[32];
    uint8_t secret_len;            /* 16 (AES-128, a 48-byte file) or 32 */
};

struct ticket_keys {
    struct ticket_key k[TICKET_KEYS_MAX];
    int n;
};

/* The process's own keys: k[0] the newest. */
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ticket_keys own;
static time_t own_made;

static int make_key(struct ticket_key *k)
{
    k->secret_len = 32;
    return RAND_bytes(k->name, sizeof k->name) == 1 && RAND_bytes(k->hmac, sizeof k->hmac) == 1 &&
                   RAND_bytes(k->aes, sizeof k->aes) == 1
               ? 0
               : -1;
}

/* The process's keys as of now (a new one once the newest is a lifetime old). */
static int own_keys(double lifetime, struct ticket_keys *out)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&own_lock);
    int rc = 0;
    if (!own.n || now.tv_sec - own_made >= (time_t)lifetime) {
        struct ticket_key fresh;
        if (make_key(&fresh) == 0) {
            own.k[1] = own.k[0];
            own.k[0] = fresh;
            own.n = own.n ? 2 : 1;
            own_made = now.tv_sec;
        } else if (!own.n) {
            rc = -1;
        }
    }
    *out = own;
    pthread_mutex_unlock(&own_lock);
    return rc;
}

static int use_key(const struct ticket_key *k, unsigned char *iv, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
    const EVP_CIPHER *cipher = k->secret_len == 16 ? EVP_aes_128_cbc() : EVP_aes_256_cbc();
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac, k->secret_len),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (EVP_MAC_CTX_set_params(hctx, params) != 1)
        return -1;
    int ok = enc ? EVP_EncryptInit_ex(cctx, cipher, NULL, k->aes, iv) : EVP_DecryptInit_ex(cctx, cipher, NULL, k->aes, iv);
    return ok == 1 ? 0 : -1;
}

/* OpenSSL's ticket callback: enc, a new ticket (1 done, -1 error: none is sent); else a
 * ticket to open (0 unknown key: a full handshake; 1 done; 2 done, and send a fresh one). */
static int on_ticket(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx,
                     int enc)
{
    const struct config *c = tls_config_of(ssl);
    struct ticket_keys keys;
    if (c && c->ticket_keys)
        keys = *c->ticket_keys;
    else if (own_keys(c ? c->ssl_session_timeout : 3600, &keys))
        return enc ? -1 : 0;
    int rc;
    if (enc) {
        const struct ticket_key *k = &keys.k[0];
        memcpy(name, k->name, 16);
        rc = RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) == 1 && !use_key(k, iv, cctx, hctx, 1) ? 1 : -1;
    } else {
        rc = 0;
        for (int i = 0; i < keys.n && !rc; i++)
            if (!CRYPTO_memcmp(name, keys.k[i].name, 16))
                rc = use_key(&keys.k[i], iv, cctx, hctx, 0) ? -1 : i ? 2 : 1;
    }
    OPENSSL_cleanse(&keys, sizeof keys);
    return rc;
}

static void free_keys(void *p)
{
    OPENSSL_cleanse(p, sizeof(struct ticket_keys));
    sc_free(p);
}

/* One key file into k: 0, or -1 with why. */
static int read_key(const char *path, struct ticket_key *k, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ELOOP)
        fd = open(path, O_RDONLY | O_CLOEXEC);   /* a symlink is the operator's choice */
    if (fd < 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        return -1;
    }
    struct stat st;
    uint8_t b[81];
    ssize_t n = fstat(fd, &st) || !S_ISREG(st.st_mode) ? -2 : read(fd, b, sizeof b);
    int e = errno;
    close(fd);
    if (n == -2 || n < 0) {
        snprintf(why, whylen, "%s", n == -2 ? "not a regular file" : strerror(e));
        return -1;
    }
    if (n != 80 && n != 48) {
        snprintf(why, whylen, "%zd bytes%s: a key file is 80 bytes (AES-256) or 48 (AES-128) of random data, "
                 "as `openssl rand 80 > FILE` writes", n, n == 81 ? " or more" : "");
        OPENSSL_cleanse(b, sizeof b);
        return -1;
    }
    size_t s = n == 80 ? 32 : 16;
    memset(k, 0, sizeof *k);
    memcpy(k->name, b, 16);
    memcpy(k->hmac, b + 16, s);
    memcpy(k->aes, b + 16 + s, s);
    k->secret_len = (uint8_t)s;
    OPENSSL_cleanse(b, sizeof b);
    return 0;
}

int tickets_prepare(struct config *c, struct config_errors *e)
{
    if (!c->nticket_key_files || !c->ssl_session_tickets)
        return 0;
    if (c->nticket_key_files > TICKET_KEYS_MAX) {
        config_error(e, "%s: more than %d ssl_session_ticket_key files", c->ticket_key_files[TICKET_KEYS_MAX].from,
                     TICKET_KEYS_MAX);
        return -1;
    }
    struct ticket_keys *keys = sc_calloc(1, sizeof *keys);
    if (!keys || config_on_free(c, free_keys, keys)) {
        sc_free(keys);
        config_error(e, "out of memory");
        return -1;
    }
    int before = e->count;
    for (uint32_t i = 0; i < c->nticket_key_files; i++) {
        const struct named_path *f = &c->ticket_key_files[i];
        char why[300];
        if (read_key(f->path, &keys->k[i], why, sizeof why)) {
            config_error(e, "%s: ssl_session_ticket_key %s: %s", f->from, f->path, why);
            continue;
        }
        for (uint32_t j = 0; j < i; j++)
            if (!memcmp(keys->k[j].name, keys->k[i].name, 16))
                config_error(e, "%s: ssl_session_ticket_key %s: the same key name as %s (%s): each key needs its own",
                             f->from, f->path, c->ticket_key_files[j].path, c->ticket_key_files[j].from);
    }
    keys->n = (int)c->nticket_key_files;
    if (e->count > before)
        return -1;
    c->ticket_keys = keys;
    return 0;
}

void tickets_use(SSL_CTX *ctx, const struct config *c)
{
    if (!c->ssl_session_tickets) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
        return;
    }
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
    /* One ticket: a client resumes one connection with it (TLS 1.3 tickets are single
     * use), and each costs the handshake an encryption and its bytes. */
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_timeout(ctx, (long)c->ssl_session_timeout);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, on_ticket);
}

int tickets_bind_certificate(SSL_CTX *ctx)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (!x || X509_digest(x, EVP_sha256(), md, &len) != 1)
        return -1;
    if (len > SSL_MAX_SID_CTX_LENGTH)
        len = SSL_MAX_SID_CTX_LENGTH;
    return SSL_CTX_set_session_id_context(ctx, md, len) == 1 ? 0 : -1;
}
