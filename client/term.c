/* SPDX-License-Identifier: MIT */
/*
 * term.c — terminal facts for fiberctl: is it a terminal, how wide, may it be coloured.
 *
 * NO_COLOR follows https://no-color.org: when it is present and not empty, no colour,
 * whatever else says yes. The width comes from the terminal itself (TIOCGWINSZ), so a
 * resized window is seen at the next call; $COLUMNS is the fallback for a stream that is
 * not one (a user may set it to size a table written to a pipe).
 */
#include "client/term.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ipc/protocol.h"
#include "scheduler/base/macro.h"

#define TERM_DEFAULT_WIDTH 80

bool term_is_tty(FILE *f)
{
        return isatty(fileno(f)) == 1;
}

bool term_colour(FILE *f)
{
        const char *no_colour = getenv("NO_COLOR");
        const char *term = getenv("TERM");

        if (no_colour && no_colour[0] != '\0')
                return false;
        if (term && strcmp(term, "dumb") == 0)
                return false;
        return term_is_tty(f);
}

unsigned term_width(FILE *f)
{
        struct winsize ws;

        if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                return ws.ws_col;
        const char *columns = getenv("COLUMNS");
        if (columns) {
                long v = strtol(columns, NULL, 10);
                if (v > 0 && v < 100000)
                        return (unsigned)v;
        }
        return TERM_DEFAULT_WIDTH;
}

const char *term_state_colour(const char *state)
{
        static const struct {
                const char *state, *sgr;
        } colours[] = {
                {IPC_STATE_DONE, TERM_SGR_GREEN},       {IPC_STATE_FAILED, TERM_SGR_RED},
                {IPC_STATE_CANCELLED, TERM_SGR_YELLOW}, {IPC_STATE_RUNNING, TERM_SGR_BLUE},
                {IPC_STATE_QUEUED, TERM_SGR_GREY},      {IPC_STATE_SCHEDULED, TERM_SGR_GREY},
                {IPC_STATE_WAITING, TERM_SGR_GREY},     {IPC_STATE_RETRYING, TERM_SGR_YELLOW},
                {IPC_STATE_DEAD, TERM_SGR_RED},
        };

        for (size_t i = 0; state && i < ELEMENTSOF(colours); i++)
                if (strcmp(state, colours[i].state) == 0)
                        return colours[i].sgr;
        return "";
}
