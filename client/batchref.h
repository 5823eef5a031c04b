/* SPDX-License-Identifier: MIT */
/*
 * batchref.h — the "after" of a `fiberctl batch` line (client/): job ids, and references
 * to the jobs of earlier lines of the same input ("#3" = the job of line 3, 1-based),
 * replaced by those jobs' ids once fiberd has given them.
 *
 * A line may only run after lines above it: a reference to itself or to a later line
 * would be a cycle (or wait on input not read yet), and is refused at once. The batch
 * keeps what it knows of every line it read (BatchRefLine below) and asks
 * batchref_resolve() again whenever a line's fate becomes known, so a line whose
 * references are still in flight is held back and sent as soon as they are answered.
 *
 * Pure functions over jansson values, no I/O. Context: any thread.
 */
#ifndef FIBERD_CLIENT_BATCHREF_H
#define FIBERD_CLIENT_BATCHREF_H

#include <stddef.h>

#include <jansson.h>

/*
 * What the batch knows of one line: its job's id (> 0) once fiberd answered with one,
 * or one of these.
 */
enum {
        BATCHREF_PENDING = 0,  /* its request is in flight, or held back itself */
        BATCHREF_NO_JOB = -1,  /* a blank line, or one that was not a job spec */
        BATCHREF_REFUSED = -2, /* fiberd refused it (or a line it refers to was refused) */
};

/*
 * batchref_resolve - the "after" of batch line @line (from 1) with its references
 * replaced by job ids.
 * @after: the line's "after", an array whose items are job ids (positive integers) or
 * strings "#N" naming line N; NULL or JSON null stand for none.
 * @lines: what the batch knows of lines 1..@line-1: @lines[n - 1] is line n's job id
 * or a BATCHREF_* value; only entries below @line are read.
 * @ret_after: out, a new array of job ids in the order given (caller owns), written
 * only when 0 is returned.
 * @why, @why_size: on a negative return, a sentence saying which item and why.
 * Return: 0; 1 when a line it refers to is still BATCHREF_PENDING (ask again once it is
 * answered); -EINVAL when @after is not such an array, an item is neither an id nor
 * "#N", a reference names @line itself or a later line (a cycle), or a line that holds
 * no job, or there are more than IPC_AFTER_MAX items; -EALREADY (FAILED_PRECONDITION)
 * when a line it refers to was refused; -ENOMEM. A cycle is refused whatever else is
 * still pending, so it is reported when the line is read.
 */
int batchref_resolve(const json_t *after, unsigned long line, const json_int_t *lines,
                     json_t **ret_after, char *why, size_t why_size);

#endif /* FIBERD_CLIENT_BATCHREF_H */
