/* TLS to upstream servers (proxy_pass https:// and h2://): one client context per set of
 * proxy_ssl_* settings and protocol (its ALPN offer), and the handshake of a new upstream
 * connection.
 *
 * The upstream side uses the transport the client side uses (core/transport.c): the same
 * SSL-over-socket with batched records, the same reads and writes; only the context and
 * the handshake's direction differ.  Verification is on by default, as in Go's net/http,
 * Caddy and h2o (nginx's proxy_ssl_verify defaults to off): the certificate must chain
 * to proxy_ssl_trusted_certificate (or the system's CAs) and name proxy_ssl_name, which
 * is also sent as SNI unless it is an IP address (RFC 6066 3 allows only host names) or
 * proxy_ssl_server_name is off.
 *
 * Contexts are made before a configuration is applied (upstream_tls_prepare, beside the
 * listeners' tls_prepare) and freed with it; an SSL holds a reference to its context, so
 * a pooled connection keeps its own alive across a reload, and the pool hands a
 * connection only to a request whose settings made it (upstream_take compares contexts).
 * Buffers are released while a connection is idle (SSL_MODE_RELEASE_BUFFERS), so an
 * idle pooled TLS connection holds its SSL object and nothing more.
 *
 * Sessions are resumed (proxy_ssl_session_reuse, on by default as in nginx and Go): each
 * worker keeps the last session each server gave (upstream.c), and a new connection to
 * that server offers it - only under the very context that made it, since a resumed
 * session's certificate is not verified again.  A TLS 1.3 ticket is offered once (RFC 8446
 * C.4: a client should not reuse one; each connection brings new ones), a TLS 1.2
 * session for as long as the server takes it. */
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "pem.h"
#include "upstream/upstream.h"

static const char *ssl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_get_error();
    snprintf(buf, cap, "unknown error");
    if (e)
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

static void free_ctx(void *ctx) { SSL_CTX_free(ctx); }

/* A session (or a TLS 1.3 ticket, which may come with any read) from the server of the
 * connection the SSL's app data names. */
static int on_new_session(SSL *ssl, SSL_SESSION *s)
{
    const struct upstream_conn *uc = SSL_get_app_data(ssl);
    return uc ? upstream_session_keep(uc, s) : 0;
}

static SSL_CTX *client_ctx(const struct upstream_tls *t, struct config *c, struct config_errors *e)
{
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || config_on_free(c, free_ctx, ctx)) {
        SSL_CTX_free(ctx);
        config_error(e, "cannot create a TLS context: %s", ssl_reason(why, sizeof why));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (t->session_reuse) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    /* One protocol offered, so the server cannot choose one the exchange does not speak. */
    if (t->h2)
        SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x02h2", 3);
    else
        SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);
    SSL_CTX_set_verify(ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (t->trusted) {
        if (pem_load_verify_file(ctx, t->trusted, why, sizeof why)) {
            config_error(e, "%s: proxy_ssl_trusted_certificate %s: cannot load: %s", t->trusted_from, t->trusted, why);
            return NULL;
        }
    } else if (t->verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        config_error(e, "cannot load the system's CA certificates: %s", ssl_reason(why, sizeof why));
        return NULL;
    }
    if (t->cert) {
        if (pem_use_certificate_chain(ctx, t->cert, why, sizeof why)) {
            config_error(e, "%s: proxy_ssl_certificate %s: cannot load: %s", t->cert_from, t->cert, why);
            return NULL;
        }
        if (pem_use_private_key(ctx, t->key, why, sizeof why) ||
            (SSL_CTX_check_private_key(ctx) != 1 && ssl_reason(why, sizeof why))) {
            config_error(e, "%s: proxy_ssl_certificate_key %s: cannot load, or does not match %s: %s", t->key_from,
                         t->key, t->cert, why);
            return NULL;
        }
    }
    return ctx;
}

int upstream_tls_prepare(struct config *c, struct config_errors *e)
{
    int before = e->count;
    for (struct upstream_tls *t = c->upstream_tls; t; t = t->next)
        t->ctx = client_ctx(t, c, e);
    return e->count > before ? -1 : 0;
}

static bool is_ip(const char *name)
{
    unsigned char a[16];
    return inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1;
}

const char *upstream_tls_failure(const struct upstream_tls *t, SSL *ssl, char *buf, size_t cap)
{
    char why[256];
    long v = SSL_get_verify_result(ssl);
    if (t->verify && v != X509_V_OK)
        snprintf(buf, cap, "SSL certificate verify error: (%ld:%s) for %s", v, X509_verify_cert_error_string(v), t->name);
    else if (ERR_peek_error())
        snprintf(buf, cap, "SSL handshake failed: %s", ssl_reason(why, sizeof why));
    else
        snprintf(buf, cap, "peer closed the connection in the SSL handshake");
    ERR_clear_error();
    return buf;
}

/* Why the handshake failed, in nginx's words where nginx has them. */
static char *failure(const struct upstream_tls *t, SSL *ssl)
{
    char why[400];
    return upstream_text("%s", upstream_tls_failure(t, ssl, why, sizeof why));
}

/* The name sent and checked: 0, or -1. */
static int name_ssl(SSL *ssl, const struct upstream_tls *t)
{
    SSL_set_connect_state(ssl);
    bool ip = is_ip(t->name);
    if (t->server_name && !ip)
        SSL_set_tlsext_host_name(ssl, t->name);
    if (t->verify) {
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->name) : SSL_set1_host(ssl, t->name);
        if (ok != 1)
            return -1;
    }
    return 0;
}

SSL *upstream_tls_client(const struct upstream_tls *t, int fd)
{
    SSL *ssl = t->ctx ? SSL_new(t->ctx) : NULL;
    if (!ssl || tls_attach_socket(ssl, fd) || name_ssl(ssl, t)) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

/* HTTP/2 over TLS is only spoken once ALPN chose h2 (RFC 9113 3.2; Go's transport and
 * nghttpx insist as well): a server that chose nothing speaks HTTP/1.1 whatever it is sent. */
static int agreed_h2(SSL *ssl, char **detail)
{
    const unsigned char *p = NULL;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl, &p, &len);
    if (len == 2 && !memcmp(p, "h2", 2))
        return 0;
    *detail = upstream_text("the server did not choose HTTP/2 (h2) by ALPN %s%.*s%s",
                            len ? "(it chose \"" : "(it chose none)", (int)len, len ? (const char *)p : "",
                            len ? "\")" : "");
    return -1;
}

int upstream_tls_handshake(struct request *r, struct upstream_conn *uc, const struct upstream_tls *t, double deadline,
                           enum upstream_failure *why, char **detail)
{
    struct transport *tr = &uc->t;
    *why = UF_TLS;
    SSL *ssl = t->ctx ? SSL_new(t->ctx) : NULL;
    if (!ssl || tls_attach_socket(ssl, tr->fd)) {
        SSL_free(ssl);
        *detail = upstream_text("cannot start TLS");
        return -1;
    }
    tr->ssl = ssl;
    if (name_ssl(ssl, t)) {
        *detail = upstream_text("cannot verify the name %s", t->name);
        return -1;
    }
    if (t->session_reuse) {
        SSL_set_app_data(ssl, uc);
        SSL_SESSION *s = upstream_session_for(uc, t->ctx);
        if (s)
            SSL_set_session(ssl, s);    /* a server that refuses it makes a full handshake */
        SSL_SESSION_free(s);
    }
    for (;;) {
        enum handshake h = transport_handshake(tr);
        if (h == HANDSHAKE_DONE)
            return t->h2 ? agreed_h2(ssl, detail) : 0;
        if (h == HANDSHAKE_FAILED) {
            *detail = failure(t, ssl);
            return -1;
        }
        /* What the batching BIO still holds goes first (a full socket). */
        int sent = tls_send_sealed(ssl);
        if (sent < 0) {
            *detail = failure(t, ssl);
            return -1;
        }
        double left = deadline - req_now(r);
        int w = left <= 0 ? 0
                          : req_wait_io(r, &uc->watch, h == HANDSHAKE_WANT_WRITE || !sent ? REQ_WRITABLE : REQ_READABLE, left);
        if (w <= 0) {
            *why = w < 0 ? UF_NONE : UF_CONNECT_TIMEOUT;
            return -1;
        }
    }
}
