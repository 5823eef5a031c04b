/* SPDX-License-Identifier: MIT */
/*
 * table.c — fiberctl's tables on libsmartcols (util-linux's table library, the one lsblk
 * and findmnt print with). It measures every cell, so a 32-character plugin name widens
 * its column instead of pushing the rest of the row out of line; on a terminal the
 * TABLE_TRUNC columns are cut to fit its width. This file keeps smartcols' calls in one
 * place: the verbs only name columns and fill cells.
 */
#include "client/table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <libsmartcols.h>

#include "client/term.h"

struct Table {
        struct libscols_table *tb;
        struct libscols_line *row; /* the row being filled; owned by tb */
        bool colour;
};

Table *table_new(bool colour, unsigned width)
{
        Table *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->tb = scols_new_table();
        if (!t->tb) {
                free(t);
                return NULL;
        }
        t->colour = colour;
        scols_table_enable_colors(t->tb, colour);
        if (width > 0) {
                /* a screen of known size: cut to it whatever stdout is */
                scols_table_set_termforce(t->tb, SCOLS_TERMFORCE_ALWAYS);
                scols_table_set_termwidth(t->tb, width);
        }
        /* else smartcols asks stdout: a terminal's width (TIOCGWINSZ, $COLUMNS), or no
         * limit for a pipe */
        return t;
}

Table *table_free(Table *t)
{
        if (!t)
                return NULL;
        scols_unref_table(t->tb);
        free(t);
        return NULL;
}

int table_column(Table *t, const char *name, unsigned flags, double share)
{
        int fl = 0;

        if (flags & TABLE_RIGHT)
                fl |= SCOLS_FL_RIGHT;
        if (flags & TABLE_TRUNC)
                fl |= SCOLS_FL_TRUNC;
        return scols_table_new_column(t->tb, name, share, fl) ? 0 : -ENOMEM;
}

int table_row(Table *t)
{
        t->row = scols_table_new_line(t->tb, NULL);
        return t->row ? 0 : -ENOMEM;
}

__attribute__((format(printf, 4, 0))) static int
table_cellv(Table *t, size_t column, const char *colour, const char *fmt, va_list ap)
{
        char *text;

        if (!t->row || column >= scols_table_get_ncols(t->tb))
                return -EINVAL;
        if (vasprintf(&text, fmt, ap) < 0)
                return -ENOMEM;
        /* refer_data: the cell owns text from here on, also when it fails */
        if (scols_line_refer_data(t->row, column, text) < 0)
                return -ENOMEM;
        if (colour && colour[0])
                scols_cell_set_color(scols_line_get_cell(t->row, column), colour);
        return 0;
}

int table_cell(Table *t, size_t column, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        int r = table_cellv(t, column, NULL, fmt, ap);
        va_end(ap);
        return r;
}

/* A va_list wrapper, so the state goes through the same path as every cell. */
__attribute__((format(printf, 4, 5))) static int
table_cell_coloured(Table *t, size_t column, const char *colour, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        int r = table_cellv(t, column, colour, fmt, ap);
        va_end(ap);
        return r;
}

int table_cell_state(Table *t, size_t column, const char *state)
{
        return table_cell_coloured(t, column, t->colour ? term_state_colour(state) : NULL, "%s",
                                   state);
}

int table_print(Table *t, FILE *f)
{
        scols_table_set_stream(t->tb, f);
        return scols_print_table(t->tb);
}

int table_to_string(Table *t, char **ret_text)
{
        char *text = NULL;

        if (scols_print_table_to_string(t->tb, &text) < 0 || !text)
                return -ENOMEM;
        *ret_text = text;
        return 0;
}
