/* The access log: one line per request, written as its exchange ends.
 *
 * Formatted only when there is a log (formatting costs more than serving a small file
 * from the cache).  Fields: time, client, method, target, status, bytes sent, duration
 * in ms, protocol (http/1.1, h2, h2c). */
#include <stdio.h>
#include <time.h>

#include "app/app.h"
#include "log.h"

void access_log_request(const struct request *r)
{
    if (!access_log_enabled())
        return;
    char line[1400], when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *method = req_method(r), *target = req_target(r);
    int n = snprintf(line, sizeof line, "%s %s %s %.1000s %d %llu %.3f %s\n", when, req_peer(r), method ? method : "-",
                     target ? target : "-", req_status(r), (unsigned long long)req_bytes_sent(r),
                     (req_now(r) - req_started(r)) * 1000, req_protocol(r));
    if (n > 0)
        access_log_write(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
