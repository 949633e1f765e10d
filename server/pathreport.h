/* --check's account of the files and directories a configuration uses (pathreport.c). */
#ifndef H2PARK_PATHREPORT_H
#define H2PARK_PATHREPORT_H

#include <stdio.h>

struct config;
/* One line per site, per location with a root of its own, per upstream TLS file and for
 * the access log, with the paths as they will be opened; c has been applied in check mode
 * (its roots opened). */
void print_paths(const struct config *c, FILE *out);

#endif
