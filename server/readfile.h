/* Reading a file the configuration names (readfile.c): the config file, certificates,
 * keys, CA files. */
#ifndef H2PARK_READFILE_H
#define H2PARK_READFILE_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

#define READFILE_MAX (16u << 20)   /* larger than any certificate bundle or configuration */

/* path, whole, into out (which the caller frees): a regular file of at most READFILE_MAX
 * bytes.  0, or -1 with why (a strerror text, or what the file is instead). */
int read_regular_file(const char *path, struct buf *out, char *why, size_t whylen);
/* What a file of this mode is, for an error: "a FIFO", "a directory", ... */
const char *file_kind(mode_t mode);

#endif
