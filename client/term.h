/* SPDX-License-Identifier: MIT */
/*
 * term.h — what fiberctl knows about the terminal it writes to (client/): whether a
 * stream is a terminal, its width, and whether to colour (https://no-color.org).
 * Internal to the fiberctl binary; every function is for the main thread.
 *
 * Colour and progress are for people: they appear only when the stream is a terminal,
 * never under --json, never when piped, and colour never when NO_COLOR is set to
 * anything but the empty string or TERM is "dumb".
 */
#ifndef FIBERD_CLIENT_TERM_H
#define FIBERD_CLIENT_TERM_H

#include <stdbool.h>
#include <stdio.h>

/* SGR sequences fiberctl uses; term_state_colour() picks one for a job state. */
#define TERM_SGR_RESET "\033[0m"
#define TERM_SGR_BOLD "\033[1m"
#define TERM_SGR_RED "\033[31m"
#define TERM_SGR_GREEN "\033[32m"
#define TERM_SGR_YELLOW "\033[33m"
#define TERM_SGR_BLUE "\033[34m"
#define TERM_SGR_GREY "\033[90m"

/* term_is_tty - whether @f is a terminal (isatty(3) on its fd). */
bool term_is_tty(FILE *f);

/*
 * term_colour - whether output to @f may be coloured: @f is a terminal, NO_COLOR is
 * unset or empty, TERM is not "dumb". The caller adds its own "not under --json".
 */
bool term_colour(FILE *f);

/*
 * term_width - the width of the terminal @f writes to, in columns: TIOCGWINSZ, else
 * $COLUMNS, else 80. Read again on every call, so a resize is seen.
 */
unsigned term_width(FILE *f);

/*
 * term_state_colour - the SGR sequence for a job state ("done" green, "failed" and
 * "dead" red, "cancelled" and "retrying" yellow, "running" blue, "queued", "scheduled"
 * and "waiting" grey), or "" for anything else. A constant string; the caller prints
 * TERM_SGR_RESET after the coloured text.
 */
const char *term_state_colour(const char *state);

#endif /* FIBERD_CLIENT_TERM_H */
