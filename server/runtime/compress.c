/* Compression on the fly, the decision: whether a response is compressed, in what, and the
 * fields it then carries (the body's filter that drives the encoder is request.c's, where
 * the output's waits are).
 *
 * A response could be compressed when its location compresses (compress_conf) and it is a
 * 200-203 or an error (400-599) with a body, of a type in compress_types, of a known length
 * at least compress_min_length (or of a length not known), not already encoded
 * (Content-Encoding: a precompressed file, an upstream's own), not a range (Content-Range,
 * 206), not marked Cache-Control: no-transform.  Every such response carries Vary:
 * Accept-Encoding, compressed or not, so a cache keeps the two apart.  A 304 in a location
 * that compresses carries Vary, and the weak ETag when the client revalidates a compressed
 * copy (its If-None-Match names the weak tag): a 304 has no type to check, and a client
 * holding the file as it is (an image, a video it resumes with If-Range) keeps the strong
 * tag it was given.
 *
 * Compressed, a response goes with Content-Encoding, as a stream of unknown length (no
 * Content-Length: chunked on HTTP/1.1), its strong ETag made weak (nginx's way: the bytes
 * differ, the meaning does not; If-None-Match compares weakly) and no Accept-Ranges (a
 * range of the compressed bytes is not offered).  HEAD gets the same fields and no
 * compressor state.  text/event-stream is flushed through the compressor at every write:
 * each event goes out decodable at once.
 *
 * The compressors' memory is bounded per worker (compress_memory, the wide-output budget's
 * idea): a response that would be compressed while the worker's compressors hold that much
 * already is sent as it is - a new response is never made to wait, and one under way is
 * never cut off.  A HEAD or a 304 makes no compressor and is answered as if compressed. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "runtime/runtime.h"

/* Whether a Content-Type's media type (before any parameter) is one of the list's. */
static bool type_listed(const struct compress_conf *cc, const char *type)
{
    if (!type)
        return false;
    size_t n = strcspn(type, "; \t");
    const char *slash = memchr(type, '/', n);
    for (uint16_t i = 0; i < cc->ntypes; i++) {
        const char *t = cc->types[i];
        size_t tl = strlen(t);
        if (tl >= 2 && t[tl - 1] == '*') {     /* "text/" and a star: the top type alone */
            if (slash && (size_t)(slash - type) + 2 == tl && !strncasecmp(type, t, tl - 1))
                return true;
        } else if (tl == n && !strncasecmp(type, t, n)) {
            return true;
        }
    }
    return false;
}

static bool status_compressible(int status) { return (status >= 200 && status <= 203) || (status >= 400 && status <= 599); }

static bool named(const char *name, const char *lit) { return !strcasecmp(name, lit); }

/* Whether the request's If-None-Match names the weak form of etag (W/ and the strong tag):
 * the client revalidates a compressed copy, and the 304 says what that copy's 200 said. */
static bool weak_tag_asked(struct request *r, const char *etag)
{
    const char *inm = req_known(r, KF_IF_NONE_MATCH);
    if (!inm || !etag || etag[0] != '"')
        return false;
    size_t el = strlen(etag);
    for (const char *p = inm; (p = strstr(p, "W/")); p += 2)
        if (!strncmp(p + 2, etag, el))
            return true;
    return false;
}

int compress_fields(struct request *r, int status, const struct header *all, size_t n, int64_t length,
                    bool over_budget, struct compress_out *out)
{
    const struct compress_conf *cc = r->loc->compress;
    const char *type = NULL, *etag = NULL;
    bool encoded = false, no_transform = false, ranged = status == 206, vary_has = false;
    for (size_t i = 0; i < n; i++) {
        const char *nm = all[i].name, *v = all[i].value;
        if (named(nm, "content-type"))
            type = v;
        else if (named(nm, "content-encoding"))
            encoded |= strcasecmp(v, "identity") != 0;
        else if (named(nm, "cache-control"))
            no_transform |= http_list_has(v, "no-transform");
        else if (named(nm, "content-range"))
            ranged = true;
        else if (named(nm, "etag"))
            etag = v;
        else if (named(nm, "vary"))
            vary_has |= http_list_has(v, "accept-encoding") || http_list_has(v, "*");
    }
    bool not_modified = status == 304;
    if (encoded || no_transform || ranged)
        return -1;
    if (!not_modified && (!status_compressible(status) || length == BODY_NONE || length == 0 ||
                          !type_listed(cc, type) || (length > 0 && (uint64_t)length < cc->min_length)))
        return -1;
    enum coding coding = acceptenc_choose(req_known(r, KF_ACCEPT_ENCODING), cc->codings, cc->ncodings);
    if (not_modified && coding != CODING_IDENTITY && !weak_tag_asked(r, etag))
        coding = CODING_IDENTITY;           /* revalidating what it got as it is: the strong tag */
    out->skipped = coding != CODING_IDENTITY && over_budget && !not_modified && !req_is_head(r);
    if (out->skipped)
        coding = CODING_IDENTITY;
    size_t k = 0;
    for (size_t i = 0; i < n && k < REQ_RESPONSE_FIELDS_MAX - 2; i++) {
        const char *nm = all[i].name;
        if (coding != CODING_IDENTITY) {
            if (named(nm, "content-length") || named(nm, "accept-ranges"))
                continue;
            if (named(nm, "etag") && all[i].value[0] == '"') {
                int w = snprintf(out->etag, sizeof out->etag, "W/%s", etag);
                if (w < 0 || (size_t)w >= sizeof out->etag)
                    continue;                   /* too long to weaken here: none rather than a strong one */
                out->h[k++] = (struct header){ "etag", out->etag };
                continue;
            }
        }
        out->h[k++] = all[i];
    }
    if (!vary_has)
        out->h[k++] = (struct header){ "vary", "accept-encoding" };
    if (coding != CODING_IDENTITY && !not_modified)
        out->h[k++] = (struct header){ "content-encoding", coding_name[coding] };
    out->n = k;
    out->coding = not_modified ? CODING_IDENTITY : coding;
    out->level = cc->level[coding];
    out->flush_each = type && !strncasecmp(type, "text/event-stream", 17);
    return 0;
}
