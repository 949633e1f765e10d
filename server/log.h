/* Logging: levelled lines on stderr, and the access log (log.c).  The level is the
 * log's own (log_set_level), not read from any configuration. */
#ifndef H2PARK_LOG_H
#define H2PARK_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* log_msg at most once a second per *last. */
void log_rate_limited(int level, time_t *last, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int log_level_parse(const char *s);
void log_set_level(int level);
bool log_enabled(int level);
/* Opens path (""/NULL: none) as the access log, in place of the last one; 0, or -1 with why. */
int access_log_open(const char *path, char *why, size_t whylen);
bool access_log_enabled(void);
void access_log_write(const char *line, size_t len);

#endif
