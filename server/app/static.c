/* Static files under root, with the HTTP semantics clients rely on (RFC 9110): strong
 * ETags, conditional requests, single byte ranges, a redirect for a directory named
 * without its slash, and precompressed variants chosen by Accept-Encoding.
 *
 * Paths are resolved beneath root by path.c; everything that would leave it is a 404,
 * like a file that is not there.  Anything under root is hostile input too: only regular
 * files are served (O_NONBLOCK keeps a FIFO from blocking the worker), and a failure to
 * open for lack of descriptors is a 503 and a log line, never a 404.
 *
 * Each worker keeps what it opened for a second (like nginx's open_file_cache): the
 * descriptor, the validators and type formatted, files of up to SMALL_FILE bytes read
 * into memory, and also what is not there (a missing file, a missing .gz or .br), so a
 * cached small file costs no system call per response and a miss no openat2.  A changed
 * file is seen within a second; a small file's headers and body always come from the same
 * reading.  Expired entries are closed by a sweep every second, so a deleted or replaced
 * file is not held open.
 *
 * Conditionals are evaluated in RFC 9110 section 13.2.2's order: If-Match, then
 * If-Unmodified-Since (412), If-None-Match, then If-Modified-Since (304), then If-Range
 * with Range (206, or 416 for a range that misses the file).  A request for several
 * ranges gets the whole file (200), which the RFC allows.
 *
 * Each worker opens root itself whenever it takes a configuration (a reload may move
 * it), and empties its cache then.  A root left at the built-in default that is not
 * there is no root at all: / answers with the page built into the binary. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/app.h"
#include "config.h"
#include "httpdate.h"
#include "log.h"
#include "scalloc.h"

#define OPEN_FILES OPEN_FILE_SLOTS
#define OPEN_FILE_TTL 1.0
#define SMALL_FILE 16384         /* 256 slots: at most 4 MiB of copies per worker */

static __thread int root_fd = -1;
extern const char builtin_page_text[];
extern const unsigned builtin_page_size;

enum file_kind { FILE_REGULAR, FILE_DIR_NO_SLASH, FILE_MISSING };

struct open_file {
    char *path;                /* the decoded request path (with .gz or .br for a variant) */
    size_t path_len;
    int fd;                    /* -1 unless FILE_REGULAR */
    uint8_t kind;              /* enum file_kind */
    int refs;                  /* requests sending from fd */
    bool has_variants;         /* a .br or .gz lies beside it (looked at when it was opened) */
    bool evicted;              /* out of the table: close when the last request is done */
    double expires;
    time_t mtime;
    int64_t size;
    char *content;             /* the whole file if it is small, else NULL */
    const char *type;
    char modified[HTTP_DATE_LEN + 1];
    char etag[64];
    struct req_fields *fields; /* content-type, last-modified, etag, accept-ranges, laid out */
};

static __thread struct open_file **open_files;  /* OPEN_FILES slots per worker */

static void open_file_free(struct open_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    sc_free(f->content);
    sc_free(f->path);
    req_fields_free(f->fields);
    sc_free(f);
}

/* Out of the table; closed now, or when the last request sending from it is done. */
static void open_file_evict(struct open_file *f)
{
    f->evicted = true;
    if (f->refs == 0)
        open_file_free(f);
}

static void open_file_hold(void *arg) { ((struct open_file *)arg)->refs++; }

static void open_file_release(void *arg)
{
    struct open_file *f = arg;
    if (--f->refs == 0 && f->evicted)
        open_file_free(f);
}

/* FNV-1a of p, and its length on the way. */
static unsigned path_hash(const char *p, size_t *len)
{
    unsigned h = 2166136261u;
    const char *s = p;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    *len = (size_t)(p - s);
    return h;
}

static bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE; }

/* Opens rel and fills f: a regular file; a directory named with its slash (its
 * index.html); a directory without it (to be redirected); or nothing (missing, or not a
 * regular file).  0, or EMFILE/ENFILE when descriptors ran out. */
static int open_file_fill(struct open_file *f, const char *rel)
{
    char path[2048];
    snprintf(path, sizeof path, "%s", rel);
    f->fd = -1;
    f->kind = FILE_MISSING;
    int fd = path_open_beneath(root_fd, path);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        size_t l = strlen(path);
        if (l && path[l - 1] != '/') {
            f->kind = FILE_DIR_NO_SLASH;
            return 0;
        }
        snprintf(path + l, sizeof path - l, "index.html");
        fd = path_open_beneath(root_fd, path);
        if (fd >= 0 && fstat(fd, &st) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0 || !S_ISREG(st.st_mode)) {
        int err = fd < 0 && out_of_descriptors(errno) ? errno : 0;
        if (fd >= 0)
            close(fd);
        return err;
    }
    f->fd = fd;
    f->kind = FILE_REGULAR;
    f->mtime = st.st_mtime;
    f->size = st.st_size;
    if (st.st_size > 0 && st.st_size <= SMALL_FILE && (f->content = sc_malloc((size_t)st.st_size)) &&
        pread(fd, f->content, (size_t)st.st_size, 0) != st.st_size) {
        sc_free(f->content);   /* changing under us: send from the descriptor */
        f->content = NULL;
    }
    f->type = mime_type(path);
    /* Its precompressed variants are looked for once per opening, not per request. */
    size_t pl = strlen(path);
    for (int i = 0; i < 2 && !f->has_variants && pl + 4 <= sizeof path; i++) {
        memcpy(path + pl, i ? ".gz" : ".br", 4);
        int v = path_open_beneath(root_fd, path);
        if (v >= 0) {
            f->has_variants = true;
            close(v);
        }
    }
    http_date_format(st.st_mtime, f->modified);
    /* Strong: inode, size and modification time (to the nanosecond) together change
     * whenever the bytes may have. */
    snprintf(f->etag, sizeof f->etag, "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"", (uint64_t)st.st_ino,
             (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec * UINT64_C(1000000000) + (uint64_t)st.st_mtim.tv_nsec);
    /* What every full response of it says, prepared once per opening (NULL without
     * memory: then each response lays them out itself). */
    struct header h[] = { { "content-type", f->type }, { "last-modified", f->modified }, { "etag", f->etag },
                          { "accept-ranges", "bytes" } };
    f->fields = req_fields_new(h, sizeof h / sizeof h[0]);
    return 0;
}

/* The cache entry for rel, opened now if it is missing or older than OPEN_FILE_TTL.
 * NULL with *err (EMFILE, ENFILE, ENOMEM) only when it could not be looked at. */
static struct open_file *open_file_get(const char *rel, double now, int *err)
{
    *err = ENOMEM;
    if (!open_files && !(open_files = sc_calloc(OPEN_FILES, sizeof *open_files)))
        return NULL;
    size_t len;
    struct open_file **slot = &open_files[path_hash(rel, &len) % OPEN_FILES];
    struct open_file *f = *slot;
    if (f && f->expires > now && f->path_len == len && !memcmp(f->path, rel, len))
        return f;
    if (f) {
        *slot = NULL;
        open_file_evict(f);
    }
    if (!(f = sc_calloc(1, sizeof *f)))
        return NULL;
    if ((*err = open_file_fill(f, rel)) || !(f->path = sc_malloc(len + 1))) {
        if (!*err)
            *err = ENOMEM;
        open_file_free(f);
        return NULL;
    }
    memcpy(f->path, rel, len + 1);
    f->path_len = len;
    f->expires = now + OPEN_FILE_TTL;
    *slot = f;
    return f;
}

void static_sweep(double now)
{
    for (unsigned i = 0; open_files && i < OPEN_FILES; i++) {
        struct open_file *f = open_files[i];
        if (f && f->expires <= now) {
            open_files[i] = NULL;
            open_file_evict(f);
        }
    }
}

/* ---- the semantics ---- */

/* Does an If-Match/If-None-Match list name etag?  weak: W/ prefixes are ignored (13.1.2
 * for If-None-Match); else a weak tag never matches (If-Match compares strongly). */
static bool etag_listed(const char *list, const char *etag, bool weak)
{
    size_t el = strlen(etag);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        bool is_weak = !strncmp(p, "W/", 2);
        if (is_weak)
            p += 2;
        if (*p != '"')
            return false;                      /* malformed: no match */
        const char *end = strchr(p + 1, '"');
        if (!end)
            return false;
        if ((size_t)(end + 1 - p) == el && !strncmp(p, etag, el) && (weak || !is_weak))
            return true;
        p = end + 1;
    }
    return false;
}

/* A qvalue (RFC 9110 section 12.4.2: "0" or "1", then up to three decimals, nothing
 * else) in thousandths, or -1. */
static int qvalue(const char *s, size_t n)
{
    if (!n || (s[0] != '0' && s[0] != '1') || (n > 1 && s[1] != '.') || n > 5)
        return -1;
    int q = (s[0] - '0') * 1000;
    for (size_t i = 2, scale = 100; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        q += (s[i] - '0') * (int)scale;
    }
    return q <= 1000 ? q : -1;
}

/* Accept-Encoding allows coding (q > 0, by name or by *).  A member whose weight does
 * not parse allows nothing. */
static bool accepts(const char *list, const char *coding)
{
    if (!list)
        return false;
    size_t cl = strlen(coding);
    bool star = false;
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *name = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        size_t nl = (size_t)(p - name);
        int q = 1000;
        while (*p && *p != ',') {          /* OWS ";" OWS parameter, the weight among them */
            while (*p == ' ' || *p == '\t' || *p == ';')
                p++;
            const char *param = p;
            while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
                p++;
            if ((param[0] == 'q' || param[0] == 'Q') && param[1] == '=')
                q = qvalue(param + 2, (size_t)(p - param - 2));
        }
        if (nl == cl && !strncasecmp(name, coding, cl))
            return q > 0;
        if (nl == 1 && *name == '*')
            star = q > 0;
    }
    return star;
}

/* 1*DIGIT, saturating: a position past any file is still a position. */
static int range_number(const char *s, size_t n, uint64_t *v)
{
    if (!u64_parse(s, n, INT64_MAX, v))
        return 0;
    if (!n || strspn(s, "0123456789") < n)
        return -1;
    *v = INT64_MAX;
    return 0;
}

/* A single byte range of a file of size bytes: 1 and [*first, *last], 0 to send the
 * whole file (no range, several, or one that does not parse), -1 if it misses the file.
 * RFC 9110 section 14.1: "bytes" (any case), "=", then first-last, first- or -suffix,
 * the numbers digits only - no space, no sign. */
static int parse_range(const char *range, int64_t size, int64_t *first, int64_t *last)
{
    if (strncasecmp(range, "bytes=", 6) || strchr(range, ','))
        return 0;
    const char *p = range + 6, *dash = strchr(p, '-');
    if (!dash)
        return 0;
    size_t after = strlen(dash + 1);
    uint64_t a, b;
    if (dash == p) {                           /* -N: the last N bytes */
        if (range_number(dash + 1, after, &b))
            return 0;
        if (b == 0 || size == 0)
            return -1;
        *first = (int64_t)b >= size ? 0 : size - (int64_t)b;
        *last = size - 1;
        return 1;
    }
    if (range_number(p, (size_t)(dash - p), &a))
        return 0;
    b = (uint64_t)size - 1;
    if (after && (range_number(dash + 1, after, &b) || b < a))
        return 0;
    if ((int64_t)a >= size)
        return -1;
    *first = (int64_t)a;
    *last = (int64_t)b >= size ? size - 1 : (int64_t)b;
    return 1;
}

/* The precompressed variant of rel to send for this Accept-Encoding, if any: br, then
 * gzip.  *exists says whether rel has a variant at all (the answer then varies). */
static struct open_file *variant(const char *rel, const char *accept, double now, const char **coding, bool *exists)
{
    static const char *const codings[][2] = { { "br", ".br" }, { "gzip", ".gz" } };
    struct open_file *chosen = NULL;
    *exists = false;
    for (int i = 0; i < 2; i++) {
        char name[2100];
        int err;
        size_t rl = strlen(rel);
        if (rl + 4 > sizeof name)
            return NULL;
        memcpy(name, rel, rl);
        memcpy(name + rl, codings[i][1], 4);      /* ".br\0" or ".gz\0" */
        struct open_file *v = open_file_get(name, now, &err);
        if (!v || v->kind != FILE_REGULAR)
            continue;
        *exists = true;
        if (!chosen && accepts(accept, codings[i][0])) {
            chosen = v;
            *coding = codings[i][0];
        }
    }
    return chosen;
}

/* A Location is a path on the request's own host: it never starts with two slashes, or
 * a slash and a backslash, which a browser takes for another host (an open redirect).
 * Leading slashes collapse into one (path_decode ignores them: the same directory), and
 * a backslash goes escaped. */
static void redirect_to_slash(struct request *r)
{
    const char *target = req_target(r), *q = strchr(target, '?');
    size_t pl = q ? (size_t)(q - target) : strlen(target);
    char location[2200];
    size_t n = 0;
    const char *p = target;
    while (p < target + pl && *p == '/')
        p++;
    location[n++] = '/';
    for (; p < target + pl && n + 4 < sizeof location; p++) {
        if (*p == '\\') {
            memcpy(location + n, "%5C", 3);
            n += 3;
        } else {
            location[n++] = *p;
        }
    }
    snprintf(location + n, sizeof location - n, "/%s", q ? q : "");
    struct header h[] = { { "location", location }, { "content-type", "text/plain; charset=utf-8" } };
    static const char body[] = "moved: add the slash\n";
    if (req_respond(r, 301, h, 2, sizeof body - 1) == 0 && !req_is_head(r)) {
        req_write(r, body, sizeof body - 1);
        req_end(r);
    }
}

void static_serve(struct request *r)
{
    const char *m = req_method(r);
    bool get = m[0] == 'G' && m[1] == 'E' && m[2] == 'T' && !m[3];
    if (!get && !req_is_head(r)) {
        struct header h[] = { { "allow", "GET, HEAD" } };
        req_respond(r, 405, h, 1, BODY_NONE);
        return;
    }
    char rel[2048];
    if (path_decode(req_target(r), rel, sizeof rel - 16)) {
        reply_text(r, 404, "not found\n");
        return;
    }
    if (root_fd < 0) {
        if (!strcmp(rel, "") || !strcmp(rel, "index.html"))
            req_simple(r, 200, "text/html; charset=utf-8", builtin_page_text, builtin_page_size);
        else
            reply_text(r, 404, "not found\n");
        return;
    }
    int err;
    double now = req_now(r);
    struct open_file *f = open_file_get(rel, now, &err);
    if (!f) {
        static __thread time_t logged;
        log_rate_limited(LOG_ERROR, &logged, "cannot open files under root: %s (raise the open-file limit or lower max_conns)",
                         strerror(err));
        struct header h[] = { { "retry-after", "1" } };
        req_respond(r, 503, h, 1, BODY_NONE);
        return;
    }
    if (f->kind == FILE_DIR_NO_SLASH)
        return redirect_to_slash(r);
    if (f->kind != FILE_REGULAR) {
        reply_text(r, 404, "not found\n");
        return;
    }
    const char *type = f->type, *coding = NULL;
    bool has_variants = false;
    struct open_file *v = f->has_variants ? variant(f->path, req_known(r, KF_ACCEPT_ENCODING), now, &coding, &has_variants)
                                          : NULL;
    if (v)
        f = v;                                 /* the same content, encoded: its own validators */
    struct header h[10];
    size_t n = 0;
    h[n++] = (struct header){ "content-type", type };
    h[n++] = (struct header){ "last-modified", f->modified };
    h[n++] = (struct header){ "etag", f->etag };
    h[n++] = (struct header){ "accept-ranges", "bytes" };
    if (coding)
        h[n++] = (struct header){ "content-encoding", coding };
    if (has_variants)
        h[n++] = (struct header){ "vary", "accept-encoding" };

    const char *if_match = req_known(r, KF_IF_MATCH), *inm = req_known(r, KF_IF_NONE_MATCH);
    const char *ius = req_known(r, KF_IF_UNMODIFIED_SINCE), *ims = req_known(r, KF_IF_MODIFIED_SINCE);
    int64_t t;
    if (if_match ? !etag_listed(if_match, f->etag, false)
                 : ius && (t = http_date_parse(ius)) >= 0 && f->mtime > t) {
        req_respond(r, 412, h + 2, 1, BODY_NONE);
        return;
    }
    /* A date in the future is no validator (section 13.1.3): ignored. */
    if (inm ? etag_listed(inm, f->etag, true)
            : ims && (t = http_date_parse(ims)) >= 0 && t <= (int64_t)time(NULL) && f->mtime <= t) {
        struct header nm[] = { { "last-modified", f->modified }, { "etag", f->etag }, { "vary", "accept-encoding" } };
        req_respond(r, 304, nm, has_variants ? 3 : 2, BODY_NONE);   /* what a 200 would say of validity */
        return;
    }
    const char *range = req_known(r, KF_RANGE), *if_range = req_known(r, KF_IF_RANGE);
    if (range && if_range) {
        bool fresh = if_range[0] == '"' ? !strcmp(if_range, f->etag)
                                        : (t = http_date_parse(if_range)) >= 0 && t == (int64_t)f->mtime;
        if (!fresh)
            range = NULL;                       /* changed since: the whole new file */
    }
    int64_t first = 0, last = f->size - 1;
    int ranged = range ? parse_range(range, f->size, &first, &last) : 0;
    char content_range[80];
    if (ranged < 0) {
        snprintf(content_range, sizeof content_range, "bytes */%" PRId64, f->size);
        struct header u[] = { { "content-range", content_range } };
        req_respond(r, 416, u, 1, BODY_NONE);
        return;
    }
    if (ranged > 0) {
        snprintf(content_range, sizeof content_range, "bytes %" PRId64 "-%" PRId64 "/%" PRId64, first, last, f->size);
        h[n++] = (struct header){ "content-range", content_range };
    }
    f->refs++;
    struct body_source src = { f->fd, f->content, open_file_hold, open_file_release, f };
    /* The file's own fields come prepared (a variant's type is the original's: laid out
     * per response). */
    if (!v && f->fields)
        req_respond_file_with(r, ranged > 0 ? 206 : 200, f->fields, h + 4, n - 4, &src, first, last - first + 1);
    else
        req_respond_file(r, ranged > 0 ? 206 : 200, h, n, &src, first, last - first + 1);
}

/* Checks c's root and makes it absolute, saying where it came from; a root that is the
 * built-in default and is not there becomes "" (the built-in page). */
int static_resolve_root(struct config *c, char *err, size_t errlen)
{
    char real[PATH_MAX], here[PATH_MAX];
    int fd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    if (fd >= 0) {
        close(fd);
        if (!realpath(c->root, real) || strlen(real) >= sizeof c->root)
            snprintf(real, sizeof real, "%s", c->root);
        log_msg(LOG_INFO, "root %s (%s) resolved to %s", c->root, c->root_from, real);
        memcpy(c->root, real, strlen(real) + 1);
        return 0;
    }
    /* A relative root is taken from the directory h2park started in: say which. */
    char where[PATH_MAX + 32] = "";
    if (c->root[0] != '/' && getcwd(here, sizeof here))
        snprintf(where, sizeof where, " resolved against %s", here);
    if (!strcmp(c->root_from, CONFIG_BUILTIN)) {
        log_msg(LOG_WARN, "root %s (%s)%s: %s; / serves the built-in page (set root to serve files)", c->root,
                c->root_from, where, strerror(e));
        c->root[0] = 0;
        return 0;
    }
    snprintf(err, errlen, "root %s (%s)%s: %s", c->root, c->root_from, where, strerror(e));
    return -1;
}

/* On each worker as it takes a configuration (and on the thread that calls app_init). */
void static_configure(void)
{
    int fd = -1;
    if (cfg.root[0] && (fd = open(cfg.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        log_msg(LOG_ERROR, "root %s: %s; the previous root stays", cfg.root, strerror(errno));
        return;
    }
    if (root_fd >= 0)
        close(root_fd);
    root_fd = fd;
    static_sweep(INFINITY);          /* cached files came from the old root */
}
