/* The cleartext port's first protocol (detect.c): its first bytes choose h2c or HTTP/1.1. */
#ifndef H2PARK_PROTO_DETECT_H
#define H2PARK_PROTO_DETECT_H

#include "core/conn.h"

extern const struct conn_proto detect_proto;

#endif
