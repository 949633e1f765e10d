/* Static files under root.
 *
 * Static paths are resolved beneath root by path.c; everything that would leave it is a
 * 404, like a file that is not there.
 *
 * Each worker keeps the files it served open for a second (like nginx's open_file_cache),
 * with their headers already formatted, and files of up to SMALL_FILE bytes read into
 * memory: a cached small file costs no system call per response, a larger one a pread
 * instead of open, fstat, pread and close.  A changed file is seen within a second, and
 * a small file's headers and body always come from the same reading.  Expired entries
 * are closed by a sweep every second, so a deleted or replaced file is not held open.
 *
 * Anything under root is hostile input too: files are opened with O_NONBLOCK (a FIFO
 * would otherwise block the worker in open) and only regular files are served; a
 * failure to open for lack of descriptors is 503 and a log line, never a 404.
 *
 * Each worker opens root itself whenever it takes a configuration (a reload may move
 * it), and empties its cache then.  A root left at the built-in default that is not
 * there is no root at all: / answers with the page built into the binary. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/app.h"
#include "config.h"
#include "log.h"
#include "scalloc.h"

#define OPEN_FILES OPEN_FILE_SLOTS
#define OPEN_FILE_TTL 1.0
#define SMALL_FILE 16384         /* 256 slots: at most 4 MiB of copies per worker */

static __thread int root_fd = -1;
extern const char builtin_page_text[];
extern const unsigned builtin_page_size;

struct open_file {
    char *path;                /* the decoded request path */
    int fd;
    int refs;                  /* streams sending from fd */
    bool evicted;              /* out of the table: close when the last stream is done */
    double expires;
    time_t mtime;
    int64_t size;
    char *content;             /* the whole file if it is small, else NULL */
    const char *type;
    char modified[40];
};

static __thread struct open_file **open_files;  /* OPEN_FILES slots per worker */

static void open_file_free(struct open_file *f)
{
    close(f->fd);
    sc_free(f->content);
    sc_free(f->path);
    sc_free(f);
}

/* Out of the table; closed now, or when the last stream sending from it is done. */
static void open_file_evict(struct open_file *f)
{
    f->evicted = true;
    if (f->refs == 0)
        open_file_free(f);
}

static void open_file_release(struct open_file *f)
{
    if (--f->refs == 0 && f->evicted)
        open_file_free(f);
}

static const struct { const char *ext, *type; } mime_types[] = {
    { "html", "text/html; charset=utf-8" }, { "htm", "text/html; charset=utf-8" },
    { "css", "text/css" }, { "js", "text/javascript" }, { "mjs", "text/javascript" },
    { "json", "application/json" }, { "txt", "text/plain; charset=utf-8" }, { "xml", "application/xml" },
    { "svg", "image/svg+xml" }, { "png", "image/png" }, { "jpg", "image/jpeg" }, { "jpeg", "image/jpeg" },
    { "gif", "image/gif" }, { "webp", "image/webp" }, { "ico", "image/x-icon" }, { "avif", "image/avif" },
    { "wasm", "application/wasm" }, { "pdf", "application/pdf" }, { "zip", "application/zip" },
    { "gz", "application/gzip" }, { "mp4", "video/mp4" }, { "webm", "video/webm" }, { "mp3", "audio/mpeg" },
    { "woff", "font/woff" }, { "woff2", "font/woff2" }, { "csv", "text/csv" }, { "md", "text/markdown" },
};

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < sizeof mime_types / sizeof mime_types[0]; i++)
            if (!strcasecmp(dot + 1, mime_types[i].ext))
                return mime_types[i].type;
    return "application/octet-stream";
}


static void http_date(time_t t, char *out, size_t cap)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static unsigned path_hash(const char *p)
{
    unsigned h = 2166136261u;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

static bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE; }

/* Opens rel (a directory means its index.html) and fills f.  0, or an errno: ENOENT
 * for anything that is not a regular file, EMFILE or ENFILE when descriptors ran out. */
static int open_file_fill(struct open_file *f, const char *rel)
{
    char path[2048];
    snprintf(path, sizeof path, "%s", rel);
    int fd = path_open_beneath(root_fd, path);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t l = strlen(path);
        snprintf(path + l, sizeof path - l, "%sindex.html", l && path[l - 1] != '/' ? "/" : "");
        close(fd);
        fd = path_open_beneath(root_fd, path);
        if (fd >= 0 && fstat(fd, &st) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0 || !S_ISREG(st.st_mode)) {
        int err = fd < 0 && out_of_descriptors(errno) ? errno : ENOENT;
        if (fd >= 0)
            close(fd);
        return err;
    }
    f->fd = fd;
    f->mtime = st.st_mtime;
    f->size = st.st_size;
    if (st.st_size > 0 && st.st_size <= SMALL_FILE && (f->content = sc_malloc((size_t)st.st_size)) &&
        pread(fd, f->content, (size_t)st.st_size, 0) != st.st_size) {
        sc_free(f->content);   /* changing under us: send from the descriptor */
        f->content = NULL;
    }
    f->type = content_type(path);
    http_date(st.st_mtime, f->modified, sizeof f->modified);
    return 0;
}

/* The cache entry for rel, opened now if it is missing or older than OPEN_FILE_TTL;
 * NULL with *err set (ENOENT, EMFILE, ENFILE, ENOMEM) if there is none. */
static struct open_file *open_file_get(const char *rel, double now, int *err)
{
    *err = ENOMEM;
    if (!open_files && !(open_files = sc_calloc(OPEN_FILES, sizeof *open_files)))
        return NULL;
    struct open_file **slot = &open_files[path_hash(rel) % OPEN_FILES];
    struct open_file *f = *slot;
    if (f && f->expires > now && !strcmp(f->path, rel))
        return f;
    if (f) {
        *slot = NULL;
        open_file_evict(f);
    }
    if (!(f = sc_calloc(1, sizeof *f)))
        return NULL;
    if ((*err = open_file_fill(f, rel)) || !(f->path = sc_malloc(strlen(rel) + 1))) {
        if (!*err)
            *err = ENOMEM;
        if (f->fd > 0)
            close(f->fd);
        sc_free(f->content);
        sc_free(f);
        return NULL;
    }
    strcpy(f->path, rel);
    f->expires = now + OPEN_FILE_TTL;
    *slot = f;
    return f;
}

/* Closes the entries that expired (called every second by the worker). */
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

/* An HTTP-date in any of the three forms RFC 9110 section 5.6.7 requires a recipient to
 * accept: IMF-fixdate, the obsolete RFC 850 form and asctime's.  -1 if none fits. */
static int64_t parse_http_date(const char *v)
{
    static const char *const forms[] = { "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                         "%a %b %e %H:%M:%S %Y" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(v, forms[i], &tm);
        if (!end || *end)
            continue;
        int64_t t = (int64_t)timegm(&tm);
        /* RFC 850's two-digit year: one more than 50 years ahead is in the past century. */
        if (i == 1 && t > (int64_t)time(NULL) + 50ll * 366 * 86400) {
            tm.tm_year -= 100;
            t = (int64_t)timegm(&tm);
        }
        return t;
    }
    return -1;
}

static void release_file(void *arg) { open_file_release(arg); }


void static_serve(struct request *r)
{
    const char *m = req_method(r);
    if (strcmp(m, "GET") && strcmp(m, "HEAD")) {
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
    struct open_file *f = open_file_get(rel, req_now(r), &err);
    if (!f && err == ENOENT) {
        reply_text(r, 404, "not found\n");
        return;
    }
    if (!f) {
        static __thread time_t logged;
        log_rate_limited(LOG_ERROR, &logged, "cannot open files under root: %s (raise the open-file limit or lower max_conns)",
                         strerror(err));
        struct header h[] = { { "retry-after", "1" } };
        req_respond(r, 503, h, 1, BODY_NONE);
        return;
    }
    /* A date in the future is no validator (RFC 9110 section 13.1.3): ignored. */
    const char *ims = req_header(r, "if-modified-since");
    int64_t since = ims ? parse_http_date(ims) : -1;
    if (since >= 0 && since <= (int64_t)time(NULL) && f->mtime <= since) {
        struct header h[] = { { "last-modified", f->modified } };
        req_respond(r, 304, h, 1, BODY_NONE);
        return;
    }
    struct header h[] = { { "content-type", f->type }, { "last-modified", f->modified } };
    f->refs++;
    req_respond_file(r, 200, h, 2, f->fd, f->content, 0, f->size, release_file, f);
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
