/* Shared by the libFuzzer targets (tests/fuzz/fuzz_*.c). */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Sets up the daemon's state once: configuration, a site, one worker's loop. */
void fuzz_daemon_init(void);
/* One cleartext connection that receives data; half_close: the peer then shuts its
 * sending side (else the daemon closes it by force after the input). */
void fuzz_connection(const uint8_t *data, size_t size, bool half_close);
/* The same, accepted as on a listener with flags (CONN_PROXY_PROTOCOL). */
void fuzz_connection_flags(const uint8_t *data, size_t size, bool half_close, unsigned flags);

#endif
