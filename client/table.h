/* SPDX-License-Identifier: MIT */
/*
 * table.h — fiberctl's tables (client/): columns sized to their content by Debian's
 * libsmartcols (util-linux), right-aligned numbers, over-long cells cut to the terminal's
 * width on a terminal, job states coloured when term_colour() allows. Internal to the
 * fiberctl binary; every function is for the main thread.
 *
 * Piped, a table is never cut and never coloured: every cell is there in full, columns
 * separated by at least one space, so `awk '{print $1}'` (the bash completion) reads it.
 * --json does not come here: the verbs print fiberd's own JSON, whose shape stays the
 * protocol's (smartcols' JSON would rename and re-nest the keys).
 */
#ifndef FIBERD_CLIENT_TABLE_H
#define FIBERD_CLIENT_TABLE_H

#include <stdbool.h>
#include <stdio.h>

/* Column flags for table_column(). */
enum {
        TABLE_RIGHT = 1 << 0, /* right-aligned: numbers */
        TABLE_TRUNC = 1 << 1, /* may be cut to fit the terminal's width */
};

typedef struct Table Table;

/*
 * table_new - an empty table. @colour: whether table_cell_state() colours (the caller's
 * term_colour() && !json). @width: 0 = the width of stdout's terminal when stdout is
 * one (and no limit when it is not); > 0 = always fit this many columns (`top`'s screen).
 * Return: the table, or NULL when out of memory. Free with table_free().
 */
Table *table_new(bool colour, unsigned width);

/* table_free - free @t; accepts NULL, returns NULL. */
Table *table_free(Table *t);

/*
 * table_column - add a column headed @name with TABLE_* @flags; columns are numbered
 * from 0 in the order added. @share: for a TABLE_TRUNC column, the part of the width it
 * may keep when cut, 0..1 (0 = as smartcols sees fit). Return: 0 or -ENOMEM.
 */
int table_column(Table *t, const char *name, unsigned flags, double share);

/* table_row - start a new row; the cells that follow fill it. Return: 0 or -ENOMEM. */
int table_row(Table *t);

/*
 * table_cell - set cell @column of the current row to the printf of @fmt (copied).
 * Return: 0, -EINVAL (no row or no such column), -ENOMEM.
 */
__attribute__((format(printf, 3, 4))) int table_cell(Table *t, size_t column, const char *fmt, ...);

/* table_cell_state - table_cell() with a job state, coloured as term_state_colour() says
 * when the table colours. */
int table_cell_state(Table *t, size_t column, const char *state);

/* table_print - write the table (header first) to @f. Return: 0 or -errno. */
int table_print(Table *t, FILE *f);

/*
 * table_to_string - the table as text (lines ending in '\n', no trailing one), in
 * *@ret_text (caller frees) — for `top`, which draws a whole screen at once.
 * Return: 0 or -ENOMEM.
 */
int table_to_string(Table *t, char **ret_text);

#endif /* FIBERD_CLIENT_TABLE_H */
