/* Content-Type by file extension: a built-in table of the common web types, then
 * /etc/mime.types (Debian's media-types) for extensions the table does not know, read
 * once at start.  The built-in table decides for the types browsers care about
 * (text/javascript, charset on text) whatever the system file says. */
#define _GNU_SOURCE
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "app/app.h"
#include "scalloc.h"

static const struct { const char *ext, *type; } builtin[] = {
    { "html", "text/html; charset=utf-8" }, { "htm", "text/html; charset=utf-8" },
    { "css", "text/css; charset=utf-8" }, { "js", "text/javascript; charset=utf-8" },
    { "mjs", "text/javascript; charset=utf-8" }, { "json", "application/json" },
    { "map", "application/json" }, { "webmanifest", "application/manifest+json" },
    { "txt", "text/plain; charset=utf-8" }, { "md", "text/markdown; charset=utf-8" },
    { "csv", "text/csv; charset=utf-8" }, { "xml", "application/xml" }, { "rss", "application/rss+xml" },
    { "atom", "application/atom+xml" }, { "svg", "image/svg+xml" }, { "png", "image/png" },
    { "jpg", "image/jpeg" }, { "jpeg", "image/jpeg" }, { "gif", "image/gif" }, { "webp", "image/webp" },
    { "avif", "image/avif" }, { "ico", "image/vnd.microsoft.icon" }, { "bmp", "image/bmp" },
    { "tif", "image/tiff" }, { "tiff", "image/tiff" }, { "wasm", "application/wasm" },
    { "pdf", "application/pdf" }, { "zip", "application/zip" }, { "gz", "application/gzip" },
    { "tgz", "application/gzip" }, { "br", "application/octet-stream" }, { "tar", "application/x-tar" },
    { "xz", "application/x-xz" }, { "zst", "application/zstd" }, { "7z", "application/x-7z-compressed" },
    { "mp4", "video/mp4" }, { "m4v", "video/mp4" }, { "webm", "video/webm" }, { "ogv", "video/ogg" },
    { "mov", "video/quicktime" }, { "mkv", "video/x-matroska" }, { "mp3", "audio/mpeg" },
    { "m4a", "audio/mp4" }, { "ogg", "audio/ogg" }, { "oga", "audio/ogg" }, { "opus", "audio/ogg" },
    { "wav", "audio/wav" }, { "flac", "audio/flac" }, { "woff", "font/woff" }, { "woff2", "font/woff2" },
    { "ttf", "font/ttf" }, { "otf", "font/otf" }, { "eot", "application/vnd.ms-fontobject" },
    { "m3u8", "application/vnd.apple.mpegurl" }, { "ts", "video/mp2t" }, { "vtt", "text/vtt; charset=utf-8" },
    { "ics", "text/calendar; charset=utf-8" }, { "yaml", "application/yaml" }, { "yml", "application/yaml" },
    { "toml", "application/toml" }, { "wasm", "application/wasm" },
};

struct system_type {
    char *ext, *type;
};
static struct system_type *sys;
static size_t nsys;

static int cmp_sys(const void *a, const void *b)
{
    return strcasecmp(((const struct system_type *)a)->ext, ((const struct system_type *)b)->ext);
}

/* "type ext ext ..." lines; a read with open/read (no stdio, whose buffers are malloc's). */
void mime_types_load(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct buf text = { 0 };
    char chunk[8192];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0 && text.len < (4u << 20))
        buf_append(&text, chunk, (size_t)n);
    close(fd);
    buf_append(&text, "", 1);
    size_t cap = 0;
    for (char *save = NULL, *line = strtok_r(text.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (*line == '#')
            continue;
        char *s2 = NULL, *type = strtok_r(line, " \t", &s2);
        if (!type || !strchr(type, '/'))
            continue;
        for (char *ext = strtok_r(NULL, " \t", &s2); ext; ext = strtok_r(NULL, " \t", &s2)) {
            if (nsys == cap) {
                cap = cap ? cap * 2 : 256;
                struct system_type *grown = sc_realloc(sys, cap * sizeof *sys);
                if (!grown)
                    goto done;
                sys = grown;
            }
            char *e = sc_malloc(strlen(ext) + 1), *t = sc_malloc(strlen(type) + 1);
            if (!e || !t) {
                sc_free(e);
                sc_free(t);
                goto done;
            }
            strcpy(e, ext);
            strcpy(t, type);
            sys[nsys++] = (struct system_type){ e, t };
        }
    }
done:
    buf_free(&text);
    qsort(sys, nsys, sizeof *sys, cmp_sys);
}

const char *mime_type(const char *path)
{
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash) || !dot[1])
        return "application/octet-stream";
    const char *ext = dot + 1;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (!strcasecmp(ext, builtin[i].ext))
            return builtin[i].type;
    struct system_type key = { (char *)ext, NULL };
    const struct system_type *found = nsys ? bsearch(&key, sys, nsys, sizeof *sys, cmp_sys) : NULL;
    return found ? found->type : "application/octet-stream";
}
