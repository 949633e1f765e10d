/* Fuzz target: the configuration format and the tree it becomes.  The input is a config
 * file (after the embedded default), then, after a NUL, lines of hosts and paths to look
 * up in it.  Whatever the file holds, parsing either accepts it or names file, line and
 * problem for every error; a tree it accepts has values inside their documented ranges
 * and every site a "/" location, every proxied location a group it can pass to; lookups of any host or path find a site and a location
 * of the tree, and a host that normalizes is lower case with no character a host may
 * not have. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "app/app.h"
#include "config.h"
#include "core/conn.h"
#include "log.h"
#include "mem.h"

static bool in_tree(const struct config *c, const struct site *s)
{
    for (uint32_t i = 0; i < c->nsites; i++)
        if (s == &c->sites[i])
            return true;
    return false;
}

static void probe(const struct config *c, const char *line)
{
    char host[256], path[2048];
    int hl = host_normalize(line, host, sizeof host);
    int span = host_span(line, strlen(line));
    if ((hl < 0) != (span < 0) || (hl >= 0 && hl != span))
        abort();                    /* HTTP/1.1's check of Host judges as routing's */
    if (hl > 0)
        for (int i = 0; i < hl; i++)
            if (isupper((unsigned char)host[i]) || strchr(" /\\?#@\"<>", host[i]) || (unsigned char)host[i] < 0x21)
                abort();
    for (int l = -1; l < c->nlisten; l++) {
        const struct site_table *t = l < 0 ? &c->all_sites : &c->listen_sites[l];
        const struct site *s = site_for_host(t, host, hl > 0 ? (size_t)hl : 0);
        if (t->nsites && (!s || !in_tree(c, s)))
            abort();
        if (!s)
            continue;
        int pl = path_decode(line, path, sizeof path, NULL);
        const struct location *loc = location_for_path(s, pl > 0 ? path : "/", pl > 0 ? (size_t)pl : 1, false);
        if (!loc || loc->site != s || loc < s->locations || loc >= s->locations + s->nlocations)
            abort();
        if (!loc->exact && (pl > 0 ? (size_t)pl : 1) < loc->path_len)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    if (!once) {
        once = true;
        mem_install_hooks();
        app_register_routes();
        log_set_level(-1);         /* not even errors: the fuzzer's output stays readable */
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t conf_len = nul ? (size_t)(nul - data) : size;
    struct config *c = config_new();
    static struct config_errors e;
    memset(&e, 0, sizeof e);
    if (config_parse(c, default_conf_text, default_conf_size, CONFIG_BUILTIN, &e))
        abort();
    int rc = config_parse(c, (const char *)data, conf_len, "fuzz.conf", &e);
    rc |= config_finish(c, &e);
    for (const char *p = e.text; *p;) {
        if (strncmp(p, "fuzz.conf:", 10) && strncmp(p, "built-in default:", 17) && strncmp(p, "no listen address", 17) &&
            strncmp(p, "(and perhaps more", 17))
            abort();                /* an error must name the file and line */
        p = strchr(p, '\n');
        if (!p)
            abort();
        p++;
    }
    if (rc != CONFIG_OK) {
        if (!e.count)
            abort();
        config_unref(c);
        return 0;
    }
    if (c->nlisten < 1 || c->nlisten > MAX_LISTEN || c->workers < 0 || c->workers > 1024 || !c->nsites ||
        c->max_concurrent_streams < 1 || c->max_header_list_size < 1024 || c->coro_stack_size < CORO_MIN_STACK ||
        c->idle_timeout < 0 || c->body_timeout < 0 || c->write_timeout < 0)
        abort();
    for (uint32_t i = 0; i < c->nsites; i++) {
        const struct location *root = location_for_path(&c->sites[i], "/", 1, false);
        if (!root || root->exact || !root->docroot || !root->docroot->path[0])
            abort();
        /* A proxied location passes to a group with a server that is not a backup, every
         * server in the configuration's array, and its limits are positive. */
        for (uint32_t k = 0; k < c->sites[i].nlocations; k++) {
            const struct location *l = &c->sites[i].locations[k];
            if (l->handler != HANDLER_PROXY)
                continue;
            const struct proxy_conf *pc = l->proxy;
            if (!pc || !pc->group || !pc->group->nservers || pc->group->nservers > MAX_UPSTREAM_SERVERS ||
                !(pc->connect_timeout > 0) || !(pc->read_timeout > 0) || !(pc->send_timeout > 0))
                abort();
            bool primary = false;
            for (uint16_t j = 0; j < pc->group->nservers; j++) {
                const struct upstream_server_conf *sc = &pc->group->servers[j];
                if (sc->index >= c->nupstream_servers || sc != &c->upstream_servers[sc->index] || !sc->weight)
                    abort();
                primary |= !sc->backup;
            }
            if (!primary)
                abort();
        }
    }
    if (nul) {
        char line[4096];
        const char *p = (const char *)nul + 1, *end = (const char *)data + size;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (n < sizeof line) {
                memcpy(line, p, n);
                line[n] = 0;
                if (!memchr(line, 0, n))
                    probe(c, line);
            }
            p += n + 1;
        }
    }
    config_unref(c);
    return 0;
}
