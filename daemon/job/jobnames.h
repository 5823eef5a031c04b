/* SPDX-License-Identifier: MIT */
/*
 * jobnames.h — the plugin and class names jobs carry, interned: every job of the
 * plugin "sha256" points at one shared copy of "sha256" instead of holding its own.
 *
 * A finished job's record is kept for its retention (jobtable.h) and a host keeps tens
 * of thousands of them; a copy of each name per job would cost a malloc chunk per name
 * (32 bytes for a name of up to 24) beside the Job itself. The names a daemon ever sees
 * are few (its loaded plugins, its configured classes, and the names of the records its
 * store restores), so each distinct name is kept once, until exit, and never freed:
 * a pointer from jobnames_intern() stays valid for the life of the process, which is
 * what lets a Job hold it without a reference.
 *
 * A chained hash of a fixed bucket count. Entries are only ever added: a look-up reads
 * the chains without a lock (each entry is published with a release store after it is
 * whole), an insertion takes a mutex, so the submission path does not serialize on it.
 * Context: any thread or fiber; nothing here yields.
 */
#ifndef FIBERD_DAEMON_JOBNAMES_H
#define FIBERD_DAEMON_JOBNAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/*
 * jobnames_intern - the one shared copy of @name cut to at most @max bytes (a class name
 * is kept to SCHED_CLASS_NAME_MAX, as the job's fixed buffer once did); @max 0 = whole.
 * Return: a NUL-terminated string valid until exit (never free it); NULL when out of
 * memory. Context: any; does not yield.
 */
const char *jobnames_intern(const char *name, size_t max);

/*
 * jobnames_match - @name is the name kept as @copy, whose jobnames_intern() is @interned
 * (NULL: none, out of memory): a job's name, interned too, matches by its pointer, any
 * other by content. Context: any.
 */
static inline bool jobnames_match(const char *interned, const char *copy, const char *name)
{
        return interned == name || strcmp(copy, name) == 0;
}

#endif
