/* TLS: the contexts of a configuration, and choosing one by SNI.
 *
 * A configuration gets one SSL_CTX per set of certificates its sites use (sites that
 * name the same files share it; a site with none gets the self-signed certificate of
 * selfsigned.c), each with every certificate of its set - an ECDSA and an RSA one for
 * the same names both load, and OpenSSL offers the one the client's signature
 * algorithms take - and one SSL_CTX per TLS listener that holds no certificate at all:
 * its handshakes start there, and its server-name callback, which OpenSSL runs for
 * every ClientHello (with SNI or without), moves each one to the context of the site
 * the name belongs to on that listener, or of the listener's default site.  So the
 * listener's context can only ever finish a handshake with a site's certificate.
 *
 * All of them are made before a configuration is applied (tls_prepare) and freed with
 * it, so a reload with a bad certificate keeps the old contexts and the connections
 * see no gap; each SSL holds references to the contexts it used, so a context outlives
 * its configuration while a connection still needs it.  The server-name callback reads
 * the configuration itself (its site tables), so a connection holds a reference to the
 * configuration it was accepted under until its handshake is over (tls_new_ssl,
 * tls_config_release; every context names its configuration in its ex_data): a reload
 * between accept and ClientHello cannot free what the callback reads.  Every problem with a
 * certificate or key is reported with the config lines that named them.
 *
 * Buffers are released while a connection is idle (SSL_MODE_RELEASE_BUFFERS), and no
 * session cache is kept - a returning client resumes with a session ticket (tickets.c),
 * whose state it carries itself - so an idle TLS connection holds only its SSL object. */
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/conn.h"
#include "pem.h"
#include "scalloc.h"

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

static const char *ssl_reason(void)
{
    static __thread char reason[256];
    unsigned long e = ERR_get_error();
    snprintf(reason, sizeof reason, "unknown error");
    if (e)
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return reason;
}

/* A context with h2park's settings and no certificate. */
static SSL_CTX *base_ctx(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return NULL;
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
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    return ctx;
}

static const char *key_kind(X509 *x)
{
    EVP_PKEY *k = X509_get0_pubkey(x);
    switch (k ? EVP_PKEY_get_base_id(k) : 0) {
    case EVP_PKEY_RSA: case EVP_PKEY_RSA_PSS: return "RSA";
    case EVP_PKEY_EC: return "ECDSA";
    case EVP_PKEY_ED25519: return "Ed25519";
    case EVP_PKEY_ED448: return "Ed448";
    default: return "other";
    }
}

/* Loads one pair into ctx; kinds[] are the key kinds loaded so far (OpenSSL keeps one
 * certificate per kind: a second of the same kind would replace the first unsaid). */
static int load_pair(SSL_CTX *ctx, const struct tls_pair *p, const char **kinds, const char **kind_from, int i,
                     struct config_errors *e)
{
    char why[300];
    if (pem_use_certificate_chain(ctx, p->cert, why, sizeof why)) {
        config_error(e, "%s: cannot load certificate %s: %s", p->cert_from, p->cert, why);
        return -1;
    }
    const char *kind = key_kind(SSL_CTX_get0_certificate(ctx));
    for (int j = 0; j < i; j++)
        if (!strcmp(kinds[j], kind)) {
            config_error(e, "%s: a second %s certificate for the same sites (the first is at %s): give one per key "
                         "type (an RSA and an ECDSA one, say)", p->cert_from, kind, kind_from[j]);
            return -1;
        }
    kinds[i] = kind;
    kind_from[i] = p->cert_from;
    if (pem_use_private_key(ctx, p->key, why, sizeof why)) {
        if (strstr(why, "values mismatch") || strstr(why, "KEY_VALUES_MISMATCH"))
            config_error(e, "%s: key %s does not match the certificate %s (%s): %s", p->key_from, p->key, p->cert,
                         p->cert_from, why);
        else
            config_error(e, "%s: cannot load key %s: %s", p->key_from, p->key, why);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        config_error(e, "%s: key %s does not match the certificate %s (%s): %s", p->key_from, p->key, p->cert,
                     p->cert_from, ssl_reason());
        return -1;
    }
    return 0;
}

static void free_ctx(void *ctx) { SSL_CTX_free(ctx); }

static int config_slot = -1;       /* ex_data of every context: its configuration */
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static void make_slot(void) { config_slot = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL); }

static int own(SSL_CTX *ctx, struct config *c)
{
    pthread_once(&slot_once, make_slot);
    return config_slot >= 0 && SSL_CTX_set_ex_data(ctx, config_slot, c) == 1 ? 0 : -1;
}

/* Is x valid for host (a normalized name, an IPv4 address, or an IPv6 one in brackets)? */
static bool cert_covers(X509 *x, const char *host, size_t len)
{
    char name[256];
    if (!x || !len || len >= sizeof name)
        return false;
    memcpy(name, host, len);
    name[len] = 0;
    if (name[0] == '[') {
        if (len < 3 || name[len - 1] != ']')
            return false;
        name[len - 1] = 0;
        return X509_check_ip_asc(x, name + 1, 0) == 1;
    }
    struct in_addr a4;
    if (inet_pton(AF_INET, name, &a4) == 1)
        return X509_check_ip_asc(x, name, 0) == 1;
    return X509_check_host(x, name, len, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) == 1;
}

/* Says so when a site's certificates cover none of a name it answers for: clients will
 * refuse it (or, over HTTP/2, ask for it on a connection and get 421). */
static void warn_uncovered(const struct config *c, const struct site *s, SSL_CTX *ctx)
{
    for (uint16_t k = 0; k < s->nnames; k++) {
        const char *name = s->names[k];
        if (!strcmp(name, "*"))
            continue;
        bool covered = false;
        for (int r = SSL_CTX_set_current_cert(ctx, SSL_CERT_SET_FIRST); r == 1 && !covered;
             r = SSL_CTX_set_current_cert(ctx, SSL_CERT_SET_NEXT)) {
            char probe[300];
            /* a wildcard name: is some name under it covered? */
            snprintf(probe, sizeof probe, "%s%s", name[0] == '*' ? "h2park-probe" : "", name + (name[0] == '*'));
            covered = cert_covers(SSL_CTX_get0_certificate(ctx), probe, strlen(probe));
        }
        if (!covered)
            log_msg(LOG_WARN, "%s: no certificate of this site covers %s", s->from, name);
    }
    (void)c;
}

struct listen_sni {
    const struct config *c;
    const struct site_table *t;
};

/* Every ClientHello: the site its name belongs to on this listener, else the default. */
static int on_server_name(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    const struct listen_sni *l = arg;
    const struct site *s = site_for_sni(l->t, SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name));
    if (!s || s->tls < 0)
        s = l->t->dflt;
    if (!s || s->tls < 0 || !SSL_set_SSL_CTX(ssl, l->c->tls[s->tls].ctx)) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* The ClientHello's server name (RFC 6066 3: a list holding one host_name), copied to
 * out as a string; false if there is none or it is malformed. */
static bool hello_server_name(SSL *ssl, char *out, size_t cap)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) || len < 5)
        return false;
    size_t list = (size_t)p[0] << 8 | p[1], name = (size_t)p[3] << 8 | p[4];
    if (list + 2 != len || p[2] != TLSEXT_NAMETYPE_host_name || name + 5 > len || !name || name >= cap ||
        memchr(p + 5, 0, name))
        return false;
    memcpy(out, p + 5, name);
    out[name] = 0;
    return true;
}

/* Before anything else of a ClientHello is looked at: the context of the site its name
 * belongs to, as on_server_name chooses later.  Switching this early is what confines a
 * session ticket to its site: the ticket is opened before on_server_name runs, and
 * OpenSSL resumes only a session of the context the connection is in (tickets.c). */
static int on_client_hello(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    const struct listen_sni *l = arg;
    char name[256];
    const struct site *s = site_for_sni(l->t, hello_server_name(ssl, name, sizeof name) ? name : NULL);
    if (!s || s->tls < 0)
        s = l->t->dflt;
    if (s && s->tls >= 0)
        SSL_set_SSL_CTX(ssl, l->c->tls[s->tls].ctx);
    return SSL_CLIENT_HELLO_SUCCESS;
}

int tls_prepare(struct config *c, struct config_errors *e)
{
    int before = e->count;
    if (tickets_prepare(c, e))
        return -1;
    for (uint32_t t = 0; t < c->ntls; t++) {
        struct tls_identity *id = &c->tls[t];
        SSL_CTX *ctx = base_ctx();
        if (!ctx || own(ctx, c) || config_on_free(c, free_ctx, ctx)) {
            SSL_CTX_free(ctx);
            config_error(e, "cannot create a TLS context: %s", ssl_reason());
            continue;
        }
        const char *kinds[256], *kind_from[256];
        bool ok = true;
        for (int i = 0; i < id->npairs && ok; i++)
            ok = !load_pair(ctx, &id->pairs[i], kinds, kind_from, i, e);
        char err[512];
        if (!id->npairs && selfsigned_use(ctx, c, err, sizeof err)) {
            config_error(e, "%s", err);
            ok = false;
        }
        if (ok && tickets_bind_certificate(ctx)) {
            config_error(e, "cannot set a TLS session context: %s", ssl_reason());
            ok = false;
        }
        if (ok) {
            tickets_use(ctx, c);
            id->ctx = ctx;
        }
    }
    for (uint32_t i = 0; i < c->nsites && e->count == before; i++)
        if (c->sites[i].tls >= 0 && c->tls[c->sites[i].tls].npairs)
            warn_uncovered(c, &c->sites[i], c->tls[c->sites[i].tls].ctx);
    for (int i = 0; i < c->nlisten; i++) {
        if (!c->listen[i].tls)
            continue;
        SSL_CTX *ctx = base_ctx();
        if (!ctx || own(ctx, c) || config_on_free(c, free_ctx, ctx)) {
            SSL_CTX_free(ctx);
            config_error(e, "cannot create a TLS context: %s", ssl_reason());
            continue;
        }
        struct listen_sni *l = sc_calloc(1, sizeof *l);
        if (!l || config_on_free(c, sc_free, l)) {
            sc_free(l);
            config_error(e, "out of memory");
            continue;
        }
        *l = (struct listen_sni){ c, &c->listen_sites[i] };
        tickets_use(ctx, c);
        SSL_CTX_set_client_hello_cb(ctx, on_client_hello, l);
        SSL_CTX_set_tlsext_servername_callback(ctx, on_server_name);
        SSL_CTX_set_tlsext_servername_arg(ctx, l);
        c->listen_ctx[i] = ctx;
    }
    return e->count > before ? -1 : 0;
}

SSL *tls_new_ssl(const struct config *c, unsigned slot, int fd)
{
    int idx = slot < MAX_LISTEN ? c->listen_of_slot[slot] : -1;
    SSL_CTX *ctx = idx >= 0 ? c->listen_ctx[idx] : NULL;
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    if (ssl && tls_attach_socket(ssl, fd)) {
        SSL_free(ssl);
        return NULL;
    }
    if (ssl) {
        SSL_set_accept_state(ssl);
        config_ref((struct config *)c);   /* until the handshake is over */
    }
    return ssl;
}

const struct config *tls_config_of(const SSL *ssl)
{
    return config_slot >= 0 ? SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), config_slot) : NULL;
}

void tls_config_release(SSL *ssl)
{
    config_unref(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), config_slot));
}

const char *tls_server_name(SSL *ssl) { return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name); }

bool tls_certificate_covers(SSL *ssl, const char *host, size_t len)
{
    return cert_covers(SSL_get_certificate(ssl), host, len);
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
