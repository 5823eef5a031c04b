/* SPDX-License-Identifier: MIT */
/*
 * test_fleetmerge.c — fleet_ids_merge() (daemon/store/fleet.h): how a fleet's job.list
 * lists this host's job.runs in progress, which no shared index holds yet, among the
 * index's ids, page by page.
 *
 * What is checked: the two lists interleave newest first; an id of this host's that is
 * above a full page's last id goes out with that page, one below it waits for the next
 * page; an id in both lists (its record written while the listing ran) goes out once,
 * also when it is a full page's last id; once the index ends, every id left of this
 * host's goes out; an empty index gives this host's ids alone. The walk over pages is
 * fleet_list()'s: each page is asked below the last id listed.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "daemon/store/fleet.h"

/* The shared index's ids below @below (0: from the newest), newest first, at most @max,
 * out of @index (newest first, @n ids), as store_list() answers; *@more as fleet_list()
 * reads it (a full page). */
static size_t index_page(const uint64_t *index, size_t n, uint64_t below, size_t max, uint64_t *ret,
                         bool *more)
{
        size_t k = 0;

        for (size_t i = 0; i < n && k < max; i++)
                if (!below || index[i] < below)
                        ret[k++] = index[i];
        *more = k == max;
        return k;
}

/* Lists @index merged with @mine (both newest first) in pages of @page ids, as
 * fleet_list() walks them, into @out; the ids listed. */
static size_t walk(const uint64_t *index, size_t n_index, const uint64_t *mine, size_t n_mine,
                   size_t page, uint64_t *out)
{
        uint64_t shared[16], merged[64], below = 0;
        size_t m = 0, n = 0;
        bool more = true;

        cr_assert_leq(page, 16);
        while (more) {
                size_t got = index_page(index, n_index, below, page, shared, &more);
                got = fleet_ids_merge(shared, got, more, mine, n_mine, &m, merged);
                for (size_t i = 0; i < got; i++) {
                        out[n++] = merged[i];
                        below = merged[i];
                }
        }
        return n;
}

static void assert_ids(const uint64_t *got, size_t n, const uint64_t *want, size_t n_want)
{
        cr_assert_eq(n, n_want, "%zu ids listed, want %zu", n, n_want);
        for (size_t i = 0; i < n; i++)
                cr_assert_eq(got[i], want[i], "id %zu: %llu, want %llu", i,
                             (unsigned long long)got[i], (unsigned long long)want[i]);
}

Test(fleetmerge, interleaves_newest_first_across_pages)
{
        const uint64_t index[] = {20, 18, 15, 12, 9, 5, 2};
        const uint64_t mine[] = {21, 16, 13, 11, 3, 1};
        const uint64_t want[] = {21, 20, 18, 16, 15, 13, 12, 11, 9, 5, 3, 2, 1};
        uint64_t out[64];

        for (size_t page = 1; page <= 8; page++)
                assert_ids(out, walk(index, 7, mine, 6, page, out), want, 13);
}

Test(fleetmerge, an_id_in_both_is_listed_once)
{
        /* 15 and 9 were written while the listing ran: in both lists */
        const uint64_t index[] = {20, 15, 12, 9, 5};
        const uint64_t mine[] = {17, 15, 9, 7};
        const uint64_t want[] = {20, 17, 15, 12, 9, 7, 5};
        uint64_t out[64];

        for (size_t page = 1; page <= 6; page++)
                assert_ids(out, walk(index, 5, mine, 4, page, out), want, 7);
}

Test(fleetmerge, an_id_in_both_at_a_full_pages_end_is_listed_once)
{
        /* pages of two: 15 ends the first page, and is this host's too */
        const uint64_t index[] = {20, 15, 12, 9};
        const uint64_t mine[] = {15, 10};
        const uint64_t want[] = {20, 15, 12, 10, 9};
        uint64_t shared[2], merged[8], out[16];
        size_t m = 0, got;
        bool more;

        got = index_page(index, 4, 0, 2, shared, &more);
        cr_assert(more);
        got = fleet_ids_merge(shared, got, more, mine, 2, &m, merged);
        assert_ids(merged, got, want, 2);
        cr_assert_eq(m, 1, "15 went out once; 10 waits for the next page");
        assert_ids(out, walk(index, 4, mine, 2, 2, out), want, 5);
}

Test(fleetmerge, an_empty_index_lists_this_hosts_ids)
{
        const uint64_t mine[] = {9, 4, 2};
        uint64_t out[16];

        assert_ids(out, walk(NULL, 0, mine, 3, 4, out), mine, 3);
}

Test(fleetmerge, no_ids_of_this_host_lists_the_index)
{
        const uint64_t index[] = {8, 6, 4, 3, 1};
        uint64_t out[16];

        for (size_t page = 1; page <= 6; page++)
                assert_ids(out, walk(index, 5, NULL, 0, page, out), index, 5);
}
