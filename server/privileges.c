/* user = NAME: h2park starts as root to bind its ports and read its key, then becomes
 * NAME - its uid, its primary group and its supplementary groups - before any worker
 * thread exists and before it opens root or the access log, which it then reads and
 * writes as NAME, as it will on every reload.  Afterwards it checks that root cannot be
 * had back.  (Under systemd, DynamicUser and the socket unit need none of this.) */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "privileges.h"

int privileges_drop(const char *user, char *err, size_t errlen)
{
    if (!*user)
        return 0;
    struct passwd pw, *found = NULL;
    char buf[4096];
    int e = getpwnam_r(user, &pw, buf, sizeof buf, &found);
    if (!found) {
        snprintf(err, errlen, "user %s: %s", user, e ? strerror(e) : "no such user");
        return -1;
    }
    if (geteuid() == pw.pw_uid && getuid() == pw.pw_uid)
        return 0;                            /* started as that user already */
    if (geteuid() != 0) {
        snprintf(err, errlen, "user %s: h2park runs as uid %u, and only root can become another user", user,
                 (unsigned)geteuid());
        return -1;
    }
    if (initgroups(user, pw.pw_gid) || setgid(pw.pw_gid) || setuid(pw.pw_uid)) {
        snprintf(err, errlen, "user %s: cannot switch: %s", user, strerror(errno));
        return -1;
    }
    if (setuid(0) == 0) {
        snprintf(err, errlen, "user %s: root could be had back after switching", user);
        return -1;
    }
    log_msg(LOG_INFO, "running as user %s (uid %u, gid %u)", user, (unsigned)pw.pw_uid, (unsigned)pw.pw_gid);
    return 0;
}
