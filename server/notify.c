/* sd_notify(3) without libsystemd: one datagram of "KEY=value" lines to the AF_UNIX
 * socket named in NOTIFY_SOCKET (a path, or an abstract name when it begins with '@').
 * Without NOTIFY_SOCKET, or if the datagram cannot go, nothing happens: readiness
 * reports are a courtesy to the service manager, never a reason to stop serving. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

void notify_service_manager(const char *fmt, ...)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = path ? strlen(path) : 0;
    if (n < 2 || n >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@'))
        return;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = 0;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof msg)
        return;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (sendto(fd, msg, (size_t)len, MSG_NOSIGNAL, (struct sockaddr *)&sa,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0) {
        /* the manager is gone or was never there: nothing to do */
    }
    close(fd);
}
