/* Readiness and state reports to systemd through NOTIFY_SOCKET (notify.c). */
#ifndef H2PARK_NOTIFY_H
#define H2PARK_NOTIFY_H

/* One datagram, e.g. "READY=1\nSTATUS=serving". */
void notify_service_manager(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
