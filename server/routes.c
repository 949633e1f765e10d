/* Request routing: the built-in routes and static files under root.
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
 * failure to open for lack of descriptors is 503 and a log line, never a 404. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "h2park.h"
#include "scalloc.h"

#define MAX_DELAY_MS 60000
#define ECHO_CHUNK 8192
#define OPEN_FILES OPEN_FILE_SLOTS
#define OPEN_FILE_TTL 1.0
#define SMALL_FILE 16384         /* 256 slots: at most 4 MiB of copies per worker */

static int root_fd = -1;
static void open_files_sweep(ev_tstamp now);

struct open_file {
    char *path;                /* the decoded request path */
    int fd;
    int refs;                  /* streams sending from fd */
    bool evicted;              /* out of the table: close when the last stream is done */
    ev_tstamp expires;
    time_t mtime;
    int64_t size;
    char *content;             /* the whole file if it is small, else NULL */
    const char *type;
    char length[24], modified[40];
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

void open_file_release(struct open_file *f)
{
    if (--f->refs == 0 && f->evicted)
        open_file_free(f);
}

int routes_init(char *err, size_t errlen)
{
    root_fd = open(cfg.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) {
        snprintf(err, errlen, "root %s: %s", cfg.root, strerror(errno));
        return -1;
    }
    worker_tick_hook = open_files_sweep;
    return 0;
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

static void simple_text(struct stream *s, int status, const char *text)
{
    h2_simple(s, status, "text/plain; charset=utf-8", text, strlen(text));
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
    snprintf(f->length, sizeof f->length, "%lld", (long long)st.st_size);
    http_date(st.st_mtime, f->modified, sizeof f->modified);
    return 0;
}

/* The cache entry for rel, opened now if it is missing or older than OPEN_FILE_TTL;
 * NULL with *err set (ENOENT, EMFILE, ENFILE, ENOMEM) if there is none. */
static struct open_file *open_file_get(const char *rel, ev_tstamp now, int *err)
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
static void open_files_sweep(ev_tstamp now)
{
    for (unsigned i = 0; open_files && i < OPEN_FILES; i++) {
        struct open_file *f = open_files[i];
        if (f && f->expires <= now) {
            open_files[i] = NULL;
            open_file_evict(f);
        }
    }
}

static void serve_static(struct stream *s)
{
    if (strcmp(s->method, "GET") && strcmp(s->method, "HEAD")) {
        struct h2_header h[] = { { "allow", "GET, HEAD" }, { "content-length", "0" } };
        h2_respond(s, 405, h, 2, false);
        return;
    }
    char rel[2048];
    if (path_decode(s->path, rel, sizeof rel - 16)) {
        simple_text(s, 404, "not found\n");
        return;
    }
    int err;
    struct open_file *f = open_file_get(rel, ev_now(s->c->w->loop), &err);
    if (!f && err == ENOENT) {
        simple_text(s, 404, "not found\n");
        return;
    }
    if (!f) {
        log_rate_limited(LOG_ERROR, &s->c->w->emfile_logged, "cannot open files under root: %s (raise the open-file limit or lower max_conns)",
                         strerror(err));
        struct h2_header h[] = { { "retry-after", "1" } };
        h2_respond(s, 503, h, 1, false);
        return;
    }
    /* A date in the future is no validator (RFC 9110 section 13.1.3): ignored. */
    if (s->if_modified_since >= 0 && s->if_modified_since <= (int64_t)time(NULL) && f->mtime <= s->if_modified_since) {
        struct h2_header h[] = { { "last-modified", f->modified } };
        h2_respond(s, 304, h, 1, false);
        return;
    }
    struct h2_header h[] = {
        { "content-type", f->type }, { "content-length", f->length }, { "last-modified", f->modified },
    };
    s->file = f;
    s->file_mem = f->content;
    f->refs++;
    h2_respond_file(s, 200, h, 3, f->fd, 0, s->head ? 0 : f->size);
}

static void route_echo(struct stream *s)
{
    if (strcmp(s->method, "POST")) {
        struct h2_header h[] = { { "allow", "POST" }, { "content-length", "0" } };
        h2_respond(s, 405, h, 2, false);
        return;
    }
    char length[24];
    struct h2_header h[2] = { { "content-type", "application/octet-stream" }, { "content-length", length } };
    size_t nh = 1;
    if (s->content_length >= 0) {
        snprintf(length, sizeof length, "%lld", (long long)s->content_length);
        nh = 2;
    }
    if (h2_respond(s, 200, h, nh, true))
        return;
    char chunk[ECHO_CHUNK];
    ssize_t n;
    while ((n = h2_read_body(s, chunk, sizeof chunk)) > 0)
        if (h2_write(s, chunk, (size_t)n))
            return;
    if (n == 0)
        h2_end(s);
}

static long query_int(const char *path, const char *key)
{
    const char *q = strchr(path, '?');
    size_t kl = strlen(key);
    while (q) {
        q++;
        if (!strncmp(q, key, kl) && q[kl] == '=') {
            char *end;
            long v = strtol(q + kl + 1, &end, 10);
            if (end != q + kl + 1 && (*end == 0 || *end == '&'))
                return v;
            return -1;
        }
        q = strchr(q, '&');
    }
    return -1;
}

static void route_delay(struct stream *s)
{
    long ms = query_int(s->path, "ms");
    if (ms < 0 || ms > MAX_DELAY_MS) {
        simple_text(s, 400, "ms must be 0..60000\n");
        return;
    }
    h2_sleep(s, (double)ms / 1000.0);
    char text[48];
    snprintf(text, sizeof text, "waited %ld ms\n", ms);
    simple_text(s, 200, text);
}

static void route_stats(struct stream *s, bool prometheus)
{
    char text[4096];
    size_t n = prometheus ? stats_prometheus(text, sizeof text) : stats_json(text, sizeof text);
    h2_simple(s, 200, prometheus ? "text/plain; version=0.0.4" : "application/json", text, n);
}

static bool path_is(const char *path, const char *want)
{
    size_t l = strlen(want);
    return !strncmp(path, want, l) && (path[l] == 0 || path[l] == '?');
}

void route_request(struct stream *s)
{
    if (!s->method || !s->path) {
        simple_text(s, 400, "bad request\n");
        return;
    }
    if (cfg.builtin_routes) {
        bool get = !strcmp(s->method, "GET") || !strcmp(s->method, "HEAD");
        const char *p = s->path;
        if (path_is(p, "/-/echo"))
            return route_echo(s);
        if (path_is(p, "/-/healthz") || path_is(p, "/-/stats") || path_is(p, "/metrics") || path_is(p, "/-/delay")) {
            if (!get) {
                struct h2_header h[] = { { "allow", "GET, HEAD" }, { "content-length", "0" } };
                h2_respond(s, 405, h, 2, false);
                return;
            }
            if (path_is(p, "/-/healthz"))
                return simple_text(s, 200, "ok");
            if (path_is(p, "/-/delay"))
                return route_delay(s);
            return route_stats(s, path_is(p, "/metrics"));
        }
    }
    serve_static(s);
}
