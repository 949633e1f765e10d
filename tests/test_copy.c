/* Unit tests of the copies that keep clear of the CPU's slow case: copy.h's test and
 * piecewise copy (every distance and length around the pieces, bytes exact), and mem.c's
 * placement of OpenSSL's record buffers (their payload half a page in, a realloc keeping
 * the contents, every placed buffer given back to the heap whole); fieldcopy.h's short
 * copies and word-wise lower-casing (every length to 70, every byte value at every
 * place), http1_syntax.h's word-wise value check and token table, and path_decode's
 * one-pass segment checks. */
#include <openssl/crypto.h>
#include <stdint.h>

#include "app/app.h"
#include "check.h"
#include "copy.h"
#include "fieldcopy.h"
#include "http1_syntax.h"
#include "mem.h"
#include "scalloc.h"

static void near_behind_is_1_to_63_bytes_modulo_4096(void)
{
    static _Alignas(4096) char page[3 * 4096];
    for (long d = -300; d < 4096 + 300; d++) {
        long m = ((d % 4096) + 4096) % 4096;
        bool want = m >= 1 && m <= 63;
        CHECKF(copy_near_behind(page + 4096 + d, page + 4096) == want, "distance %ld", d);
    }
}

static void copy_apart_copies_exactly(void)
{
    static char src[40000], dst[48000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)(i * 131 + 7);
    static const size_t lens[] = { 0, 1, 2047, 2048, 2049, 4096, 16383, 16384, 16385, 39000 };
    for (size_t s = 0; s < 64; s += 9)
        for (size_t d = 0; d < 4160; d += (d < 80 ? 1 : 1000))
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                size_t n = lens[k];
                if (s + n > sizeof src || d + n + 1 > sizeof dst)
                    continue;
                memset(dst, 0x5a, sizeof dst);
                copy_apart(dst + d, src + s, n);
                CHECKF(!memcmp(dst + d, src + s, n) && dst[d + n] == 0x5a && (d == 0 || dst[d - 1] == 0x5a),
                       "src +%zu dst +%zu len %zu", s, d, n);
            }
}

/* mem.c tells a placed pointer by its page offset (24 mod 32), which no object of a class
 * of 1 KiB or more may start at: every such class size is a multiple of 32. */
static void classes_from_1k_start_32_aligned(void)
{
    for (size_t n = 1024; n <= 32768; n++)
        CHECKF(sc_roundup(n) % 32 == 0, "class of %zu bytes is %zu", n, sc_roundup(n));
}

static void record_buffers_put_payload_half_a_page_in(void)
{
    struct sc_stats before, after;
    sc_read_stats(&before);
    /* OpenSSL 3's write and read buffers (16584 and 16712 bytes here), and the sizes
     * around them that take the same path. */
    static const size_t sizes[] = { 16385, 16584, 16712, 18300 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *p = OPENSSL_malloc(sizes[k]);
        CHECK(p != NULL);
        CHECKF(((uintptr_t)p + 8) % 4096 == MEM_TLS_PAYLOAD_PAGE_OFFSET, "%zu bytes at page offset %lu",
               sizes[k], (unsigned long)((uintptr_t)p % 4096));
        for (size_t i = 0; i < sizes[k]; i++)
            p[i] = (unsigned char)i;
        unsigned char *q = OPENSSL_realloc(p, sizes[k] + 100);
        CHECK(q != NULL && ((uintptr_t)q + 8) % 4096 == MEM_TLS_PAYLOAD_PAGE_OFFSET);
        for (size_t i = 0; i < sizes[k]; i++)
            CHECKF(q[i] == (unsigned char)i, "byte %zu lost in realloc", i);
        unsigned char *small = OPENSSL_realloc(q, 100);      /* out of the placed sizes */
        CHECK(small != NULL && small[99] == 99);
        OPENSSL_free(small);
    }
    /* Other sizes are the heap's own objects. */
    void *a = OPENSSL_malloc(100), *b = OPENSSL_malloc(20000);
    CHECK(a && b && (uintptr_t)b % 32 == 0);
    OPENSSL_free(a);
    OPENSSL_free(b);
    sc_read_stats(&after);
    CHECKF(after.heap_alloc == before.heap_alloc, "heap_alloc %llu -> %llu: a placed buffer was not freed whole",
           (unsigned long long)before.heap_alloc, (unsigned long long)after.heap_alloc);
}

static void field_copy_is_memcpy(void)
{
    char src[96], dst[112];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)(i * 37 + 1);
    for (size_t n = 0; n <= 70; n++)
        for (size_t off = 0; off < 8; off++) {
            memset(dst, 0x5a, sizeof dst);
            field_copy(dst + 8, src + off, n);
            CHECKF(!memcmp(dst + 8, src + off, n) && dst[7] == 0x5a && dst[8 + n] == 0x5a, "len %zu at +%zu", n, off);
        }
}

static void field_copy_lower_lowers_ascii_letters_only(void)
{
    char src[80], dst[96], want[80];
    for (size_t n = 0; n <= 70; n++)
        for (size_t at = 0; at < (n ? n : 1); at++)
            for (int b = 0; b < 256; b++) {
                for (size_t i = 0; i < n; i++)
                    src[i] = (char)("Content-TYPE-x"[i % 14]);
                if (n)
                    src[at] = (char)b;
                for (size_t i = 0; i < n; i++) {
                    unsigned char ch = (unsigned char)src[i];
                    want[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
                }
                memset(dst, 0x5a, sizeof dst);
                field_copy_lower(dst + 8, src, n);
                CHECKF(!memcmp(dst + 8, want, n) && dst[7] == 0x5a && dst[8 + n] == 0x5a, "len %zu, byte %d at %zu", n,
                       b, at);
                if (!n)
                    break;
            }
}

/* http1_syntax.h's value check, eight bytes at a time, against RFC 9110 5.5's rule byte by
 * byte: every byte value at every place of every length to 40, trailing whitespace
 * trimmed alike; and the name check's token table against RFC 9110 5.6.2's list. */
static void http1_value_ok_is_the_byte_rule(void)
{
    char v[48];
    for (size_t n = 0; n <= 40; n++)
        for (size_t at = 0; at < (n ? n : 1); at++)
            for (int b = 0; b < 256; b++) {
                for (size_t i = 0; i < n; i++)
                    v[i] = "text/html; q=0.9\t"[i % 17];
                if (n)
                    v[at] = (char)b;
                size_t want_n = n;
                while (want_n && (v[want_n - 1] == ' ' || v[want_n - 1] == '\t'))
                    want_n--;
                bool want = true;
                for (size_t i = 0; i < want_n; i++) {
                    unsigned char ch = (unsigned char)v[i];
                    if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                        want = false;
                }
                size_t got_n = n;
                bool got = http1_value_ok(v, &got_n);
                CHECKF(got == want && got_n == want_n, "len %zu, byte %d at %zu: %d/%zu, want %d/%zu", n, b, at, got,
                       got_n, want, want_n);
                if (!n)
                    break;
            }
}

static void http1_name_ok_takes_tokens_lowered(void)
{
    for (int b = 0; b < 256; b++) {
        char name[3] = { 'a', (char)b, 'Z' };
        bool token = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
                     (b && strchr("!#$%&'*+-.^_`|~", b));
        bool ok = http1_name_ok(name, 3);
        CHECKF(ok == token, "byte %d", b);
        if (ok)
            CHECKF(name[0] == 'a' && name[1] == (b >= 'A' && b <= 'Z' ? b + 32 : b) && name[2] == 'z', "byte %d", b);
    }
    char empty[1] = { 0 };
    CHECK(!http1_name_ok(empty, 0));
}

static void path_decode_refuses_dot_segments_in_one_pass(void)
{
    static const char *const bad[] = { "/.", "/..", "/a/..", "/a/../b", "/./a", "/a/.", "/%2e%2e/x", "/a%2f..%2fb", "//..//a",
                                       "/a/%2E", "/%00", "/a%zz", "/a%2", "/%2e" };
    static const struct { const char *in, *out; } good[] = {
        { "/", "/" }, { "/a", "/a" }, { "//a//b/", "/a/b/" }, { "/a.b/.c/..d/...", "/a.b/.c/..d/..." },
        { "/a%20b?x=/../", "/a b" }, { "/sub/style.css#..", "/sub/style.css" }, { "/%41", "/A" },
        { "/a/%2f/b", "/a/b" }, { "", "/" },
    };
    char out[64];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(path_decode(bad[i], out, sizeof out, NULL) == -1, "%s decoded to '%s'", bad[i], out);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECKF(path_decode(good[i].in, out, sizeof out, NULL) == (int)strlen(good[i].out) && !strcmp(out, good[i].out),
               "%s -> '%s', want '%s'", good[i].in, out, good[i].out);
    /* dotted: a segment that begins with a dot, wherever it is (the dotfile check trusts it). */
    static const struct { const char *in; bool dotted; } dots[] = {
        { "/a.b/c.d", false }, { "/.env", true }, { "/a/.git/config", true }, { "/a/.x", true },
        { "/a%2f.x", true }, { "/..a", true }, { "/a./b", false }, { "/", false },
    };
    for (size_t i = 0; i < sizeof dots / sizeof dots[0]; i++) {
        bool dotted = !dots[i].dotted;
        CHECKF(path_decode(dots[i].in, out, sizeof out, &dotted) > 0 && dotted == dots[i].dotted, "%s: %d", dots[i].in,
               dotted);
    }
    CHECK(path_decode("/abcdefgh", out, 8, NULL) == -1);         /* longer than the room */
}

int main(void)
{
    mem_install_hooks();
    RUN(near_behind_is_1_to_63_bytes_modulo_4096);
    RUN(copy_apart_copies_exactly);
    RUN(classes_from_1k_start_32_aligned);
    RUN(record_buffers_put_payload_half_a_page_in);
    RUN(field_copy_is_memcpy);
    RUN(field_copy_lower_lowers_ascii_letters_only);
    RUN(http1_value_ok_is_the_byte_rule);
    RUN(http1_name_ok_takes_tokens_lowered);
    RUN(path_decode_refuses_dot_segments_in_one_pass);
    CHECK_DONE();
}
