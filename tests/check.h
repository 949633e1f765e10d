/* A minimal test harness: each TEST prints "ok NAME" or "FAIL NAME: file:line: what",
 * and tests/run.sh counts those lines across every test program.  A CHECK that fails
 * ends its test at once; the program goes on with the next one. */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failed_now, check_failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            printf("FAIL %s: %s:%d: %s\n", check_current, __FILE__, __LINE__, #cond); \
            check_failed_now = 1;                                                   \
            return;                                                                 \
        }                                                                           \
    } while (0)

#define CHECKF(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            printf("FAIL %s: %s:%d: %s: ", check_current, __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                                    \
            printf("\n");                                                           \
            check_failed_now = 1;                                                   \
            return;                                                                 \
        }                                                                           \
    } while (0)

static const char *check_current = "";

#define RUN(fn)                                                 \
    do {                                                        \
        check_current = #fn;                                    \
        check_failed_now = 0;                                   \
        fflush(stdout);                                         \
        fn();                                                   \
        if (!check_failed_now)                                  \
            printf("ok %s\n", #fn);                             \
        else                                                    \
            check_failures++;                                   \
        fflush(stdout);                                         \
    } while (0)

#define CHECK_DONE() return check_failures ? 1 : 0

#endif
