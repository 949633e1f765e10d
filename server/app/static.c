/* Static files under a location's root, with the HTTP semantics clients rely on (RFC
 * 9110): ETags, conditional requests, single byte ranges, a redirect for a directory
 * named without its slash, precompressed variants chosen by Accept-Encoding, index
 * files, and where the location asks for them a directory listing and a fallback file
 * for paths that are not there (a single-page application's index.html).
 *
 * The ETag is the size and the modification time (to the nanosecond), nothing of the
 * inode or the device, so copies of a file on two machines behind one balancer carry
 * the same one (nginx's choice).  It is strong (RFC 9110 8.8.3) unless the file changed
 * within the last second: a second write of the same size inside one tick of the
 * file system's clock would keep both, so until then it is weak, as section 8.8.2.2
 * rules for Last-Modified.
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
 * Roots are opened once per configuration, on the main thread as it is applied
 * (static_open_roots), and closed when the configuration is freed; the cache is keyed
 * by the root's id and path, and emptied when a worker takes a new configuration.  A
 * root left at the built-in default that is not there is no root at all: / answers
 * with the page built into the binary. */
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

extern const char builtin_page_text[];
extern const unsigned builtin_page_size;

enum file_kind { FILE_REGULAR, FILE_DIR_NO_SLASH, FILE_DIR, FILE_MISSING };

struct open_file {
    uint64_t root;             /* the docroot's id */
    char *path;                /* relative to the root (with .gz or .br for a variant) */
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
    char etag[64];             /* as sent: "size-mtime", or W/"size-mtime" */
    bool etag_weak;
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

/* FNV-1a of the docroot's id and p, and p's length on the way. */
static unsigned path_hash(uint64_t root, const char *p, size_t *len)
{
    unsigned h = 2166136261u ^ (unsigned)root;
    const char *s = p;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    *len = (size_t)(p - s);
    return h;
}

static bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE; }

/* Opens rel and fills f: a regular file; a directory named with its slash (its first
 * index file that is there, else FILE_DIR); a directory without it (to be redirected);
 * or nothing (missing, or not a regular file).  0, or EMFILE/ENFILE when descriptors
 * ran out. */
static int open_file_fill(struct open_file *f, const struct docroot *d, const char *rel)
{
    char path[2048];
    snprintf(path, sizeof path, "%s", rel);
    f->fd = -1;
    f->kind = FILE_MISSING;
    int fd = path_open_beneath(d->fd, path);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        fd = -1;
        size_t l = strlen(path);
        if (l && path[l - 1] != '/') {
            f->kind = FILE_DIR_NO_SLASH;
            return 0;
        }
        f->kind = FILE_DIR;
        for (uint8_t i = 0; i < d->nindex && fd < 0; i++) {
            snprintf(path + l, sizeof path - l, "%s", d->index[i]);
            fd = path_open_beneath(d->fd, path);
            if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
                close(fd);
                fd = -1;
            }
        }
        if (fd < 0)
            return out_of_descriptors(errno) ? errno : 0;
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
        int v = path_open_beneath(d->fd, path);
        if (v >= 0) {
            f->has_variants = true;
            close(v);
        }
    }
    http_date_format(st.st_mtime, f->modified);
    /* Size and modification time only: the same file gets the same tag on every machine
     * and copy (an inode would differ).  Weak while the file may still be changing within
     * the second its mtime names (RFC 9110 8.8.1: a second write in it would keep the tag). */
    f->etag_weak = st.st_mtime >= time(NULL) - 1;
    snprintf(f->etag, sizeof f->etag, "%s\"%" PRIx64 "-%" PRIx64 "\"", f->etag_weak ? "W/" : "", (uint64_t)st.st_size,
             (uint64_t)st.st_mtim.tv_sec * UINT64_C(1000000000) + (uint64_t)st.st_mtim.tv_nsec);
    /* What every full response of it says, prepared once per opening (NULL without
     * memory: then each response lays them out itself). */
    struct header h[] = { { "content-type", f->type }, { "last-modified", f->modified }, { "etag", f->etag },
                          { "accept-ranges", "bytes" } };
    f->fields = req_fields_new(h, sizeof h / sizeof h[0]);
    return 0;
}

/* The cache entry for rel, opened now if it is missing or older than OPEN_FILE_TTL.
 * NULL with *err (EMFILE, ENFILE, ENOMEM) only when it could not be looked at. */
static struct open_file *open_file_get(const struct docroot *d, const char *rel, double now, int *err)
{
    *err = ENOMEM;
    if (!open_files && !(open_files = sc_calloc(OPEN_FILES, sizeof *open_files)))
        return NULL;
    size_t len;
    struct open_file **slot = &open_files[path_hash(d->id, rel, &len) % OPEN_FILES];
    struct open_file *f = *slot;
    if (f && f->expires > now && f->root == d->id && f->path_len == len && !memcmp(f->path, rel, len))
        return f;
    if (f) {
        *slot = NULL;
        open_file_evict(f);
    }
    if (!(f = sc_calloc(1, sizeof *f)))
        return NULL;
    f->root = d->id;
    if ((*err = open_file_fill(f, d, rel)) || !(f->path = sc_malloc(len + 1))) {
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

/* Does an If-Match/If-None-Match list name f's tag?  weak: the weak comparison (8.8.3.2,
 * for If-None-Match), which ignores W/ on either side; else the strong one (If-Match),
 * where a weak tag on either side never matches. */
static bool etag_listed(const char *list, const struct open_file *f, bool weak)
{
    if (!weak && f->etag_weak)
        return false;
    const char *etag = f->etag + (f->etag_weak ? 2 : 0);
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
static struct open_file *variant(const struct docroot *d, const char *rel, const char *accept, double now,
                                 const char **coding, bool *exists)
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
        struct open_file *v = open_file_get(d, name, now, &err);
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
 * what a URL does not carry as it is (a backslash, a tab a browser would drop) goes
 * escaped (url_escape). */
static void redirect_to_slash(struct request *r)
{
    const char *target = req_target(r), *q = strchr(target, '?');
    size_t pl = q ? (size_t)(q - target) : strlen(target);
    char location[2200];
    const char *p = target;
    while (p < target + pl && *p == '/')
        p++;
    location[0] = '/';
    size_t n = 1 + url_escape(location + 1, sizeof location - 1, p, (size_t)(target + pl - p), false);
    if (n >= sizeof location - 2)
        return app_error(r, 414);
    location[n++] = '/';
    if (n + url_escape(location + n, sizeof location - n, q ? q : "", q ? strlen(q) : 0, false) >= sizeof location)
        return app_error(r, 414);
    struct header h[] = { { "location", location }, { "content-type", "text/plain; charset=utf-8" } };
    static const char body[] = "moved: add the slash\n";
    if (req_respond(r, 301, h, 2, sizeof body - 1) == 0 && !req_is_head(r)) {
        req_write(r, body, sizeof body - 1);
        req_end(r);
    }
}

/* rel under the location's root for a path - decoded, as path_decode gives it, or an
 * error page's as configured - or NULL.  An alias cuts the
 * location's path off only at a segment boundary: "location /static" with "alias =
 * /srv/static/" must not turn /static../x into "../x" (the alias traversal nginx
 * configurations are known for), so a path that goes on inside the segment names
 * nothing. */
static inline const char *relative(const struct location *loc, const char *path, bool decoded)
{
    if (loc->alias_file)
        return loc->alias_file;
    if (decoded && !loc->alias)
        return path + 1;           /* path_decode's: one slash first, never two */
    const char *rel = path;
    if (loc->alias) {
        if (strlen(path) < loc->path_len)
            return NULL;
        rel = path + loc->path_len;
        if (*rel && *rel != '/' && loc->path[loc->path_len - 1] != '/')
            return NULL;
    }
    while (*rel == '/')
        rel++;
    return rel;
}

static void cannot_open(struct request *r, int err)
{
    static __thread time_t logged;
    log_rate_limited(LOG_ERROR, &logged, "cannot open files under root: %s (raise the open-file limit or lower max_conns)",
                     strerror(err));
    struct header h[] = { { "retry-after", "1" } };
    req_respond(r, 503, h, 1, BODY_NONE);
}

/* A regular file, with every semantics above (inline: a call and a second frame per
 * request cost more than anything static_serve does before it). */
static inline __attribute__((always_inline)) void serve_file(struct request *r, const struct docroot *d, struct open_file *f, double now)
{
    const char *type = f->type, *coding = NULL;
    bool has_variants = false;
    struct open_file *v = f->has_variants ? variant(d, f->path, req_known(r, KF_ACCEPT_ENCODING), now, &coding,
                                                    &has_variants)
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
    if (if_match ? !etag_listed(if_match, f, false)
                 : ius && (t = http_date_parse(ius)) >= 0 && f->mtime > t) {
        req_respond(r, 412, h + 2, 1, BODY_NONE);
        return;
    }
    /* A date in the future is no validator (section 13.1.3): ignored. */
    if (inm ? etag_listed(inm, f, true)
            : ims && (t = http_date_parse(ims)) >= 0 && t <= (int64_t)time(NULL) && f->mtime <= t) {
        struct header nm[] = { { "last-modified", f->modified }, { "etag", f->etag }, { "vary", "accept-encoding" } };
        req_respond(r, 304, nm, has_variants ? 3 : 2, BODY_NONE);   /* what a 200 would say of validity */
        return;
    }
    const char *range = req_known(r, KF_RANGE), *if_range = req_known(r, KF_IF_RANGE);
    if (range && if_range) {
        /* If-Range compares strongly (13.1.5): a weak tag on either side is no match. */
        bool fresh = if_range[0] == '"' ? !f->etag_weak && !strcmp(if_range, f->etag)
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

void static_serve(struct request *r, const struct location *loc, const char *path)
{
    const char *m = req_method(r);
    bool get = m[0] == 'G' && m[1] == 'E' && m[2] == 'T' && !m[3];
    if (!get && !req_is_head(r)) {
        struct header h[] = { { "allow", "GET, HEAD" } };
        req_respond(r, 405, h, 1, BODY_NONE);
        return;
    }
    const struct docroot *d = loc->docroot;
    const char *rel = relative(loc, path, true);
    if (!rel)
        return app_error(r, 404);
    if (!*rel && loc->alias && !loc->alias_file && path[strlen(path) - 1] != '/')
        return redirect_to_slash(r);   /* "/static" for "location /static": its directory */
    if (d->fd < 0) {
        if (d->builtin_default && (!strcmp(rel, "") || !strcmp(rel, "index.html")))
            req_simple(r, 200, "text/html; charset=utf-8", builtin_page_text, builtin_page_size);
        else
            app_error(r, 404);
        return;
    }
    int err;
    double now = req_now(r);
    struct open_file *f = open_file_get(d, rel, now, &err);
    if (!f)
        return cannot_open(r, err);
    if (f->kind == FILE_DIR_NO_SLASH)
        return redirect_to_slash(r);
    if (f->kind == FILE_DIR && loc->listing) {
        int fd = path_open_beneath(d->fd, *rel ? rel : ".");
        if (fd < 0)
            return out_of_descriptors(errno) ? cannot_open(r, errno) : app_error(r, 404);
        listing_serve(r, fd, path, loc->dotfiles == DOTFILES_ALLOW);
        close(fd);
        return;
    }
    if (f->kind != FILE_REGULAR && loc->fallback) {
        /* What is not there is the application's to route: its page, as a 200. */
        if (!(f = open_file_get(d, loc->fallback + 1, now, &err)))
            return cannot_open(r, err);
    }
    if (f->kind != FILE_REGULAR)
        return app_error(r, 404);
    serve_file(r, d, f, now);
}

int static_serve_page(struct request *r, const char *path, int status, const struct header *extra, size_t nextra)
{
    const struct location *here = req_location(r);
    const struct location *loc = location_for_path(here->site, path, strlen(path), true);
    if (!loc || loc->handler != HANDLER_STATIC || loc->docroot->fd < 0)
        return -1;
    int err;
    const char *rel = relative(loc, path, false);
    struct open_file *f = rel ? open_file_get(loc->docroot, rel, req_now(r), &err) : NULL;
    if (!f || f->kind != FILE_REGULAR)
        return -1;
    struct header h[1 + 4] = { { "content-type", f->type } };
    size_t n = 1;
    for (size_t i = 0; i < nextra && n < sizeof h / sizeof h[0]; i++)
        h[n++] = extra[i];
    f->refs++;
    struct body_source src = { f->fd, f->content, open_file_hold, open_file_release, f };
    req_respond_file(r, status, h, n, &src, 0, f->size);
    return 0;
}

static void close_root(void *arg)
{
    struct docroot *d = arg;
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
}

/* Opens each root of c and makes its path absolute, saying where it came from; a root
 * that is the built-in default and is not there is the built-in page. */
int static_open_roots(struct config *c, struct config_errors *e)
{
    int before = e->count;
    for (uint32_t i = 0; i < c->ndocroots; i++) {
        struct docroot *d = c->docroots[i];
        char real[PATH_MAX], here[PATH_MAX];
        if (!d->path)
            continue;              /* no root: no files */
        int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int err = errno;
        if (fd >= 0) {
            if (config_on_free(c, close_root, d)) {
                close(fd);
                config_error(e, "out of memory");
                continue;
            }
            d->fd = fd;
            char *abs = realpath(d->path, real) ? sc_malloc(strlen(real) + 1) : NULL;
            if (abs && !config_on_free(c, sc_free, abs)) {
                strcpy(abs, real);
                log_msg(LOG_INFO, "root %s (%s) resolved to %s", d->path, d->from, abs);
                d->path = abs;
            } else {
                sc_free(abs);
            }
            continue;
        }
        /* A relative root is taken from the directory h2park started in: say which. */
        char where[PATH_MAX + 32] = "";
        if (d->path[0] != '/' && getcwd(here, sizeof here))
            snprintf(where, sizeof where, " resolved against %s", here);
        if (d->builtin_default) {
            log_msg(LOG_WARN, "root %s (%s)%s: %s; / serves the built-in page (set root to serve files)", d->path,
                    d->from, where, strerror(err));
            continue;
        }
        config_error(e, "root %s (%s)%s: %s", d->path, d->from, where, strerror(err));
    }
    return e->count > before ? -1 : 0;
}

/* On each worker as it takes a configuration: what it cached came from the old roots. */
void static_configure(void) { static_sweep(INFINITY); }
