/* Fuzz target: a peer's bytes on the cleartext port - protocol detection, the h2c
 * preface and nghttp2, HTTP/1.1 and Upgrade: h2c, the handlers and routes behind them.
 * The first byte chooses whether the peer then closes its side or goes silent. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_daemon_init();
    if (size == 0)
        return 0;
    fuzz_connection(data + 1, size - 1, data[0] & 1);
    return 0;
}
