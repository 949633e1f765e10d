/* The HTTP/1.1 front end (h1.c), for the connection core and the other front ends. */
#ifndef H2PARK_PROTO_H1_H
#define H2PARK_PROTO_H1_H

#include "core/conn.h"

extern const struct conn_proto h1_proto;

#endif
