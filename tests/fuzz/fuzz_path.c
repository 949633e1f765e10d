/* Fuzz target: percent-decoding and resolution beneath root.  A decoded path never
 * holds a NUL or a "." or ".." segment, and whatever opens is inside root: the opened
 * descriptor's own path (from /proc/self/fd) begins with root's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "app/app.h"
#include "config.h"
#include "core/conn.h"
#include "log.h"
#include "mem.h"

static int root_fd = -1;
static char root[PATH_MAX];

static void setup(void)
{
    char dir[] = "/tmp/h2park-fuzzpath-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/www", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/www/a", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/secret", dir);
    fclose(fopen(p, "w"));
    snprintf(p, sizeof p, "%s/www/a/f", dir);
    fclose(fopen(p, "w"));
    char target[PATH_MAX];
    snprintf(target, sizeof target, "%s/secret", dir);
    snprintf(p, sizeof p, "%s/www/link", dir);
    if (symlink(target, p))
        abort();
    snprintf(p, sizeof p, "%s/www/a/up", dir);
    if (symlink("../..", p))
        abort();
    snprintf(root, sizeof root, "%s/www", dir);
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (root_fd < 0)
        setup();
    char target[4096], rel[2048];
    if (size >= sizeof target)
        return 0;
    memcpy(target, data, size);
    target[size] = 0;
    char decoded[2048];
    bool dotted;
    int dl = path_decode(target, decoded, sizeof decoded, &dotted);
    if (dl < 0)
        return 0;
    if (decoded[0] != '/' || strstr(decoded, "//") || (size_t)dl != strlen(decoded))
        abort();                    /* one leading slash, runs merged */
    if (dotted != (strstr(decoded, "/.") != NULL) || (!dotted && path_has_dotfile(decoded)))
        abort();                    /* the dotfile check may trust dotted */
    snprintf(rel, sizeof rel, "%s", decoded + 1);
    size_t n = strlen(rel);
    for (size_t i = 0; i <= n; i++) {
        size_t j = i;
        while (j < n && rel[j] != '/')
            j++;
        size_t seg = j - i;
        if ((seg == 1 && rel[i] == '.') || (seg == 2 && rel[i] == '.' && rel[i + 1] == '.'))
            abort();
        i = j;
    }
    int fd = path_open_beneath(root_fd, rel);
    if (fd >= 0) {
        char link[64], where[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t l = readlink(link, where, sizeof where - 1);
        if (l < 0)
            abort();
        where[l] = 0;
        size_t rl = strlen(root);
        if (strncmp(where, root, rl) || (where[rl] && where[rl] != '/'))
            abort();            /* escaped root */
        close(fd);
    }
    return 0;
}
