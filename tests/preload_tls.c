/* A library with thread-local storage of its own, for tests/preload_corners.c: loaded with
 * dlopen, under many names, its TLS is allocated by the dynamic linker with the process's
 * malloc (the dynamic thread vector and each thread's block), which LD_PRELOAD makes
 * scalloc's. */
#include <string.h>

static __thread char block[3000];
static __thread int touched;

/* Writes and reads this thread's block: n if the block is the thread's own, intact. */
int preload_tls_touch(int n)
{
    if (!touched) {
        memset(block, n & 0xff, sizeof block);
        touched = n;
    }
    for (size_t i = 0; i < sizeof block; i++)
        if (block[i] != (char)(touched & 0xff))
            return -1;
    return touched;
}
