/* Content codings a response may be sent in, and the choice among them by a request's
 * Accept-Encoding (RFC 9110 12.5.3): arithmetic on a string alone (acceptenc.c). */
#ifndef H2PARK_ACCEPTENC_H
#define H2PARK_ACCEPTENC_H

#include <stddef.h>
#include <stdint.h>

/* The codings h2park compresses in; CODING_IDENTITY is "as it is". */
enum coding { CODING_IDENTITY, CODING_GZIP, CODING_BR, CODING_ZSTD, CODING_COUNT };
#ifdef COUNTED_CODINGS
_Static_assert(CODING_COUNT == COUNTED_CODINGS, "counters.h counts every coding");
#endif

/* The token each coding is sent as in Content-Encoding ("" for identity). */
extern const char *const coding_name[CODING_COUNT];

/* The coding to send a response in, given the request's Accept-Encoding field (NULL: none)
 * and the server's codings in its order of preference (prefs[0] first, n of them): the one
 * with the highest weight the client gives it, a tie going to the earlier in prefs.  A
 * client that refuses them all (q=0, or does not list them), or prefers identity outright
 * (a greater weight on identity than on any coding), gets CODING_IDENTITY - also when it
 * refused identity too (identity;q=0): the body then goes as it is, as nginx sends it,
 * rather than a 406.  An element that is not the grammar's (a bad weight, a parameter other
 * than q, a stray byte) is ignored alone; a coding named twice counts with its lower
 * weight (a refusal anywhere is a refusal). */
enum coding acceptenc_choose(const char *field, const uint8_t *prefs, size_t n);

#endif
