/* Compression on the fly, its part of the configuration: the keys (at the top level, in a
 * site or a location, each inherited down until given again), their setters, their merge
 * and the struct compress_conf a location gets when it compresses - added to the format by
 * config_add_module (config_tree.h).
 *
 *   compress = zstd br gzip          the codings, in the server's order (ties go to the first)
 *   compress = on                    the same order; off (the default): none
 *   compress_types = text/html application/json image/svg+xml
 *   compress_min_length = 256        a body of known length under it goes as it is
 *   compress_level_gzip = 5          zlib's 1-9
 *   compress_level_br = 5            brotli's 0-11
 *   compress_level_zstd = 1          zstd's 1-22
 *   compress_memory = 64m            (top level) a worker's compressors' state at most
 *
 * What the runtime does with them is in runtime/request.c (the response filter); the
 * levels' defaults and why are in docs/configuration.md (loadtest/compress-levels). */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_tree.h"
#include "runtime/acceptenc.h"

/* The types compressed unless compress_types says otherwise: text, and the structured
 * text that travels as application/... or image/svg+xml (nginx's gzip_types needs them
 * listed; Caddy's and h2o's defaults are much this list). */
static const char *const default_types[] = {
    "text/*", "application/json", "application/javascript", "application/xml", "application/xhtml+xml",
    "application/rss+xml", "application/atom+xml", "application/ld+json", "application/manifest+json",
    "application/geo+json", "application/wasm", "image/svg+xml", "image/x-icon",
};
#define TYPES_MAX 64

static const uint8_t default_order[] = { CODING_ZSTD, CODING_BR, CODING_GZIP };

static int coding_of(const char *t, size_t n)
{
    for (int c = CODING_GZIP; c < CODING_COUNT; c++)
        if (strlen(coding_name[c]) == n && !strncmp(coding_name[c], t, n))
            return c;
    return -1;
}

/* The next word of a list at *p (blanks skipped): its length, 0 at the end. */
static size_t word(const char **p)
{
    *p += strspn(*p, " \t");
    return strcspn(*p, " \t");
}

static int set_compress(struct setter_args *a)
{
    struct compress_keys *k = &a->s->compress;
    if (!strcmp(a->value, "off"))
        return k->ncodings = 0, 0;
    if (!strcmp(a->value, "on")) {
        memcpy(k->codings, default_order, sizeof default_order);
        return k->ncodings = sizeof default_order, 0;
    }
    uint8_t n = 0;
    size_t len;
    for (const char *p = a->value; (len = word(&p));) {
        int c = coding_of(p, len);
        if (c < 0)
            return WHY("compress: '%.*s' is not gzip, br or zstd (or the whole value on or off)", (int)(len > 40 ? 40 : len), p);
        for (uint8_t i = 0; i < n; i++)
            if (k->codings[i] == c)
                return WHY("compress: %s is named twice", coding_name[c]);
        k->codings[n++] = (uint8_t)c;
        p += len;
    }
    if (!n)
        return WHY("compress: no coding named (gzip, br, zstd, on or off)");
    k->ncodings = n;
    return 0;
}

/* A media type as Content-Type starts with it: type "/" subtype, tokens, or type "/" "*". */
static bool media_type(const char *t, size_t n)
{
    const char *slash = memchr(t, '/', n);
    if (!slash || slash == t || slash == t + n - 1)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = t[i];
        bool tok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                   (ch && strchr("!#$%&'+-.^_`|~", ch));
        if (t + i == slash)
            continue;
        if (ch == '*' && t + i == slash + 1 && i == n - 1)
            continue;
        if (!tok)
            return false;
    }
    return true;
}

static int set_compress_types(struct setter_args *a)
{
    const char *list[TYPES_MAX];
    uint16_t n = 0;
    size_t len;
    for (const char *p = a->value; (len = word(&p));) {
        if (!media_type(p, len))
            return WHY("compress_types: '%.*s' is not a media type (type/subtype, or type/*)", (int)(len > 60 ? 60 : len), p);
        if (n == TYPES_MAX)
            return WHY("compress_types: more than %d types", TYPES_MAX);
        char *t = config_alloc(a->c, len + 1);
        for (size_t i = 0; i < len; i++)
            t[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
        list[n++] = t;
        p += len;
    }
    if (!n)
        return WHY("compress_types: no type named");
    const char **types = config_alloc(a->c, n * sizeof *types);
    memcpy(types, list, n * sizeof *types);
    a->s->compress.types = types;
    a->s->compress.ntypes = n;
    return 0;
}

static int set_compress_min_length(struct setter_args *a)
{
    if (config_parse_size(a->value, &a->s->compress.min_length))
        return WHY("compress_min_length: '%s' is not a size (bytes, or with k, m, g: 1k)", a->value);
    return 0;
}

static int set_compress_memory(struct setter_args *a)
{
    uint64_t v;
    if (config_parse_size(a->value, &v) || v < (1u << 20))
        return WHY("compress_memory: '%s' is not a size of at least 1m (with k, m, g: 64m)", a->value);
    a->s->compress.memory = v;
    return 0;
}

static int set_level(struct setter_args *a, enum coding c, int lo, int hi)
{
    unsigned long long n;
    if (config_parse_uint(a->value, (unsigned long long)hi, &n) || n < (unsigned long long)lo)
        return WHY("compress_level_%s: '%s' is not a level of %s (%d to %d)", coding_name[c], a->value,
                   coding_name[c], lo, hi);
    a->s->compress.level[c] = (uint8_t)n;
    return 0;
}
/* The libraries' own ranges (zlib 1-9 past 0, no compression; brotli's qualities; zstd's
 * positive levels). */
static int set_level_gzip(struct setter_args *a) { return set_level(a, CODING_GZIP, 1, 9); }
static int set_level_br(struct setter_args *a) { return set_level(a, CODING_BR, 0, 11); }
static int set_level_zstd(struct setter_args *a) { return set_level(a, CODING_ZSTD, 1, 22); }

static void top_defaults(struct scope *t)
{
    struct compress_keys *k = &t->compress;
    k->types = default_types;
    k->ntypes = sizeof default_types / sizeof default_types[0];
    k->min_length = 256;
    /* A worker's compressors at most: some 240 gzip streams (zlib's 256 KiB each), fewer
     * zstd and brotli ones - beside the 64 MiB of wide output it may hold. */
    k->memory = 64 << 20;
    /* Measured (loadtest/compress-levels; docs/configuration.md says why). */
    k->level[CODING_GZIP] = 5;
    k->level[CODING_BR] = 5;
    k->level[CODING_ZSTD] = 1;
}

static void merge(struct config *c, struct merged *m, const struct scope *s)
{
    (void)c;
    const struct origin *at = s->at;
    bool top = s->kind == SCOPE_TOP;
    struct compress_keys *to = &m->compress;
    const struct compress_keys *from = &s->compress;
    if (at[K_COMPRESS].src || top) {
        memcpy(to->codings, from->codings, sizeof to->codings);
        to->ncodings = from->ncodings;
    }
    if (at[K_COMPRESS_TYPES].src || top)
        to->types = from->types, to->ntypes = from->ntypes;
    if (at[K_COMPRESS_MIN_LENGTH].src || top)
        to->min_length = from->min_length;
    if (top)
        to->memory = from->memory;
    for (int cd = CODING_GZIP; cd < CODING_COUNT; cd++)
        if (at[K_COMPRESS_LEVEL_GZIP + cd - CODING_GZIP].src || top)
            to->level[cd] = from->level[cd];
}

static void location(struct config *c, struct location *l, const struct merged *m, struct config_errors *e)
{
    (void)e;
    const struct compress_keys *k = &m->compress;
    if (!k->ncodings)
        return;
    struct compress_conf *cc = config_alloc(c, sizeof *cc);
    memcpy(cc->codings, k->codings, sizeof cc->codings);
    cc->ncodings = k->ncodings;
    for (int cd = 0; cd <= COMPRESS_CODINGS_MAX; cd++)
        cc->level[cd] = (int8_t)k->level[cd];
    cc->min_length = k->min_length;
    cc->types = k->types;
    cc->ntypes = k->ntypes;
    cc->memory = k->memory;
    l->compress = cc;
}

#define ANY KEY_TOP | KEY_SITE | KEY_LOCATION
static const struct config_module_key keys[] = {
    { K_COMPRESS, "compress", ANY, false, set_compress, NULL },
    { K_COMPRESS_TYPES, "compress_types", ANY, false, set_compress_types, NULL },
    { K_COMPRESS_MIN_LENGTH, "compress_min_length", ANY, false, set_compress_min_length, NULL },
    { K_COMPRESS_LEVEL_GZIP, "compress_level_gzip", ANY, false, set_level_gzip, NULL },
    { K_COMPRESS_LEVEL_BR, "compress_level_br", ANY, false, set_level_br, NULL },
    { K_COMPRESS_LEVEL_ZSTD, "compress_level_zstd", ANY, false, set_level_zstd, NULL },
    { K_COMPRESS_MEMORY, "compress_memory", KEY_TOP, false, set_compress_memory, NULL },
};

static const struct config_module compress_module = {
    keys, sizeof keys / sizeof keys[0], top_defaults, merge, NULL, location, NULL,
};
__attribute__((constructor)) static void register_keys(void) { config_add_module(&compress_module); }
