/* The users of auth_basic: an htpasswd file (user:hash lines), read when a configuration
 * is applied - at start, by --check and on every reload - and kept with it.
 *
 * The file is hostile input like any other: it is read as readfile.c reads certificates
 * (regular files only, so a FIFO cannot hang the daemon; at most 16 MiB), and every line
 * that is not a user with a hash this server checks safely is an error naming the file
 * and the line, which fails the configuration (exit 2 at start; a reload keeps the
 * running one).  Taken: the crypt(3) hashes that Apache's htpasswd -B and openssl passwd
 * -5/-6 write, and mkpasswd's yescrypt where libcrypt has it - bcrypt ($2y$, $2b$, $2a$),
 * SHA-crypt ($5$, $6$), yescrypt ($y$); each checked with crypt_checksalt and its length,
 * so a cut-off hash is found at load, not at a login.  Refused with the command to use
 * instead: plain text, {SHA} (unsalted SHA-1), $apr1$ and $1$ (MD5), DES crypt.
 *
 * A user not in the file is checked against the file's first hash (the decoy), so how
 * long a wrong guess takes says nothing of which users exist.
 *
 * The cache: per user, a digest of the last password that passed (HMAC-SHA-256 under a
 * key drawn at start, never written anywhere), so a client that sends its credentials
 * with every request pays bcrypt once, not every time.  Bounded by the file - 33 bytes a
 * user - and gone with the configuration: a reload that changes a hash forgets it.  A
 * wrong password never touches it, so a flood cannot evict a good client.  The digest is
 * compared in constant time (CRYPTO_memcmp). */
#define _GNU_SOURCE
#include <crypt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "app/app.h"
#include "app/htpasswd.h"
#include "config.h"
#include "readfile.h"
#include "scalloc.h"

#define LINE_MAX_BYTES 1024

struct htuser {
    const char *name, *hash;       /* into the file's text */
    uint32_t name_len;
    bool has_ok;
    uint8_t ok[HTPASSWD_DIGEST];   /* the last password that passed, as htpasswd_digest gives it */
};

struct htpasswd {
    pthread_mutex_t lock;          /* the cache: every worker reads and writes it */
    struct htuser *users;
    uint32_t nusers;
    uint32_t *slots;               /* by name: index + 1, 0 empty */
    uint32_t mask;
    struct buf text;
};

static uint8_t digest_key[32];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static void draw_key(void)
{
    if (getrandom(digest_key, sizeof digest_key, 0) != (ssize_t)sizeof digest_key)
        abort();                   /* no secret: a cache anyone could fill is no cache */
}

void htpasswd_digest(const char *user, size_t ulen, const char *password, size_t plen, uint8_t out[HTPASSWD_DIGEST])
{
    pthread_once(&key_once, draw_key);
    /* Length first: "ab"+"c" and "a"+"bc" are not the same credentials. */
    uint64_t ul = ulen;
    size_t n = sizeof ul + ulen + plen;
    unsigned char *m = sc_malloc(n);
    unsigned len = 0;
    if (m) {
        memcpy(m, &ul, sizeof ul);
        memcpy(m + sizeof ul, user, ulen);
        memcpy(m + sizeof ul + ulen, password, plen);
    }
    if (!m || !HMAC(EVP_sha256(), digest_key, sizeof digest_key, m, n, out, &len) || len != HTPASSWD_DIGEST)
        getrandom(out, HTPASSWD_DIGEST, 0);   /* matches nothing */
    if (m)
        explicit_bzero(m, n);
    sc_free(m);
}

static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

const struct htuser *htpasswd_user(const struct htpasswd *h, const char *name, size_t len)
{
    for (uint32_t i = name_hash(name, len) & h->mask; h->slots[i]; i = (i + 1) & h->mask) {
        const struct htuser *u = &h->users[h->slots[i] - 1];
        if (u->name_len == len && !memcmp(u->name, name, len))
            return u;
    }
    return NULL;
}

const char *htpasswd_hash(const struct htpasswd *h, const struct htuser *u) { return u ? u->hash : h->users[0].hash; }

bool htpasswd_cached(struct htpasswd *h, const struct htuser *u, const uint8_t digest[HTPASSWD_DIGEST])
{
    pthread_mutex_lock(&h->lock);
    bool hit = u->has_ok && CRYPTO_memcmp(u->ok, digest, HTPASSWD_DIGEST) == 0;
    pthread_mutex_unlock(&h->lock);
    return hit;
}

void htpasswd_remember(struct htpasswd *h, const struct htuser *u, const uint8_t digest[HTPASSWD_DIGEST])
{
    struct htuser *w = (struct htuser *)u;
    pthread_mutex_lock(&h->lock);
    memcpy(w->ok, digest, HTPASSWD_DIGEST);
    w->has_ok = true;
    pthread_mutex_unlock(&h->lock);
}

void htpasswd_free(struct htpasswd *h)
{
    if (!h)
        return;
    for (uint32_t i = 0; i < h->nusers; i++)
        explicit_bzero(h->users[i].ok, HTPASSWD_DIGEST);
    pthread_mutex_destroy(&h->lock);
    buf_free(&h->text);
    sc_free(h->users);
    sc_free(h->slots);
    sc_free(h);
}

/* The hashes taken, with the length of what follows their last '$' (salt and hash for
 * bcrypt, the hash for the others): a hash cut short is an error at load. */
static const struct { const char *prefix; size_t tail; } kinds[] = {
    { "$2y$", 53 }, { "$2b$", 53 }, { "$2a$", 53 }, { "$5$", 43 }, { "$6$", 86 }, { "$y$", 43 },
};

/* Why hash (n bytes) is not one this server checks, or NULL. */
static const char *hash_problem(const char *hash, size_t n, char *why, size_t cap)
{
    if (!n)
        return "an empty hash (the user could never log in): set a password with htpasswd -B";
    if (!strncmp(hash, "{SHA}", 5))
        return "a {SHA} hash (unsalted SHA-1) is not taken: write the file with htpasswd -B (bcrypt) or "
               "openssl passwd -6";
    if (!strncmp(hash, "$apr1$", 6) || !strncmp(hash, "$1$", 3))
        return "an MD5 hash ($apr1$, $1$) is not taken: write the file with htpasswd -B (bcrypt) or openssl passwd -6";
    size_t k = 0;
    while (k < sizeof kinds / sizeof kinds[0] && strncmp(hash, kinds[k].prefix, strlen(kinds[k].prefix)))
        k++;
    if (k == sizeof kinds / sizeof kinds[0])
        return "not a hash this server takes (plain text? DES crypt?): passwords are stored as bcrypt ($2y$, "
               "htpasswd -B), SHA-crypt ($5$, $6$: openssl passwd -5, -6) or yescrypt ($y$)";
    for (size_t i = 0; i < n; i++)
        if (!strchr("./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz$=", hash[i]))
            return "a hash with a byte no crypt(3) hash holds";
    const char *last = memrchr(hash, '$', n);
    char copy[LINE_MAX_BYTES + 1];
    memcpy(copy, hash, n);
    copy[n] = 0;
    int salt = crypt_checksalt(copy);
    if (salt == CRYPT_SALT_METHOD_DISABLED || (salt == CRYPT_SALT_INVALID && kinds[k].prefix[1] == 'y'))
        return snprintf(why, cap, "this libcrypt does not take %s hashes", kinds[k].prefix), why;
    if (salt != CRYPT_SALT_OK && salt != CRYPT_SALT_METHOD_LEGACY)
        return "a malformed hash (libcrypt refuses its settings)";
    /* crypt_checksalt reads the prefix alone: the cost and the rounds, which a check
     * would refuse at every login, are read here. */
    const char *p = hash + strlen(kinds[k].prefix);
    if (kinds[k].prefix[1] == '2' &&
        (n < 7 || p[0] < '0' || p[0] > '3' || p[1] < '0' || p[1] > '9' || p[2] != '$' ||
         (p[0] - '0') * 10 + (p[1] - '0') < 4 || (p[0] - '0') * 10 + (p[1] - '0') > 31))
        return "a malformed hash (bcrypt's cost is two digits, 04 to 31)";
    if ((kinds[k].prefix[1] == '5' || kinds[k].prefix[1] == '6') && !strncmp(p, "rounds=", 7)) {
        char *end;
        unsigned long rounds = strtoul(p + 7, &end, 10);
        if (end == p + 7 || *end != '$' || rounds < 1000 || rounds > 999999999)
            return "a malformed hash (SHA-crypt's rounds are 1000 to 999999999)";
    }
    if ((size_t)(hash + n - last - 1) != kinds[k].tail)
        return snprintf(why, cap, "a %s hash is %zu characters after its last '$', not %zu: cut short?",
                        kinds[k].prefix, (size_t)(hash + n - last - 1), kinds[k].tail), why;
    return NULL;
}

/* The users of the file at path (auth_basic_user_file, set at from); every problem into
 * e as "path:line: problem".  NULL after any. */
static struct htpasswd *load(const char *path, const char *from, struct config_errors *e)
{
    struct htpasswd *h = sc_calloc(1, sizeof *h);
    char why[300];
    if (!h) {
        config_error(e, "%s: auth_basic_user_file %s: out of memory", from, path);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    if (read_regular_file(path, &h->text, why, sizeof why)) {
        config_error(e, "%s: auth_basic_user_file %s: cannot read: %s", from, path, why);
        htpasswd_free(h);
        return NULL;
    }
    int before = e->count;
    if (buf_reserve(&h->text, 1)) {   /* a byte past the last line, for its NUL */
        config_error(e, "%s: auth_basic_user_file %s: out of memory", from, path);
        htpasswd_free(h);
        return NULL;
    }
    char *text = h->text.data ? h->text.data : (char *)"";
    size_t len = h->text.len;
    if (memchr(text, 0, len))
        config_error(e, "%s: auth_basic_user_file %s: a NUL byte: this is no htpasswd file", from, path);
    uint32_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    h->users = sc_calloc(lines, sizeof *h->users);
    uint32_t *line_of = sc_calloc(lines, sizeof *line_of);
    if (!h->users || !line_of) {
        config_error(e, "%s: auth_basic_user_file %s: out of memory", from, path);
        sc_free(line_of);
        htpasswd_free(h);
        return NULL;
    }
    uint32_t line = 0;
    for (size_t off = 0; off < len && e->count == before;) {
        char *s = text + off, *nl = memchr(s, '\n', len - off);
        size_t n = nl ? (size_t)(nl - s) : len - off;
        off += n + 1;
        line++;
        if (n > LINE_MAX_BYTES) {
            config_error(e, "%s:%u: a line longer than %u bytes (auth_basic_user_file at %s)", path, line,
                         LINE_MAX_BYTES, from);
            break;
        }
        s[n] = 0;                  /* (the '\n', or the buffer's spare byte) */
        if (n && s[n - 1] == '\r')
            s[--n] = 0;
        size_t lead = strspn(s, " \t");
        if (lead == n || s[lead] == '#')
            continue;
        char *colon = strchr(s, ':');
        const char *problem = NULL;
        if (!colon)
            problem = "expected user:hash (no ':')";
        else if (colon == s)
            problem = "an empty user name";
        for (const char *p = s; !problem && p < colon; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                problem = "a control byte in the user name";
        if (problem) {
            config_error(e, "%s:%u: %s (auth_basic_user_file at %s)", path, line, problem, from);
            continue;
        }
        char *hash = colon + 1, *end = strchr(hash, ':');   /* a third field is a comment */
        if (end)
            *end = 0;
        if ((problem = hash_problem(hash, strlen(hash), why, sizeof why))) {
            config_error(e, "%s:%u: user '%.*s': %s (auth_basic_user_file at %s)", path, line,
                         (int)(colon - s < 64 ? colon - s : 64), s, problem, from);
            continue;
        }
        *colon = 0;
        struct htuser *u = &h->users[h->nusers];
        *u = (struct htuser){ s, hash, (uint32_t)(colon - s), false, { 0 } };
        line_of[h->nusers++] = line;
    }
    if (e->count == before && !h->nusers)
        config_error(e, "%s: auth_basic_user_file %s: no users in it", from, path);
    if (e->count == before) {
        uint32_t slots = 8;
        while (slots < h->nusers * 2)
            slots *= 2;
        h->mask = slots - 1;
        if (!(h->slots = sc_calloc(slots, sizeof *h->slots)))
            config_error(e, "%s: auth_basic_user_file %s: out of memory", from, path);
        for (uint32_t i = 0; h->slots && i < h->nusers && e->count == before; i++) {
            const struct htuser *u = &h->users[i], *o = htpasswd_user(h, u->name, u->name_len);
            if (o) {
                config_error(e, "%s:%u: user '%.64s' given twice (first at line %u)", path, line_of[i], u->name,
                             line_of[o - h->users]);
                break;
            }
            uint32_t k = name_hash(u->name, u->name_len) & h->mask;
            while (h->slots[k])
                k = (k + 1) & h->mask;
            h->slots[k] = i + 1;
        }
    }
    sc_free(line_of);
    if (e->count != before) {
        htpasswd_free(h);
        return NULL;
    }
    return h;
}

static void free_users(void *arg)
{
    struct auth_file *f = arg;
    htpasswd_free(f->users);
    f->users = NULL;
}

int htpasswd_load_all(struct config *c, struct config_errors *e)
{
    int before = e->count;
    for (struct auth_file *f = c->auth_files; f; f = f->next) {
        if (!(f->users = load(f->path, f->from, e)))
            continue;
        if (config_on_free(c, free_users, f)) {
            htpasswd_free(f->users);
            f->users = NULL;
            config_error(e, "%s: auth_basic_user_file %s: out of memory", f->from, f->path);
        }
    }
    return e->count > before ? -1 : 0;
}
