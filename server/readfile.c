/* Reading a file the configuration names, without ever waiting for it.
 *
 * A certificate, a key or a CA file is read whole into memory here and handed to OpenSSL
 * from there (pem.c), and so is the config file: opening a FIFO for reading waits for a
 * writer, and reading a character device may never end, so a FIFO named as a certificate
 * hung --check, and after a SIGHUP the daemon's main thread (no later reload applied, and
 * SIGTERM could not stop it).  The file is opened O_NONBLOCK - which returns at once
 * whatever the file is - and checked with fstat on that descriptor before one byte is
 * read; what is then read is what was checked (OpenSSL's *_file functions opened the
 * path again themselves). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "readfile.h"

const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "not a regular file";
}

int read_regular_file(const char *path, struct buf *out, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return snprintf(why, whylen, "%s", strerror(errno)), -1;
    struct stat st;
    if (fstat(fd, &st)) {
        snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s, not a regular file", file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    /* Read to the end, not to st_size: a file may grow meanwhile, and must not pass the cap. */
    int rc = 0;
    for (;;) {
        if (out->len > READFILE_MAX) {
            snprintf(why, whylen, "larger than %u MiB", READFILE_MAX >> 20);
            rc = -1;
            break;
        }
        if (out->cap - out->len < 4096 && buf_reserve(out, 65536)) {
            snprintf(why, whylen, "out of memory");
            rc = -1;
            break;
        }
        ssize_t n = read(fd, out->data + out->len, out->cap - out->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        out->len += (size_t)n;
    }
    close(fd);
    if (rc)
        buf_free(out);
    return rc;
}
