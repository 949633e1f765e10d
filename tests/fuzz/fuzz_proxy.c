/* Fuzz target: the PROXY protocol header.  The parser's verdict on any bytes is
 * consistent - a header's length fits the input and the stage's bound, parsing exactly
 * the header gives the same verdict, a shorter prefix of it asks for more, an address
 * it takes is IPv4 or IPv6 - and the same bytes then go through the real connection
 * path of a proxy_protocol listener (the stage, then detection and the protocols). */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "core/conn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_daemon_init();
    struct sockaddr_storage client, again;
    int r = proxy_parse(data, size, &client);
    if (r < -1 || (size_t)(r > 0 ? r : 0) > size || r > PROXY_HEADER_MAX)
        abort();
    if (r > 0) {
        if (proxy_parse(data, (size_t)r, &again) != r || memcmp(&client, &again, sizeof client))
            abort();
        if (proxy_parse(data, (size_t)r - 1, &again) != 0)
            abort();
        if (client.ss_family != 0 && client.ss_family != AF_INET && client.ss_family != AF_INET6)
            abort();
    }
    if (r == 0 && size > 0 && proxy_parse(data, size - 1, &again) != 0)
        abort();                 /* what needs more did not fail on less */
    fuzz_connection_flags(data, size, size % 2, CONN_PROXY_PROTOCOL);
    return 0;
}
