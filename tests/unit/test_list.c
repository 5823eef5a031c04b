/* SPDX-License-Identifier: MIT */
/* base/list.h, the intrusive list the wait lists are built on: the order elements come
 * out in, unlinking during iteration, and an element linked again after list_del(). */
#include <criterion/criterion.h>

#include "scheduler/base/list.h"

typedef struct Item {
        int value;
        ListHead link;
} Item;

/* The values of @h, front to back, into @out; returns how many. */
static int values(const ListHead *h, int *out, int max)
{
        int n = 0;
        for (const ListHead *e = h->next; e != h && n < max; e = e->next)
                out[n++] = list_entry(e, Item, link)->value;
        return n;
}

static void expect(const ListHead *h, const int *want, int n)
{
        int got[16];
        cr_assert_eq(values(h, got, 16), n);
        for (int i = 0; i < n; i++)
                cr_assert_eq(got[i], want[i], "element %d: %d, expected %d", i, got[i], want[i]);
}

Test(list, empty)
{
        ListHead h = LIST_HEAD_INIT(h);

        cr_assert(list_empty(&h));
        cr_assert_null(list_first(&h));
        cr_assert_null(list_pop_head(&h));
}

Test(list, add_tail_and_add_head_order)
{
        ListHead h;
        Item it[4] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}};

        list_init(&h);
        list_add_tail(&h, &it[1].link);
        list_add_tail(&h, &it[2].link);
        list_add_head(&h, &it[0].link);
        list_add_tail(&h, &it[3].link);
        expect(&h, (int[]){0, 1, 2, 3}, 4);
        cr_assert(!list_empty(&h));
        cr_assert_eq(list_entry(list_first(&h), Item, link), &it[0]);
        for (int i = 0; i < 4; i++)
                cr_assert(list_linked(&it[i].link));
}

Test(list, pop_head_is_fifo_after_add_tail)
{
        ListHead h = LIST_HEAD_INIT(h);
        Item it[3] = {{.value = 10}, {.value = 11}, {.value = 12}};
        ListHead *e;

        for (int i = 0; i < 3; i++)
                list_add_tail(&h, &it[i].link);
        for (int i = 0; i < 3; i++) {
                e = list_pop_head(&h);
                cr_assert_not_null(e);
                cr_assert_eq(list_entry(e, Item, link)->value, 10 + i);
                cr_assert(!list_linked(e), "a popped element is unlinked");
        }
        cr_assert(list_empty(&h));
        cr_assert_null(list_pop_head(&h));
}

Test(list, del_from_head_middle_and_tail)
{
        ListHead h = LIST_HEAD_INIT(h);
        Item it[5];

        for (int i = 0; i < 5; i++) {
                it[i].value = i;
                list_add_tail(&h, &it[i].link);
        }
        list_del(&it[2].link); /* middle */
        expect(&h, (int[]){0, 1, 3, 4}, 4);
        list_del(&it[0].link); /* head */
        expect(&h, (int[]){1, 3, 4}, 3);
        list_del(&it[4].link); /* tail */
        expect(&h, (int[]){1, 3}, 2);
        cr_assert(!list_linked(&it[0].link));
        cr_assert(!list_linked(&it[2].link));
        cr_assert(!list_linked(&it[4].link));
        cr_assert(list_linked(&it[1].link));
        /* walking back from the head still sees the same two, reversed */
        cr_assert_eq(list_entry(h.prev, Item, link)->value, 3);
        cr_assert_eq(list_entry(h.prev->prev, Item, link)->value, 1);
        cr_assert_eq(h.prev->prev->prev, &h);
}

Test(list, for_each_safe_deleting)
{
        ListHead h = LIST_HEAD_INIT(h), *e, *tmp;
        Item it[8];
        int seen = 0;

        for (int i = 0; i < 8; i++) {
                it[i].value = i;
                list_add_tail(&h, &it[i].link);
        }
        /* unlink every even element while iterating: every element is still visited */
        list_for_each_safe(e, tmp, &h)
        {
                Item *x = list_entry(e, Item, link);
                cr_assert_eq(x->value, seen);
                seen++;
                if (x->value % 2 == 0)
                        list_del(e);
        }
        cr_assert_eq(seen, 8);
        expect(&h, (int[]){1, 3, 5, 7}, 4);

        /* and unlinking every element empties the list */
        list_for_each_safe(e, tmp, &h) list_del(e);
        cr_assert(list_empty(&h));
}

Test(list, relink_after_del)
{
        ListHead a = LIST_HEAD_INIT(a), b = LIST_HEAD_INIT(b);
        Item x = {.value = 1}, y = {.value = 2};

        list_add_tail(&a, &x.link);
        list_add_tail(&a, &y.link);
        list_del(&x.link);
        list_add_tail(&b, &x.link); /* to another list */
        expect(&a, (int[]){2}, 1);
        expect(&b, (int[]){1}, 1);
        list_del(&x.link);
        list_add_tail(&a, &x.link); /* back, now behind y */
        expect(&a, (int[]){2, 1}, 2);
        cr_assert(list_empty(&b));
        list_del(&x.link);
        list_del(&x.link); /* deleting an unlinked element leaves it unlinked */
        cr_assert(!list_linked(&x.link));
        expect(&a, (int[]){2}, 1);
}
