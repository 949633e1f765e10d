/* Unit tests of the Accept-Encoding choice (server/runtime/acceptenc.c): weights, ties
 * by the server's order, '*', identity, case, OWS, duplicates, and fields that are not
 * the grammar - each broken element ignored alone, the rest still counting. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/acceptenc.h"

static const uint8_t ZBG[] = { CODING_ZSTD, CODING_BR, CODING_GZIP };
static const uint8_t GZ[] = { CODING_GZIP };
static const uint8_t BG[] = { CODING_BR, CODING_GZIP };

#define CHOOSE(f, prefs) acceptenc_choose(f, prefs, sizeof prefs)

static void none_or_empty_is_identity(void)
{
    CHECK(CHOOSE(NULL, ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE(" , ,", ZBG) == CODING_IDENTITY);
    CHECK(acceptenc_choose("gzip", ZBG, 0) == CODING_IDENTITY);
    CHECK(CHOOSE("deflate, compress", ZBG) == CODING_IDENTITY);   /* codings h2park does not make */
}

static void ties_go_by_server_order(void)
{
    CHECK(CHOOSE("gzip, deflate, br, zstd", ZBG) == CODING_ZSTD);   /* Chromium's */
    CHECK(CHOOSE("gzip, deflate, br", ZBG) == CODING_BR);           /* Firefox's before zstd */
    CHECK(CHOOSE("gzip, deflate", ZBG) == CODING_GZIP);             /* curl --compressed without br */
    CHECK(CHOOSE("gzip, deflate, br, zstd", BG) == CODING_BR);
    CHECK(CHOOSE("br, zstd", GZ) == CODING_IDENTITY);
}

static void highest_weight_wins(void)
{
    CHECK(CHOOSE("zstd;q=0.5, gzip;q=0.9, br;q=0.8", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=0.001, gzip;q=0", ZBG) == CODING_ZSTD);
    CHECK(CHOOSE("zstd;q=0.999, br", ZBG) == CODING_BR);
    CHECK(CHOOSE("zstd;q=1.000, br;q=1", ZBG) == CODING_ZSTD);
    CHECK(CHOOSE("gzip;q=0, br;q=0.0, zstd;q=0.000", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("br;q=0.1, gzip;q=0.10", ZBG) == CODING_BR);    /* equal weights written two ways */
}

static void star_covers_what_is_not_named(void)
{
    CHECK(CHOOSE("*", ZBG) == CODING_ZSTD);
    CHECK(CHOOSE("*;q=0.5, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=0, *", ZBG) == CODING_BR);
    CHECK(CHOOSE("*;q=0", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("*;q=0, gzip;q=0.2", ZBG) == CODING_GZIP);
}

static void identity(void)
{
    /* refused, with nothing else acceptable: sent as it is all the same (as nginx) */
    CHECK(CHOOSE("identity;q=0", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("identity;q=0, *;q=0", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("identity;q=0, gzip", ZBG) == CODING_GZIP);
    /* preferred outright: not compressed; a tie compresses */
    CHECK(CHOOSE("gzip;q=0.5, identity", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("gzip, identity", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("gzip;q=0.5, identity;q=0.4", ZBG) == CODING_GZIP);
}

static void case_and_whitespace(void)
{
    CHECK(CHOOSE("GZIP", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("Br;Q=0.5,gZiP;q=0.4", ZBG) == CODING_BR);
    CHECK(CHOOSE(" \tzstd \t; \tq=0.3\t ,\tgzip;q=0.2 ", ZBG) == CODING_ZSTD);
    CHECK(CHOOSE("x-gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("X-GZIP;q=0.7, br;q=0.6", ZBG) == CODING_GZIP);
}

static void duplicates_take_the_lower_weight(void)
{
    CHECK(CHOOSE("gzip, gzip;q=0", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("gzip;q=0, gzip", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("br;q=0.9, gzip, br;q=0.2", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("gzip;q=0, x-gzip", ZBG) == CODING_IDENTITY);   /* the same coding by two names */
}

static void malformed_elements_ignored_alone(void)
{
    /* weights outside the grammar: more than 3 decimals, over 1, signs, exponents, spaces */
    CHECK(CHOOSE("zstd;q=0.0001, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=1.001, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=2, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=-1, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=1e0, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=.5, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=0.5x, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q = 0.5, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;level=3, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd;q=0.5;q=0.6, gzip", ZBG) == CODING_GZIP);
    CHECK(CHOOSE("zstd q=0.5, gzip", ZBG) == CODING_GZIP);
    /* a refusal that is itself malformed refuses nothing */
    CHECK(CHOOSE("gzip, gzip;q=0.0000", ZBG) == CODING_GZIP);
    /* tokens that are not tokens, near misses of the names */
    CHECK(CHOOSE("\"gzip\", br", ZBG) == CODING_BR);
    CHECK(CHOOSE("gzip2, brr, zst, x-br, gzi", ZBG) == CODING_IDENTITY);
    CHECK(CHOOSE("g\x01zip, br", ZBG) == CODING_BR);
    CHECK(CHOOSE("gz\xffip, \xff, br;q=0.1", ZBG) == CODING_BR);
    CHECK(CHOOSE(";q=1, ;, =, br", ZBG) == CODING_BR);
}

static void long_fields(void)
{
    /* 100,000 elements: one pass, no recursion, the last element still read */
    size_t n = 100000;
    char *f = malloc(n * 6 + 16);
    CHECK(f);
    char *p = f;
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "a%03zu, ", i % 1000);
    strcpy(p, "br;q=0.3");
    enum coding c = CHOOSE(f, ZBG);
    free(f);
    CHECK(c == CODING_BR);
}

static void names(void)
{
    CHECK(!strcmp(coding_name[CODING_GZIP], "gzip"));
    CHECK(!strcmp(coding_name[CODING_BR], "br"));
    CHECK(!strcmp(coding_name[CODING_ZSTD], "zstd"));
    CHECK(!strcmp(coding_name[CODING_IDENTITY], ""));
}

int main(void)
{
    RUN(none_or_empty_is_identity);
    RUN(ties_go_by_server_order);
    RUN(highest_weight_wins);
    RUN(star_covers_what_is_not_named);
    RUN(identity);
    RUN(case_and_whitespace);
    RUN(duplicates_take_the_lower_weight);
    RUN(malformed_elements_ignored_alone);
    RUN(long_fields);
    RUN(names);
    CHECK_DONE();
}
