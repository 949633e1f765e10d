/* nghttp2's memory for one session, from the heap, kept track of so that a session that
 * waits (a parked client connection, a pooled upstream one) can give pages back: the
 * frame buffer, which holds nothing between frames, and the pages of the stream map's
 * table that are all zero.  Used by both ends of HTTP/2: proto/h2.c (the server side)
 * and upstream/h2client.c (the client side).
 *
 * Invariants: the frame buffer - the one block of FRAMEBUF_MIN bytes or more a session
 * allocates - is asked for in whole OS pages, so it owns its pages outright (every size
 * class that is a multiple of 4 KiB from 16 KiB up is aligned to at least 4 KiB; at the
 * 16394 bytes nghttp2 asks, class 18432 would put two of every four buffers across pages
 * shared with a neighbour, which stay resident).  Other blocks of a page or more are
 * released only where a page of them is all zero, which reads back the same. */
#ifndef H2PARK_H2MEM_H
#define H2PARK_H2MEM_H

#include <nghttp2/nghttp2.h>
#include <stddef.h>

struct h2mem {
    void *framebuf;                /* nghttp2's frame buffer (its one 16 KiB+ block), or NULL */
    size_t framebuf_size;
    void *zeroish;                 /* the stream map's table: all zero while idle */
    size_t zeroish_size;
};

/* The allocator for a session whose memory m tracks (nghttp2 keeps a copy; m must live as
 * long as the session). */
nghttp2_mem h2mem_allocator(struct h2mem *m);
/* The session waits: what it holds that is dead until it wakes goes back to the OS. */
void h2mem_trim(const struct h2mem *m);

#endif
