/* directory_listing: the HTML index of a directory that has no index file (nginx's
 * autoindex), opt-in per location.
 *
 * Names come from the file system, which is hostile input like the request: each is
 * escaped for HTML and percent-encoded for its link, so a file named
 * "<script>" or "a\"b" lists as text.  Dotfiles are left out unless the location
 * allows them, entries that are neither files nor directories (sockets, FIFOs,
 * devices, symlinks, which would be refused anyway) are left out, and a directory of
 * more than LISTING_MAX entries lists the first LISTING_MAX in name order, so one
 * request cannot make a worker build an unbounded page. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "httpdate.h"
#include "scalloc.h"

#define LISTING_MAX 10000
#define LIT(b, s) buf_append(b, s, sizeof s - 1)

struct entry {
    char *name;
    bool dir;
    int64_t size;
    time_t mtime;
};

static int by_name(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->dir != y->dir)
        return x->dir ? -1 : 1;    /* directories first */
    return strcmp(x->name, y->name);
}

static void put_html(struct buf *b, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;"
                        : *s == '\'' ? "&#39;" : NULL;
        if (e)
            buf_append(b, e, strlen(e));
        else
            buf_append(b, s, 1);
    }
}

static void put_url(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
            buf_append(b, (const char *)p, 1);
        } else {
            char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
            buf_append(b, e, 3);
        }
    }
}

void listing_serve(struct request *r, int fd, const char *path, bool show_dotfiles)
{
    int copy = dup(fd);
    DIR *dir = copy >= 0 ? fdopendir(copy) : NULL;
    if (!dir) {
        if (copy >= 0)
            close(copy);
        app_error(r, 404);
        return;
    }
    struct entry *list = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(dir)) && n < LISTING_MAX;) {
        if (de->d_name[0] == '.' && (!show_dotfiles || !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
            continue;
        struct stat st;
        if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct entry *bigger = sc_realloc(list, cap * sizeof *list);
            if (!bigger)
                break;
            list = bigger;
        }
        if (!(list[n].name = sc_malloc(strlen(de->d_name) + 1)))
            break;
        strcpy(list[n].name, de->d_name);
        list[n].dir = S_ISDIR(st.st_mode);
        list[n].size = st.st_size;
        list[n].mtime = st.st_mtime;
        n++;
    }
    closedir(dir);
    qsort(list, n, sizeof *list, by_name);
    struct buf b = { 0 };
    static const char head[] = "<!doctype html>\n<meta charset=\"utf-8\">\n<title>Index of ";
    buf_append(&b, head, sizeof head - 1);
    put_html(&b, path);
    LIT(&b, "</title>\n<h1>Index of ");
    put_html(&b, path);
    LIT(&b, "</h1>\n<table>\n");
    if (strcmp(path, "/"))
        LIT(&b, "<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    for (size_t i = 0; i < n; i++) {
        char when[HTTP_DATE_LEN + 1], size[32];
        http_date_format(list[i].mtime, when);
        snprintf(size, sizeof size, "%" PRId64, list[i].size);
        LIT(&b, "<tr><td><a href=\"");
        put_url(&b, list[i].name);
        if (list[i].dir)
            LIT(&b, "/\">");
        else
            LIT(&b, "\">");
        put_html(&b, list[i].name);
        if (list[i].dir)
            LIT(&b, "/</a></td><td>");
        else
            LIT(&b, "</a></td><td>");
        buf_append(&b, when, strlen(when));
        LIT(&b, "</td><td>");
        if (!list[i].dir)
            buf_append(&b, size, strlen(size));
        LIT(&b, "</td></tr>\n");
        sc_free(list[i].name);
    }
    sc_free(list);
    LIT(&b, "</table>\n");
    struct header h[] = { { "content-type", "text/html; charset=utf-8" }, { "cache-control", "no-cache" } };
    if (req_respond(r, 200, h, 2, (int64_t)b.len) == 0 && !req_is_head(r)) {
        req_write(r, b.data, b.len);
        req_end(r);
    }
    buf_free(&b);
}
