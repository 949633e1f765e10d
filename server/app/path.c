/* A request path resolved beneath root: percent-decoding, then opening.
 *
 * Decoding fails on a bad escape, a NUL (encoded or not) and any "." or ".." segment,
 * so no spelling of a path - dots, encoded dots, encoded slashes - names a parent; it
 * merges runs of slashes, so no spelling dodges a location either.  A dotfile is any
 * segment that begins with a dot, but for ".well-known" (RFC 8615: ACME challenges,
 * security.txt), which is meant to be served.
 * Opening uses openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) against a descriptor of
 * root, so a symlink anywhere on the way fails too; kernels without openat2 fall back to
 * O_NOFOLLOW on every component.  Files open with O_NONBLOCK: opening a FIFO must not
 * block the worker (the caller serves regular files only). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "app/app.h"

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Bytes a path copies as they are: all but the end of the path (NUL, '?', '#'), an
 * escape and a slash. */
static const bool path_plain[256] = {
    [1 ... 0x22] = true, [0x24] = true, [0x26 ... 0x2e] = true, [0x30 ... 0x3e] = true, [0x40 ... 0xff] = true,
};

static bool dot_segment(const char *seg, size_t len)
{
    return (len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.');
}

/* Decodes the path part of target into out: "/a/b", always one leading slash, runs of
 * slashes merged (an encoded one too), so that locations match it whatever the spelling.
 * Fails on bad escapes, NUL, and any "." or ".." segment - of the decoded path, so an
 * encoded slash separates segments too.  One pass: each segment is judged as its slash
 * is written.  Returns the length; *dotted (if not NULL) says whether a segment begins
 * with a dot, which path_has_dotfile then judges. */
int path_decode(const char *target, char *out, size_t cap, bool *dotted)
{
    if (cap < 2)
        return -1;
    /* Pointers, not indexes: gcc keeps the copying loop at eight instructions a byte. */
    char *o = out, *last = out + cap - 1, *seg = out + 1;   /* last: the NUL's place at most */
    bool dot = false;
    *o++ = '/';
    for (const unsigned char *p = (const unsigned char *)target;;) {
        int ch = *p;
        if (path_plain[ch]) {      /* most bytes: copied as they are */
            if (o == last)
                return -1;
            *o++ = (char)ch;
            p++;
            continue;
        }
        if (ch == 0 || ch == '?' || ch == '#')
            break;
        p++;
        if (ch == '%') {
            int hi = hexval(p[0]), lo = hi < 0 ? -1 : hexval(p[1]);
            if (lo < 0)
                return -1;
            ch = hi * 16 + lo;
            p += 2;
            if (ch == 0 || o == last)
                return -1;
            if (ch != '/') {
                *o++ = (char)ch;
                continue;
            }
        }
        /* A slash, sent or decoded: it ends a segment, which is judged now. */
        if (o == last)
            return -1;
        if (o[-1] == '/')
            continue;
        *o++ = '/';
        if (dot_segment(seg, (size_t)(o - 1 - seg)))
            return -1;
        dot |= *seg == '.';
        seg = o;
    }
    *o = 0;
    if (dotted)
        *dotted = dot || *seg == '.';
    return dot_segment(seg, (size_t)(o - seg)) ? -1 : (int)(o - out);
}

/* What a URL carries as it is (RFC 3986 2.2, 2.3): unreserved, sub-delims, ':', '@' and
 * '/'; in a target as sent, '%' and '?' too (it is escaped already, and has its query). */
static const char url_kept[] = "-._~!$&'()*+,;=:@/";

size_t url_escape(char *out, size_t cap, const char *s, size_t n, bool decoded)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool kept = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    (c && strchr(url_kept, c)) || (!decoded && (c == '%' || c == '?'));
        char e[3] = { '%', hex[c >> 4], hex[c & 15] };
        size_t k = kept ? 1 : 3;
        if (len + k < cap)
            memcpy(out + len, kept ? (const char *)&s[i] : e, k);
        len += k;
    }
    if (cap)
        out[len < cap ? len : cap - 1] = 0;
    return len;
}

bool path_has_dotfile(const char *path)
{
    for (const char *p = path; *p; p++) {
        if (p[0] != '/' || p[1] != '.')
            continue;              /* a byte at a time: paths are short, a call per segment is not */
        if (strncmp(p + 1, ".well-known", 11) != 0)
            return true;
        if (p[12] != '/' && p[12] != 0)
            return true;           /* ".well-knownX" is a dotfile like any other */
    }
    return false;
}

int path_open_beneath(int root_fd, const char *rel)
{
    static _Atomic int have_openat2 = 1;    /* learned once, by any worker */
    const char *path = *rel ? rel : ".";
    if (have_openat2) {
        struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS)
            return fd;
        have_openat2 = 0;
    }
    /* Walk component by component, refusing symlinks at every step. */
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int dir = dup(root_fd);
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, "..")) {     /* decoding refuses it; refused here too, whoever calls */
            close(dir);
            errno = EACCES;
            return -1;
        }
        int next = openat(dir, part, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        close(dir);
        if (next < 0)
            return -1;
        dir = next;
    }
    return dir;
}

