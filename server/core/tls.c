/* TLS: one shared SSL_CTX with ALPN (h2, http/1.1), built for a configuration before it
 * is applied (tls_prepare) and swapped in whole when it is (tls_commit), so a reload
 * with a bad certificate keeps the old context and the connections see no gap.  With
 * neither cert nor key configured, the context gets a self-signed certificate made in
 * memory (selfsigned.c).
 *
 * Buffers are released while a connection is idle (SSL_MODE_RELEASE_BUFFERS), no session
 * tickets are sent and no session cache is kept, so an idle TLS connection holds only
 * its SSL object.  Each SSL takes a reference on the SSL_CTX it was made from, so a
 * reload frees the old context when its last connection closes. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/conn.h"

static SSL_CTX *current_ctx;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

/* h2 if the client offers it, else http/1.1; a client that offers neither (only other
 * protocols) gets the no_application_protocol alert.  One that offers no ALPN at all
 * speaks HTTP/1.1. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg)
{
    (void)ssl, (void)arg;
    static const char *const ours[] = { "h2", "http/1.1" };
    for (int k = 0; k < 2; k++) {
        size_t want = strlen(ours[k]);
        for (unsigned i = 0; i < inlen;) {
            unsigned n = in[i];
            if (i + 1 + n > inlen)
                break;
            if (n == want && !memcmp(in + i + 1, ours[k], n)) {
                *out = in + i + 1;
                *outlen = (unsigned char)n;
                return SSL_TLSEXT_ERR_OK;
            }
            i += 1 + n;
        }
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;    /* OpenSSL sends no_application_protocol */
}

static void ssl_error_text(char *err, size_t errlen, const char *what, const char *path)
{
    unsigned long e = ERR_get_error();
    char reason[256] = "unknown error";
    if (e)
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    snprintf(err, errlen, "%s %s: %s", what, path, reason);
}

static SSL_CTX *make_ctx(const struct config *c, char *err, size_t errlen)
{
    if (!c->cert[0] != !c->key[0]) {
        snprintf(err, errlen, "%s is set but %s is not: give both, or neither for a self-signed certificate",
                 c->cert[0] ? "cert" : "key", c->cert[0] ? "key" : "cert");
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_error_text(err, errlen, "cannot create TLS context", "");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_TICKET);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* TLS 1.2 suites RFC 9113 allows first; anything else still negotiated is answered
     * with INADEQUATE_SECURITY (tls_cipher_adequate).  AES-128-GCM before AES-256-GCM in
     * both versions, as Go and h2o choose: OpenSSL's own order put AES-256 first, whose
     * four extra rounds made a 1 MiB response over TLS cost about 40% more CPU. */
    SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM+AES128:ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:HIGH:!aNULL:!MD5");
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    if (!c->cert[0]) {
        if (selfsigned_use(ctx, c, err, errlen)) {
            SSL_CTX_free(ctx);
            return NULL;
        }
    } else if (SSL_CTX_use_certificate_chain_file(ctx, c->cert) != 1) {
        ssl_error_text(err, errlen, "cannot load certificate", c->cert);
        SSL_CTX_free(ctx);
        return NULL;
    } else if (SSL_CTX_use_PrivateKey_file(ctx, c->key, SSL_FILETYPE_PEM) != 1) {
        ssl_error_text(err, errlen, "cannot load key", c->key);
        SSL_CTX_free(ctx);
        return NULL;
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        ssl_error_text(err, errlen, "key does not match certificate", c->cert);
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    return ctx;
}

int tls_prepare(const struct config *c, SSL_CTX **out, char *err, size_t errlen)
{
    *out = NULL;
    bool any_tls = false;
    for (int i = 0; i < c->nlisten; i++)
        any_tls |= c->listen[i].tls;
    if (!any_tls)
        return 0;
    *out = make_ctx(c, err, errlen);
    return *out ? 0 : -1;
}

void tls_commit(SSL_CTX *ctx)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx_lock);
    SSL_CTX *old = current_ctx;
    current_ctx = ctx;
    pthread_mutex_unlock(&ctx_lock);
    SSL_CTX_free(old);       /* each SSL holds a reference: freed with the last of them */
}

void tls_discard(SSL_CTX *ctx) { SSL_CTX_free(ctx); }

SSL *tls_new_ssl(int fd)
{
    pthread_mutex_lock(&ctx_lock);
    SSL *ssl = current_ctx ? SSL_new(current_ctx) : NULL;
    pthread_mutex_unlock(&ctx_lock);
    if (ssl && tls_attach_socket(ssl, fd)) {
        SSL_free(ssl);
        return NULL;
    }
    if (ssl)
        SSL_set_accept_state(ssl);
    return ssl;
}

/* RFC 9113 section 9.2: TLS 1.2 or later, and for TLS 1.2 an ephemeral key exchange
 * with an AEAD cipher. */
bool tls_cipher_adequate(SSL *ssl)
{
    int version = SSL_version(ssl);
    if (version < TLS1_2_VERSION)
        return false;
    if (version >= TLS1_3_VERSION)
        return true;
    const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
    if (!c)
        return false;
    int kx = SSL_CIPHER_get_kx_nid(c);
    return (kx == NID_kx_ecdhe || kx == NID_kx_dhe) && SSL_CIPHER_is_aead(c);
}
