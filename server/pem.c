/* Certificates, keys and CA files the configuration names, given to OpenSSL from memory.
 *
 * OpenSSL's SSL_CTX_use_certificate_chain_file and the like open the path themselves, and
 * block on a FIFO: each file is read here instead, through a descriptor that was checked
 * to be a regular file (readfile.c), and parsed from a memory BIO the way those functions
 * parse theirs - the first certificate then the chain, a key with the context's password
 * callback, every certificate and CRL of a CA file.  A key's bytes are wiped before the
 * buffer that held them is freed. */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdio.h>

#include "pem.h"
#include "readfile.h"

static int openssl_failed(char *why, size_t whylen)
{
    unsigned long e = ERR_get_error();     /* the first: what went wrong, not what it led to */
    if (e)
        ERR_error_string_n(e, why, whylen);
    else
        snprintf(why, whylen, "no PEM data in it");
    ERR_clear_error();
    return -1;
}

/* The file as a memory BIO over b (which must outlive it), or NULL with why. */
static BIO *open_pem(const char *path, struct buf *b, char *why, size_t whylen)
{
    if (read_regular_file(path, b, why, whylen))
        return NULL;
    BIO *in = BIO_new_mem_buf(b->data ? b->data : "", (int)b->len);
    if (!in)
        openssl_failed(why, whylen);
    return in;
}

static void done(BIO *in, struct buf *b, bool secret)
{
    BIO_free(in);
    if (secret && b->data)
        OPENSSL_cleanse(b->data, b->cap);
    buf_free(b);
}

int pem_use_certificate_chain(SSL_CTX *ctx, const char *path, char *why, size_t whylen)
{
    struct buf b = { 0 };
    ERR_clear_error();
    BIO *in = open_pem(path, &b, why, whylen);
    if (!in)
        return -1;
    pem_password_cb *cb = SSL_CTX_get_default_passwd_cb(ctx);
    void *cb_arg = SSL_CTX_get_default_passwd_cb_userdata(ctx);
    int rc = -1;
    X509 *x = PEM_read_bio_X509_AUX(in, NULL, cb, cb_arg);
    if (x && SSL_CTX_use_certificate(ctx, x) == 1 && !ERR_peek_error() && SSL_CTX_clear_chain_certs(ctx) == 1) {
        X509 *ca;
        rc = 0;
        while (!rc && (ca = PEM_read_bio_X509(in, NULL, cb, cb_arg)))
            if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
                X509_free(ca);
                rc = -1;
            }
        /* The chain ends where no more PEM begins. */
        unsigned long e = ERR_peek_last_error();
        if (!rc && ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
            ERR_clear_error();
        else
            rc = -1;
    }
    if (rc)
        openssl_failed(why, whylen);
    X509_free(x);
    done(in, &b, false);
    return rc;
}

int pem_use_private_key(SSL_CTX *ctx, const char *path, char *why, size_t whylen)
{
    struct buf b = { 0 };
    ERR_clear_error();
    BIO *in = open_pem(path, &b, why, whylen);
    if (!in)
        return -1;
    EVP_PKEY *k = PEM_read_bio_PrivateKey(in, NULL, SSL_CTX_get_default_passwd_cb(ctx),
                                          SSL_CTX_get_default_passwd_cb_userdata(ctx));
    int rc = k && SSL_CTX_use_PrivateKey(ctx, k) == 1 ? 0 : openssl_failed(why, whylen);
    EVP_PKEY_free(k);
    done(in, &b, true);
    return rc;
}

int pem_load_verify_file(SSL_CTX *ctx, const char *path, char *why, size_t whylen)
{
    struct buf b = { 0 };
    ERR_clear_error();
    BIO *in = open_pem(path, &b, why, whylen);
    if (!in)
        return -1;
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(in, NULL, NULL, "");
    int rc = infos ? 0 : -1, count = 0;
    for (int i = 0; !rc && i < sk_X509_INFO_num(infos); i++) {
        X509_INFO *info = sk_X509_INFO_value(infos, i);
        if (info->x509 && X509_STORE_add_cert(store, info->x509) != 1)
            rc = -1;
        if (info->crl && X509_STORE_add_crl(store, info->crl) != 1)
            rc = -1;
        count += !!info->x509 + !!info->crl;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    if (!rc && !count) {
        snprintf(why, whylen, "no certificate or CRL in it");
        rc = -1;
    } else if (rc) {
        openssl_failed(why, whylen);
    }
    done(in, &b, false);
    return rc;
}
