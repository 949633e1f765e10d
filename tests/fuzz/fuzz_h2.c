/* Fuzz target: HTTP/2 frames after a valid preface, so that the fuzzer spends its time
 * on frames rather than on finding the 24-byte preface. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
#define PREFACE_LEN (sizeof preface - 1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_daemon_init();
    uint8_t *in = malloc(PREFACE_LEN + size);
    if (!in)
        return 0;
    memcpy(in, preface, PREFACE_LEN);
    memcpy(in + PREFACE_LEN, data, size);
    fuzz_connection(in, PREFACE_LEN + size, size && (data[0] & 1));
    free(in);
    return 0;
}
