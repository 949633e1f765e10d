/* Becoming an unprivileged user after start (privileges.c). */
#ifndef H2PARK_PRIVILEGES_H
#define H2PARK_PRIVILEGES_H

#include <stddef.h>

/* Switches to user (uid, gid, groups) if it is not ""; -1 with err if that fails. */
int privileges_drop(const char *user, char *err, size_t errlen);

#endif
