/* auth_basic's users (htpasswd.c): an htpasswd file, loaded with its configuration. */
#ifndef H2PARK_HTPASSWD_H
#define H2PARK_HTPASSWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct config_errors;
struct htpasswd;
struct htuser;

#define HTPASSWD_DIGEST 32

/* Every auth_basic_user_file of c, read and checked (at apply: start, --check, reload);
 * each problem into e with the file and line.  -1 after any. */
int htpasswd_load_all(struct config *c, struct config_errors *e);
void htpasswd_free(struct htpasswd *h);
/* The user called name (len bytes), or NULL. */
const struct htuser *htpasswd_user(const struct htpasswd *h, const char *name, size_t len);
/* u's crypt(3) hash; for NULL (no such user) the decoy a wrong guess is checked against. */
const char *htpasswd_hash(const struct htpasswd *h, const struct htuser *u);
/* The cache of passwords that passed: a keyed digest of the credentials, compared in
 * constant time. */
void htpasswd_digest(const char *user, size_t ulen, const char *password, size_t plen, uint8_t out[HTPASSWD_DIGEST]);
bool htpasswd_cached(struct htpasswd *h, const struct htuser *u, const uint8_t digest[HTPASSWD_DIGEST]);
void htpasswd_remember(struct htpasswd *h, const struct htuser *u, const uint8_t digest[HTPASSWD_DIGEST]);

#endif
