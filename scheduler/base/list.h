/* SPDX-License-Identifier: MIT */
/*
 * list.h — one intrusive doubly linked list for everyone (the kernel's list.h, libuv's
 * queue.h): a ListHead is embedded in the element, so linking never allocates, and
 * unlinking is O(1) given the element. The list is circular with a sentinel head, so
 * no operation tests for an empty neighbour.
 *
 * Not thread-safe: the caller holds whatever lock guards the list. Header-only, libc
 * only: every folder may include it (see macro.h).
 */
#ifndef FIBERD_BASE_LIST_H
#define FIBERD_BASE_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "scheduler/base/macro.h"

typedef struct ListHead {
        struct ListHead *next, *prev;
} ListHead;

#define LIST_HEAD_INIT(name)                                                                       \
        {                                                                                          \
                &(name), &(name)                                                                   \
        }

/* list_init - an empty list (or an unlinked element: list_linked() is then false). */
static inline void list_init(ListHead *h)
{
        h->next = h->prev = h;
}

static inline bool list_empty(const ListHead *h)
{
        return h->next == h;
}

/* list_linked - @e is on a list (it was list_init()ed or list_del()ed otherwise). */
static inline bool list_linked(const ListHead *e)
{
        return e->next != e;
}

static inline void list__insert(ListHead *e, ListHead *prev, ListHead *next)
{
        next->prev = e;
        e->next = next;
        e->prev = prev;
        prev->next = e;
}

/* list_add_head - link @e first in @h. */
static inline void list_add_head(ListHead *h, ListHead *e)
{
        list__insert(e, h, h->next);
}

/* list_add_tail - link @e last in @h. */
static inline void list_add_tail(ListHead *h, ListHead *e)
{
        list__insert(e, h->prev, h);
}

/* list_del - unlink @e from its list and leave it unlinked (list_linked() false). */
static inline void list_del(ListHead *e)
{
        e->next->prev = e->prev;
        e->prev->next = e->next;
        list_init(e);
}

/* list_first - the first element's link, or NULL for an empty list. */
static inline ListHead *list_first(const ListHead *h)
{
        return list_empty(h) ? NULL : h->next;
}

/* list_pop_head - unlink and return the first element's link, or NULL. */
static inline ListHead *list_pop_head(ListHead *h)
{
        ListHead *e = list_first(h);
        if (e)
                list_del(e);
        return e;
}

#define list_entry(ptr, type, member) container_of(ptr, type, member)

/* list_for_each_safe - iterate @pos over @h; @pos may be unlinked in the body. */
#define list_for_each_safe(pos, tmp, h)                                                            \
        for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h);                                 \
             (pos) = (tmp), (tmp) = (pos)->next)

#endif /* FIBERD_BASE_LIST_H */
