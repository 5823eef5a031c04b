/* SPDX-License-Identifier: MIT */
/*
 * duration.h — durations as an operator writes them ("500ms", "30s", "1h30m"), for a
 * schedule's `--every` and any other option that takes a length of time.
 *
 * A duration is one or more groups of a decimal number and a unit: ms, s, m (minutes),
 * h, d (24 hours); the units come largest first, each at most once ("1h30m", "1d12h",
 * "2m30s500ms"); a bare number alone is seconds ("90"). Nothing else is read: no sign,
 * no fraction, no blanks, no other unit names. A typo such as "1m30" or "30m1h" is
 * refused rather than guessed at. Zero is refused too: every use so far is a period,
 * and a period of nothing is a mistake.
 *
 * The client's convert_duration_ms() (client/convert.c) reads a looser, older grammar
 * for timeouts (one unit, decimals); the two may meet later, in the lowest layer both
 * use.
 */
#ifndef FIBERD_DAEMON_DURATION_H
#define FIBERD_DAEMON_DURATION_H

#include <stdint.h>

/*
 * duration_parse_ms - the duration @s in milliseconds (see the top of this file).
 * @ret_ms: out, written only on success; never 0.
 * Return: 0; -EINVAL: NULL, empty, not the grammar above, zero, or more than
 * UINT64_MAX milliseconds.
 * Context: any thread; pure.
 */
int duration_parse_ms(const char *s, uint64_t *ret_ms);

#endif /* FIBERD_DAEMON_DURATION_H */
