/* Fuzz target: the HTTP/1.1 request path - an input that starts like an HTTP/1.1 request
 * line (the method chosen by the first byte) and goes on as the fuzzer likes: heads,
 * Upgrade: h2c, bodies, pipelined requests. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = { "GET ", "HEAD ", "POST ", "PUT ", "OPTIONS ", "DELETE " };
    fuzz_daemon_init();
    if (size == 0)
        return 0;
    const char *m = methods[data[0] % (sizeof methods / sizeof methods[0])];
    size_t ml = strlen(m);
    uint8_t *in = malloc(ml + size - 1);
    if (!in)
        return 0;
    memcpy(in, m, ml);
    memcpy(in + ml, data + 1, size - 1);
    fuzz_connection(in, ml + size - 1, data[0] & 0x80);
    free(in);
    return 0;
}
