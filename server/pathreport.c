/* What --check says a configuration will use: every file and directory it names, as the
 * daemon will open it - a relative path in a file taken from that file's directory, one
 * in the embedded default or on the command line from the working directory - so that an
 * operator sees where each path landed before anything is served.  One line per site
 * (its root, its certificates), one per location with a root of its own, the upstreams'
 * CA and client certificate files, the access log; main.c prints "configuration ok" after
 * them, the last line. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "pathreport.h"

/* path as the daemon opens it: relative ones against the working directory. */
static const char *absolute(const char *path, char *buf, size_t cap)
{
    char here[PATH_MAX];
    if (path[0] == '/' || !getcwd(here, sizeof here))
        return path;
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    snprintf(buf, cap, "%s/%s", strcmp(here, "/") ? here : "", path);
    return buf;
}

static void root_text(const struct docroot *d, bool alias, const char *file, char *out, size_t cap)
{
    char abs[PATH_MAX + 64];
    if (!d->path)
        snprintf(out, cap, "no root (files are 404)");
    else if (d->fd < 0)
        snprintf(out, cap, "root %s (%s): not there, / serves the built-in page", absolute(d->path, abs, sizeof abs),
                 d->from);
    else
        snprintf(out, cap, "%s %s%s%s (%s)", alias ? "alias" : "root", d->path, file ? "/" : "", file ? file : "",
                 d->from);
}

void print_paths(const struct config *c, FILE *out)
{
    char abs[2][PATH_MAX + 64], text[2 * PATH_MAX];
    for (uint32_t i = 0; i < c->nsites; i++) {
        const struct site *s = &c->sites[i];
        const struct location *top = location_for_path(s, "/", 1, true);
        fprintf(out, "site ");
        for (uint16_t k = 0; k < s->nnames; k++)
            fprintf(out, "%s ", s->names[k]);
        root_text(top->docroot, top->alias, top->alias_file, text, sizeof text);
        fprintf(out, "%s(%s): %s", s->nnames ? "" : "* ", s->from, text);
        if (s->tls >= 0 && !c->tls[s->tls].npairs)
            fprintf(out, "; a self-signed certificate");
        for (uint8_t k = 0; s->tls >= 0 && k < c->tls[s->tls].npairs; k++) {
            const struct tls_pair *p = &c->tls[s->tls].pairs[k];
            fprintf(out, "; cert %s (%s), key %s (%s)", absolute(p->cert, abs[0], sizeof abs[0]), p->cert_from,
                    absolute(p->key, abs[1], sizeof abs[1]), p->key_from);
        }
        fprintf(out, "\n");
        for (uint32_t k = 0; k < s->nlocations; k++) {
            const struct location *l = &s->locations[k];
            if (l->implicit || l == top || l->handler != HANDLER_STATIC || l->docroot == top->docroot)
                continue;
            root_text(l->docroot, l->alias, l->alias_file, text, sizeof text);
            fprintf(out, "  location %s%s (%s): %s\n", l->exact ? "= " : "", l->path, l->from, text);
        }
    }
    for (const struct upstream_tls *t = c->upstream_tls; t; t = t->next) {
        if (t->trusted)
            fprintf(out, "proxy_ssl_trusted_certificate %s (%s)\n", absolute(t->trusted, abs[0], sizeof abs[0]),
                    t->trusted_from);
        if (t->cert)
            fprintf(out, "proxy_ssl_certificate %s (%s), proxy_ssl_certificate_key %s (%s)\n",
                    absolute(t->cert, abs[0], sizeof abs[0]), t->cert_from, absolute(t->key, abs[1], sizeof abs[1]),
                    t->key_from);
    }
    if (c->access_log[0])
        fprintf(out, "access_log %s (%s)\n", absolute(c->access_log, abs[0], sizeof abs[0]), c->access_log_from);
}
