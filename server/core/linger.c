/* Lingering close (nginx's lingering_close): a connection that ends with last words - a
 * GOAWAY, an HTTP/1.1 error response - while its peer may still be sending must not be
 * closed at once: the kernel answers unread input with a reset, and a reset makes the
 * peer's kernel drop what it had not yet read, last words included.  So the write side
 * is shut (the peer sees the end after the last byte), and whatever still arrives is
 * read and dropped, LINGER_BYTES at most, for LINGER_TIME at most, or until the peer
 * closes too.
 *
 * A lingering socket is only a descriptor, a watcher and a timer: the connection's
 * memory is gone by then.  It still counts against max_conns (it holds a descriptor)
 * until it is closed. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/conn.h"
#include "scalloc.h"

#define LINGER_TIME 2.0
#define LINGER_BYTES (1u << 20)

struct lingering {
    struct worker *w;
    ev_io io;
    ev_timer timer;
    size_t left;
};

static void linger_end(struct lingering *l)
{
    ev_io_stop(l->w->loop, &l->io);
    ev_timer_stop(l->w->loop, &l->timer);
    close(l->io.fd);
    struct worker *w = l->w;
    sc_free(l);
    worker_conn_closed(w);
}

static void on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop, (void)revents;
    struct lingering *l = io->data;
    char *sink = l->w->rbuf;
    for (int i = 0; i < 4; i++) {
        ssize_t n = read(io->fd, sink, sizeof l->w->rbuf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0 || (size_t)n >= l->left) {
            linger_end(l);
            return;
        }
        l->left -= (size_t)n;
    }
}

static void on_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    linger_end(t->data);
}

void linger_close(struct worker *w, int fd)
{
    struct lingering *l = shutdown(fd, SHUT_WR) == 0 ? sc_malloc(sizeof *l) : NULL;
    if (!l) {
        close(fd);
        worker_conn_closed(w);
        return;
    }
    l->w = w;
    l->left = LINGER_BYTES;
    ev_io_init(&l->io, on_readable, fd, EV_READ);
    l->io.data = l;
    ev_io_start(w->loop, &l->io);
    ev_timer_init(&l->timer, on_timeout, LINGER_TIME, 0);
    l->timer.data = l;
    ev_timer_start(w->loop, &l->timer);
}
