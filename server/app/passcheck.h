/* Password checks on a pool of threads (passcheck.c): crypt_rn off the event loop. */
#ifndef H2PARK_PASSCHECK_H
#define H2PARK_PASSCHECK_H

#include <stddef.h>

enum { PASSCHECK_PENDING = -1, PASSCHECK_NO = 0, PASSCHECK_YES = 1 };

struct passcheck;
/* Queues a check of password (len bytes, no NUL in it) against hash, a crypt(3) string;
 * NULL when the queue is full (or without memory or a thread): refuse, do not wait. */
struct passcheck *passcheck_start(const char *hash, const char *password, size_t len);
/* Readable once the result is in. */
int passcheck_fd(const struct passcheck *k);
/* PASSCHECK_YES, PASSCHECK_NO, or PASSCHECK_PENDING while it runs. */
int passcheck_result(const struct passcheck *k);
/* The caller lets go (the result read, or its client gone): freed once the pool has too. */
void passcheck_release(struct passcheck *k);
/* Checks waiting for a thread. */
unsigned passcheck_queued(void);

#endif
