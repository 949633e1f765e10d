/* auth_basic: HTTP Basic authentication (RFC 7617) against an htpasswd file.
 *
 * The Authorization field is the peer's and hostile: one field, the scheme "Basic" (any
 * case), one token of strict base64 (RFC 4648 alphabet, padding only at its end) of at
 * most AUTH_FIELD_MAX bytes, decoding to user:password with a user that is not empty and
 * no NUL anywhere.  Anything else - no field, two fields, another scheme, bad base64,
 * no colon - is a 401 with the challenge, never a crash and never a check.
 *
 * A check is crypt_rn on the pool (passcheck.c) while the handler waits parked; a check
 * that passed recently for the same credentials is answered from htpasswd.c's cache
 * without it.  A full pool queue refuses at once with 503 and Retry-After: 1 (a flood of
 * wrong passwords is shed, not queued in front of everyone); clients already
 * authenticated keep being answered from the cache meanwhile.
 *
 * The decoded credentials live in a heap buffer of this frame's callee only, wiped and
 * freed before the handler waits: a parked handler's frames are copied to the heap, and
 * must carry no password there. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "app/app.h"
#include "app/htpasswd.h"
#include "app/passcheck.h"
#include "config.h"
#include "log.h"
#include "scalloc.h"

#define AUTH_FIELD_MAX 4096        /* of base64: 3 KiB of user and password */
#define CHECK_WAIT_MAX 60.0        /* a check that never ends (a stopped pool): 503 */

static void challenge(struct request *r, const struct auth_conf *a, const char *why)
{
    struct header h[] = { { "www-authenticate", a->challenge } };
    req_set_refused_by(r, "auth_basic");
    metrics_auth(AUTH_BASIC, AUTH_FAILURE);
    if (strcmp(why, "no credentials"))       /* (a browser's first request: nothing to say) */
        log_msg(LOG_INFO, "%s: %s %s: auth_basic: %s", req_peer(r), req_method(r), req_target(r), why);
    app_error_fields(r, 401, "401 Unauthorized\n", h, 1);
}

static bool base64_char(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' || ch == '/';
}

/* The credentials of a Basic Authorization value, decoded into *out (heap, n bytes, the
 * caller wipes and frees it): the colon's place in it, or NULL with why. */
static const char *decode(const char *value, char **out, size_t *n, const char **why)
{
    *out = NULL;
    if (strncasecmp(value, "Basic", 5) || (value[5] != ' ' && value[5] != '\t'))
        return *why = "not Basic credentials", NULL;
    const char *t = value + 6;
    while (*t == ' ' || *t == '\t')
        t++;
    size_t tl = strlen(t);
    while (tl && (t[tl - 1] == ' ' || t[tl - 1] == '\t'))
        tl--;
    if (!tl || tl > AUTH_FIELD_MAX || tl % 4)
        return *why = "credentials of a length base64 cannot have", NULL;
    size_t pad = t[tl - 1] == '=' ? t[tl - 2] == '=' ? 2 : 1 : 0;
    for (size_t i = 0; i < tl - pad; i++)
        if (!base64_char((unsigned char)t[i]))
            return *why = "credentials that are not base64", NULL;
    char *buf = sc_malloc(tl / 4 * 3 + 1);
    if (!buf)
        return *why = "no memory", NULL;
    int dl = EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)t, (int)tl);
    if (dl < 0 || (size_t)dl < pad) {
        sc_free(buf);
        return *why = "credentials that are not base64", NULL;
    }
    *n = (size_t)dl - pad;
    *out = buf;
    const char *colon = memchr(buf, ':', *n);
    if (!colon || colon == buf || memchr(buf, 0, *n))
        return *why = !colon ? "credentials without a colon" : colon == buf ? "an empty user name" : "a NUL byte in "
                                                                                                     "the credentials",
               NULL;
    return colon;
}

/* What the credentials name, as the check needs it: the user, the digest of the
 * credentials for the cache, and a check started on the pool unless the cache answered.
 * The password itself is gone from memory when this returns (but in the check's copy). */
struct attempt {
    const struct htuser *user;
    uint8_t digest[HTPASSWD_DIGEST];
    bool cached;
    struct passcheck *check;
    char name[64];                 /* for the log: the user as sent, cut */
    const char *why;
};

static PARKED_APART void begin(struct request *r, const struct auth_conf *a, struct attempt *t)
{
    const char *values[2];
    size_t nv = req_header_values(r, "authorization", values, 2);
    if (nv != 1) {
        t->why = nv ? "two Authorization fields" : "no credentials";
        return;
    }
    char *cred;
    size_t n;
    const char *colon = decode(values[0], &cred, &n, &t->why);
    if (!colon) {
        sc_free(cred);
        return;
    }
    size_t ul = (size_t)(colon - cred), pl = n - ul - 1;
    snprintf(t->name, sizeof t->name, "%.*s", (int)(ul < 63 ? ul : 63), cred);
    for (char *p = t->name; *p; p++)      /* the error log is lines of text */
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
            *p = '?';
    struct htpasswd *users = a->file->users;
    t->user = htpasswd_user(users, cred, ul);
    htpasswd_digest(cred, ul, colon + 1, pl, t->digest);
    t->cached = t->user && htpasswd_cached(users, t->user, t->digest);
    if (!t->cached && !(t->check = passcheck_start(htpasswd_hash(users, t->user), colon + 1, pl)))
        t->why = "busy";
    explicit_bzero(cred, n);
    sc_free(cred);
}

bool auth_basic_allows(struct request *r, const struct auth_conf *a)
{
    struct attempt t = { 0 };
    begin(r, a, &t);
    if (t.cached) {
        metrics_auth(AUTH_BASIC, AUTH_SUCCESS);
        return true;
    }
    if (!t.check) {
        if (t.why && !strcmp(t.why, "busy")) {
            static const struct header retry[] = { { "retry-after", "1" } };
            req_set_refused_by(r, "auth_basic");
            metrics_auth(AUTH_BASIC, AUTH_BUSY);
            log_msg(LOG_WARN, "%s: %s %s: auth_basic: every password check is taken, refused (503)", req_peer(r),
                    req_method(r), req_target(r));
            app_error_fields(r, 503, "503 Service Unavailable: too many password checks at once\n", retry, 1);
            return false;
        }
        challenge(r, a, t.why);
        return false;
    }
    int w = req_wait_fd(r, passcheck_fd(t.check), REQ_READABLE, CHECK_WAIT_MAX);
    int result = passcheck_result(t.check);
    passcheck_release(t.check);
    if (w < 0)
        return false;              /* the client is gone: nothing to answer */
    if (result == PASSCHECK_YES && t.user) {
        htpasswd_remember(a->file->users, t.user, t.digest);
        metrics_auth(AUTH_BASIC, AUTH_SUCCESS);
        return true;
    }
    if (result == PASSCHECK_PENDING) {
        req_set_refused_by(r, "auth_basic");
        metrics_auth(AUTH_BASIC, AUTH_BUSY);
        app_error(r, 503);
        return false;
    }
    char why[120];
    snprintf(why, sizeof why, t.user ? "user \"%s\": password mismatch" : "user \"%s\" was not found", t.name);
    challenge(r, a, why);
    return false;
}
