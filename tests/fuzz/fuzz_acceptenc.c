/* Fuzz target: the Accept-Encoding choice (server/runtime/acceptenc.c).  The first byte
 * picks the server's order of codings, the rest is the field.  Checked for every input:
 * the choice is identity or one of the server's codings; a refusal of the chosen coding
 * added at the end ("," c ";q=0") takes it away, whatever came before; and a malformed
 * element added at either end changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/acceptenc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    static const uint8_t orders[][3] = {
        { CODING_ZSTD, CODING_BR, CODING_GZIP }, { CODING_GZIP, CODING_BR, CODING_ZSTD },
        { CODING_BR, CODING_GZIP, 0 }, { CODING_GZIP, 0, 0 },
    };
    const uint8_t *prefs = orders[data[0] & 3];
    size_t n = (data[0] & 3) == 2 ? 2 : (data[0] & 3) == 3 ? 1 : 3;
    char *f = malloc(size + 32);
    if (!f)
        abort();
    memcpy(f, data + 1, size - 1);
    f[size - 1] = 0;
    size_t len = strlen(f);          /* a field holds no NUL: what follows one is not the field */
    enum coding c = acceptenc_choose(f, prefs, n);
    bool listed = c == CODING_IDENTITY;
    for (size_t i = 0; i < n; i++)
        listed |= prefs[i] == c;
    if (!listed)
        abort();
    if (c != CODING_IDENTITY) {
        strcpy(f + len, ",");
        strcat(f, coding_name[c]);
        strcat(f, ";q=0");
        if (acceptenc_choose(f, prefs, n) == c)
            abort();                 /* a refusal is a refusal */
    }
    f[len] = 0;
    strcat(f, ",\x01;q=x");
    if (acceptenc_choose(f, prefs, n) != c)
        abort();
    memmove(f + 4, f, len + 1);
    memcpy(f, "\"\";,", 4);
    if (acceptenc_choose(f, prefs, n) != c)
        abort();
    free(f);
    return 0;
}
