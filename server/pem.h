/* Certificates, keys and CA files the configuration names, into an SSL_CTX (pem.c). */
#ifndef H2PARK_PEM_H
#define H2PARK_PEM_H

#include <openssl/ssl.h>
#include <stddef.h>

/* Each 0, or -1 with why: the file's problem (readfile.c) or OpenSSL's. */
int pem_use_certificate_chain(SSL_CTX *ctx, const char *path, char *why, size_t whylen);
int pem_use_private_key(SSL_CTX *ctx, const char *path, char *why, size_t whylen);
/* The CA certificates (and CRLs) the peer's chain is verified against. */
int pem_load_verify_file(SSL_CTX *ctx, const char *path, char *why, size_t whylen);

#endif
