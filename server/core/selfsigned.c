/* A self-signed certificate for TLS listeners that have no cert and key, so h2park
 * serves TLS with no setup at all (as Caddy does for local sites): an ECDSA P-256 key
 * and a certificate for localhost, 127.0.0.1, ::1, every address a TLS listener names
 * and every name of a site without a certificate, valid for a year, made by OpenSSL in
 * memory and never written anywhere.
 *
 * Clients will not trust it, so every use says so in the log.  The pair is kept for the
 * life of the process and made again only when the names it must carry change, so a
 * reload does not change the certificate under clients that accepted it once. */
#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "core/conn.h"

#define VALID_DAYS 365

static EVP_PKEY *key;
static X509 *cert;
static char cert_names[4096];      /* the subjectAltName it was made for */

static void add_alt(char *out, size_t cap, const char *kind, const char *name)
{
    char item[300], all[sizeof cert_names + 2];
    snprintf(item, sizeof item, ",%s:%s,", kind, name);
    snprintf(all, sizeof all, ",%s,", out);
    size_t l = strlen(out);
    if (!strstr(all, item) && l + strlen(item) < cap)
        snprintf(out + l, cap - l, ",%s:%s", kind, name);
}

/* subjectAltName: the loopback names, each TLS listener's own address, and the names of
 * the sites that have no certificate of their own. */
static void alt_names(const struct config *c, char *out, size_t cap)
{
    snprintf(out, cap, "DNS:localhost,IP:127.0.0.1,IP:::1");
    for (int i = 0; i < c->nlisten; i++) {
        const struct listen_addr *a = &c->listen[i];
        char host[INET6_ADDRSTRLEN];
        if (!a->tls || a->dual)
            continue;
        if (a->addr.ss_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->addr)->sin_addr, host, sizeof host);
        else
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->addr)->sin6_addr, host, sizeof host);
        if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
            continue;
        add_alt(out, cap, "IP", host);
    }
    for (uint32_t i = 0; i < c->nsites; i++) {
        const struct site *s = &c->sites[i];
        if (s->tls < 0 || c->tls[s->tls].npairs)
            continue;
        for (uint16_t k = 0; k < s->nnames; k++) {
            const char *n = s->names[k];
            char ip[64];
            if (!strcmp(n, "*"))
                continue;
            if (n[0] == '[' && strlen(n) < sizeof ip) {
                snprintf(ip, sizeof ip, "%.*s", (int)strlen(n) - 2, n + 1);
                add_alt(out, cap, "IP", ip);
            } else {
                struct in_addr a4;
                add_alt(out, cap, inet_pton(AF_INET, n, &a4) == 1 ? "IP" : "DNS", n);
            }
        }
    }
}

static int add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_nconf_nid(NULL, &v3, nid, value);
    int ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

static int make(const char *names)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    BIGNUM *serial = BN_new();
    X509_NAME *subject = x ? X509_get_subject_name(x) : NULL;
    int ok = k && x && serial && subject && X509_set_version(x, 2) &&
             BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
             BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 86400L * VALID_DAYS) && X509_set_pubkey(x, k) &&
             X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, (const unsigned char *)"h2park self-signed", -1,
                                        -1, 0) &&
             X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0) &&
             X509_set_issuer_name(x, subject) && !add_ext(x, NID_basic_constraints, "critical,CA:FALSE") &&
             !add_ext(x, NID_key_usage, "critical,digitalSignature") &&
             !add_ext(x, NID_ext_key_usage, "serverAuth") && !add_ext(x, NID_subject_alt_name, names) &&
             X509_sign(x, k, EVP_sha256());
    BN_free(serial);
    if (!ok) {
        EVP_PKEY_free(k);
        X509_free(x);
        return -1;
    }
    EVP_PKEY_free(key);
    X509_free(cert);
    key = k;
    cert = x;
    snprintf(cert_names, sizeof cert_names, "%s", names);
    return 0;
}

int selfsigned_use(SSL_CTX *ctx, const struct config *c, char *err, size_t errlen)
{
    char names[sizeof cert_names];
    alt_names(c, names, sizeof names);
    if ((!cert || strcmp(names, cert_names)) && make(names)) {
        unsigned long e = ERR_get_error();
        ERR_clear_error();
        snprintf(err, errlen, "cannot make a self-signed certificate: %s",
                 e ? ERR_reason_error_string(e) : "unknown error");
        return -1;
    }
    if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "cannot use the self-signed certificate");
        return -1;
    }
    log_msg(LOG_WARN, "no cert and key: TLS uses a self-signed certificate made at start (ECDSA P-256, %s); "
            "clients will not trust it - set cert and key", cert_names);
    return 0;
}
