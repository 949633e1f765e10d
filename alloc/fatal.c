/* Fatal errors: a message on stderr and abort.
 *
 * Every layer of the allocator calls this and it calls nothing of the allocator, so it sits
 * below the page heap.  It must not allocate either - it reports broken heaps and runs
 * inside malloc - so the message is formatted into a buffer on the stack and written with
 * write(2), not stdio. */
#include <stdarg.h>
#include <unistd.h>

#include "internal.h"

void sc_fatal(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof buf - 2)
        n = sizeof buf - 2;
    buf[n++] = '\n';
    if (write(2, "scalloc: ", 9) < 0 || write(2, buf, (size_t)n) < 0)
        abort();
    abort();
}
