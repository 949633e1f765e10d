/* Fuzz target: an upstream's HTTP/1.1 response (upstream/h1resp.c), fed in pieces
 * whose sizes come from the input itself.  Whatever the bytes, the parser takes no more
 * than it is given, reports the head once and before any body, never reports body past
 * a Content-Length it announced, ends at most once, and an error stays an error.  With an
 * upgrade asked, a 101 is a head and its end, with no body: what follows is not parsed.
 * The head's fields are nfields name\0value\0 pairs, names non-empty lower-case tokens,
 * values without control characters (but tab) and without trailing whitespace.  Nothing
 * that was taken as framing (all but the body's pieces) holds a CR that is not followed
 * by an LF of the framing, once anything was reported past it. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "upstream/upstream.h"

static bool token_lower(int ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static void check_fields(const struct upstream_response *p)
{
    if (!p->fields.data) {
        if (p->nfields)
            abort();
        return;
    }
    const char *b = p->fields.data, *end = b + p->fields.len;
    uint32_t n = 0;
    while (b < end) {
        const char *name = b, *nul = memchr(name, 0, (size_t)(end - name));
        if (!nul || nul == name)
            abort();
        for (const char *c = name; c < nul; c++)
            if (!token_lower((unsigned char)*c))
                abort();
        const char *value = nul + 1, *vend = value < end ? memchr(value, 0, (size_t)(end - value)) : NULL;
        if (!vend)
            abort();
        for (const char *c = value; c < vend; c++)
            if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                abort();
        if (vend > value && (vend[-1] == ' ' || vend[-1] == '\t'))
            abort();
        b = vend + 1;
        n++;
    }
    if (n != p->nfields)
        abort();
}

/* Whether the framing in data[*from..pos) - the bytes not marked as body - is free of
 * bare CRs; a CR at pos - 1 waits for the next look. */
static void check_framing(const uint8_t *data, const uint8_t *is_body, size_t *from, size_t pos)
{
    size_t i = *from;
    for (; i + 1 < pos; i++)
        if (data[i] == '\r' && !is_body[i] && (data[i + 1] != '\n' || is_body[i + 1]))
            abort();
    *from = i;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool head_request = data[0] & 1, upgrade_asked = data[0] & 2;
    unsigned step = 1 + data[1] % 61;       /* piece size: splits fall everywhere */
    data += 2;
    size -= 2;
    struct upstream_response p;
    h1resp_init(&p, head_request, upgrade_asked, 4096);
    bool head = false, end = false, error = false;
    uint64_t body = 0;
    size_t pos = 0, framing_checked = 0;
    uint8_t *is_body = calloc(size + 1, 1);
    if (!is_body)
        return 0;
    while (!end && !error) {
        size_t give = size - pos < step ? size - pos : step, used = 0;
        int ev = h1resp_parse(&p, (const char *)data + pos, give, &used);
        if (used > give)
            abort();
        pos += used;
        switch (ev) {
        case UPSTREAM_HEAD:
            if (head)
                abort();
            head = true;
            check_fields(&p);
            break;
        case UPSTREAM_BODY:
            if (!head || head_request || p.upgraded || p.body_len == 0 || p.body < (const char *)data ||
                p.body + p.body_len > (const char *)data + pos)
                abort();
            body += p.body_len;
            if (p.length >= 0 && body > (uint64_t)p.length)
                abort();
            memset(is_body + (p.body - (const char *)data), 1, p.body_len);
            break;
        case UPSTREAM_END:
            if (!head || (p.upgraded && (p.status != 101 || !upgrade_asked || body)))
                abort();
            end = true;
            break;
        case UPSTREAM_ERROR:
            error = true;
            if (!p.error || h1resp_parse(&p, "x", 1, &used) != UPSTREAM_ERROR)
                abort();
            break;
        default:
            if (pos == size) {
                int last = h1resp_eof(&p);
                if (last == UPSTREAM_END && !head)
                    abort();
                end = true;
            } else if (!used && give) {
                abort();                    /* no progress on bytes it was given */
            }
        }
        if (ev == UPSTREAM_HEAD || ev == UPSTREAM_BODY || ev == UPSTREAM_END)
            check_framing(data, is_body, &framing_checked, pos);
    }
    free(is_body);
    if (end && head && !error && !head_request && !p.upgraded && p.length >= 0 && p.status != 204 && p.status != 304 &&
        p.complete && body != (uint64_t)p.length)
        abort();
    h1resp_free(&p);
    return 0;
}
