/* The HTTP/2 front end (h2.c), for the connection core and the other front ends. */
#ifndef H2PARK_PROTO_H2_H
#define H2PARK_PROTO_H2_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "core/conn.h"

extern const struct conn_proto h2_proto;
/* Upgrade: h2c: starts HTTP/2 on c from the client's decoded HTTP2-Settings; the request
 * head (name\0value\0 pairs, :method and :path included) becomes stream 1. */
int h2_start_upgraded(struct conn *c, const uint8_t *settings, size_t len, struct buf *head);
/* What the client sent after its upgrade request (its preface and frames). */
int h2_feed_upgraded(struct conn *c, const char *data, size_t len);

#endif
