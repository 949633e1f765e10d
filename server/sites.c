/* Finding a request's site and location in a configuration tree (config.h).
 *
 * The host is taken from :authority or Host, checked and lowered as host.c does.  A
 * site is found by its exact name, then by the longest wildcard ("*.example.com" for
 * a.example.com and a.b.example.com, as nginx), then it is its listener's default.
 *
 * Locations are matched against the decoded path: an exact location by hash, then the
 * prefix locations longest first.  Both lookups cost a hash of the host or the path
 * and a compare or two, so neither shows beside serving a request; a listener with one
 * site skips the host entirely, and a site whose only prefix is "/" skips the prefixes
 * for every path no exact location could be (location_for_path, config.h). */
#include <arpa/inet.h>
#include <string.h>

#include "config.h"
#include "config_tree.h"

static uint32_t hash_start(void) { return 2166136261u; }
static uint32_t hash_more(uint32_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* The site named exactly (prefix, then name), or NULL. */
static const struct site *lookup(const struct site_table *t, const char *prefix, size_t pl, const char *name, size_t n)
{
    uint32_t h = hash_more(hash_more(hash_start(), prefix, pl), name, n) & t->mask;
    for (; t->names[h].name; h = (h + 1) & t->mask) {
        const struct site_name *e = &t->names[h];
        if (e->len == pl + n && !memcmp(e->name, prefix, pl) && !memcmp(e->name + pl, name, n))
            return e->site;
    }
    return NULL;
}

const struct site *site_for_host(const struct site_table *t, const char *host, size_t len)
{
    if (t->nsites <= 1 || !len)
        return t->dflt;
    const struct site *s = lookup(t, "", 0, host, len);
    if (s)
        return s;
    /* *.example.com: the longest suffix first, which is the leftmost dot. */
    for (size_t i = 0; i < len; i++)
        if (host[i] == '.' && (s = lookup(t, "*", 1, host + i, len - i)))
            return s;
    return t->dflt;
}

const struct site *site_for_sni(const struct site_table *t, const char *name)
{
    char host[256];
    /* A name, not an authority: no port, no IP literal (RFC 6066 section 3). */
    int n = name && !strchr(name, ':') ? host_normalize(name, host, sizeof host) : -1;
    return n > 0 ? site_for_host(t, host, (size_t)n) : t->dflt;
}

const struct location *location_lookup(const struct site *s, const char *path, size_t len, bool skip_implicit)
{
    if (s->exact_sieve & (UINT64_C(1) << location_sieve_bit(path, len))) {
        uint32_t h = hash_more(hash_start(), path, len) & s->exact_mask;
        for (const struct location *l; (l = s->exact[h]); h = (h + 1) & s->exact_mask)
            if (l->path_len == len && !memcmp(l->path, path, len) && !(skip_implicit && l->implicit))
                return l;
    }
    for (uint32_t i = 0; i < s->nprefixes; i++) {   /* "/" (every path's) needs no compare */
        const struct location *l = s->prefixes[i];
        if (l->path_len <= len && (l->path_len == 1 || !memcmp(l->path, path, l->path_len)))
            return l;
    }
    return NULL;                      /* every site has "/": only for a path without it */
}

/* ---- the sites' links, once every site is built (config_tree.h) ---- */

static uint16_t port_of(const struct listen_addr *a)
{
    return ntohs(a->addr.ss_family == AF_INET ? ((const struct sockaddr_in *)&a->addr)->sin_port
                                              : ((const struct sockaddr_in6 *)&a->addr)->sin6_port);
}

static void link_sites(struct config *c)
{
    /* Where https_redirect sends a site: its own TLS port, else that of a TLS site of the
     * same name (nginx's pair of server blocks), else 443. */
    for (uint32_t i = 0; i < c->nsites; i++) {
        struct site *site = &c->sites[i];
        for (int j = 0; j < c->nlisten && !site->https_port; j++)
            if ((site->listen_mask >> j & 1) && c->listen[j].tls)
                site->https_port = port_of(&c->listen[j]);
        for (int j = 0; j < c->nlisten && !site->https_port && site->name; j++) {
            const struct site *o = c->listen[j].tls ? site_for_host(&c->listen_sites[j], site->name, strlen(site->name))
                                                    : NULL;
            if (o && o != site && o->nnames && !o->catch_all)
                site->https_port = port_of(&c->listen[j]);
        }
        if (!site->https_port)
            site->https_port = 443;
    }
}

static const struct config_module sites_module = { NULL, 0, NULL, NULL, NULL, NULL, link_sites };
__attribute__((constructor)) static void register_links(void) { config_add_module(&sites_module); }
