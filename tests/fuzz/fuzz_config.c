/* Fuzz target: the configuration parser.  Whatever a file holds, config_parse either
 * accepts it or names file, line and problem; it never writes past its buffers, and a
 * configuration it accepts has values inside their documented ranges. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "app/app.h"
#include "config.h"
#include "core/conn.h"
#include "log.h"
#include "mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config c;
    char err[512];
    config_defaults(&c);
    err[0] = 0;
    int rc = config_parse(&c, (const char *)data, size, "fuzz.conf", err, sizeof err);
    if (rc != CONFIG_OK) {
        if (rc != CONFIG_ERROR || strncmp(err, "fuzz.conf:", 10))
            abort();            /* an error must name the file and line */
        return 0;
    }
    if (c.nlisten < 0 || c.nlisten > MAX_LISTEN || c.workers < 0 || c.workers > 1024 || !c.root[0] ||
        c.max_concurrent_streams < 1 || c.max_header_list_size < 1024 || c.coro_stack_size < CORO_MIN_STACK ||
        c.idle_timeout < 0 || c.body_timeout < 0 || c.write_timeout < 0)
        abort();
    return 0;
}
