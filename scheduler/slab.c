/* SPDX-License-Identifier: MIT */
/*
 * slab.c — the control blocks of fibers, in slabs.
 *
 * A fiber's control block lives longer than its stack: a fiber takes its stack at its
 * first run and gives it back at its exit (fiber.c), and a joinable one's block waits for
 * the join, so the block is an allocation of its own. It
 * comes from a slab allocator (Bonwick's slabs, as the kernel's SLUB keeps per-CPU free
 * objects in front of its slabs) rather than from malloc: a burst of a million joinable
 * fibers takes about 200 MB of blocks, and glibc grows a thread's arena 128 KiB at a
 * time, an mprotect() each, which takes the process's mmap lock for writing while the
 * other workers install stack guards and fault pages under it. Skynet 1M on the shared
 * queue (1.1 million joinable fibers alive at once) ran 1.20x slower on malloc.
 *
 * A slab is SLAB_BYTES of anonymous memory mapped at an address aligned to its size, so
 * a block finds its slab by masking its own address; from the second slab on, it is
 * one transparent huge page (MADV_HUGEPAGE): create 1M fibers and then join each took
 * 53,000 page faults with small pages, 7,000 with huge ones. The slab's header fills its first
 * cache line; the blocks follow, each rounded up to whole cache lines. A
 * slab hands out never-used blocks by a bump index first, so the pages of a slab that
 * was never filled are never faulted in, then the ones on its free list.
 *
 * Each worker keeps a LIFO of up to SLAB_CACHE free blocks (Worker.blocks: the block
 * freed last is the warmest); blocks move between it and the slabs SLAB_BATCH at a time
 * under one process-wide spinlock, so a worker that only creates fibers and
 * one that only runs (and frees) them meet at the lock once per batch. No system call and no
 * first touch of a page is made under the lock: slabs are mapped and unmapped, and
 * never-used blocks linked, with it dropped. A slab whose blocks are all free is
 * unmapped, except one kept as the spare, so memory goes back after a burst.
 *
 * Under AddressSanitizer the blocks come from malloc, so that a use after the join is
 * reported.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "scheduler/base/spinlock.h"
#include "scheduler/runtime.h"

#ifndef SCHED_ASAN

#define SLAB_BYTES (2UL << 20) /* 16,383 blocks of 128 bytes; one huge page */
#define SLAB_CACHE 256         /* free blocks a worker keeps */
#define SLAB_BATCH 128         /* blocks moved at once between a worker and the slabs */

typedef struct Slab Slab;
struct Slab {
        Slab *next, *prev; /* on the partial list while it has a free block */
        Fiber *free;       /* blocks given back, linked by yield_next */
        unsigned bump;     /* blocks [bump, SLAB_BLOCKS) were never handed out */
        unsigned used;     /* blocks handed out and not given back; a slab in use is
                            * on the partial list unless it is full */
} __attribute__((aligned(64)));

/* A block's size: sizeof(Fiber) (128 bytes; more under a sanitizer or with ucontext)
 * rounded up to a cache line, so that no two blocks share one. */
#define BLOCK_BYTES ((sizeof(Fiber) + 63) & ~(size_t)63)
#define SLAB_BLOCKS ((SLAB_BYTES - sizeof(Slab)) / BLOCK_BYTES)

static struct {
        int lock;
        Slab *partial; /* slabs with a free block (free list or bump), newest first */
        Slab *spare;   /* one empty slab kept mapped */
        size_t mapped; /* slabs mapped, the spare included */
} slabs;

static Slab *slab_of(Fiber *f)
{
        return (Slab *)((uintptr_t)f & ~(SLAB_BYTES - 1));
}

static Fiber *slab_block(Slab *s, unsigned i)
{
        return (Fiber *)((char *)s + sizeof(Slab) + (size_t)i * BLOCK_BYTES);
}

static void partial_add(Slab *s)
{
        s->prev = NULL;
        s->next = slabs.partial;
        if (s->next)
                s->next->prev = s;
        slabs.partial = s;
}

static void partial_del(Slab *s)
{
        if (s->prev)
                s->prev->next = s->next;
        else
                slabs.partial = s->next;
        if (s->next)
                s->next->prev = s->prev;
}

/* A new slab: twice its size mapped, then the unaligned head and tail unmapped; its
 * header written, so the first page fault (a whole huge page's clearing) is taken
 * here, outside the lock. NULL when the address space is exhausted. */
static Slab *slab_map(void)
{
        char *p = mmap(NULL, 2 * SLAB_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        char *base;

        if (p == MAP_FAILED)
                return NULL;
        base = (char *)(((uintptr_t)p + SLAB_BYTES - 1) & ~(SLAB_BYTES - 1));
        if (base > p)
                munmap(p, (size_t)(base - p));
        if (base + SLAB_BYTES < p + 2 * SLAB_BYTES)
                munmap(base + SLAB_BYTES, (size_t)(p + 2 * SLAB_BYTES - (base + SLAB_BYTES)));
        /* A burst: from the second slab on, one huge page each, so 10,922 blocks
         * cost one page fault, not 512. The first stays in small pages: a process
         * with a few fibers keeps a few KiB resident, not 2 MiB. */
        if (__atomic_load_n(&slabs.mapped, __ATOMIC_RELAXED))
                madvise(base, SLAB_BYTES, MADV_HUGEPAGE);
        memset(base, 0, sizeof(Slab));
        return (Slab *)base;
}

/* The slab to take from: a partial one, else the spare, else a new one, mapped with
 * the lock dropped (no system call or first touch is made under it). Return: NULL when
 * none can be mapped. Context: slabs.lock held; it is held again on return. */
static Slab *slab_for_take(void)
{
        Slab *s = slabs.partial;

        if (s)
                return s;
        if ((s = slabs.spare)) {
                slabs.spare = NULL;
        } else {
                spin_unlock(&slabs.lock);
                s = slab_map();
                spin_lock(&slabs.lock);
                if (!s)
                        return NULL;
                __atomic_store_n(&slabs.mapped, slabs.mapped + 1, __ATOMIC_RELAXED);
        }
        partial_add(s);
        return s;
}

static bool slab_full(const Slab *s)
{
        return !s->free && s->bump == SLAB_BLOCKS;
}

/* Give @f back to its slab. A slab left empty becomes the spare, or when there is one
 * already goes on *@dead, to be unmapped once the lock is dropped. Context: slabs.lock
 * held. */
static void slab_give(Fiber *f, Slab **dead)
{
        Slab *s = slab_of(f);

        if (slab_full(s))
                partial_add(s);
        f->yield_next = s->free;
        s->free = f;
        if (--s->used)
                return;
        partial_del(s);
        if (!slabs.spare) {
                s->free = NULL; /* empty: hand its blocks out from the start again */
                s->bump = 0;
                slabs.spare = s;
                return;
        }
        __atomic_store_n(&slabs.mapped, slabs.mapped - 1, __ATOMIC_RELAXED);
        s->next = *dead;
        *dead = s;
}

/* Give back a NULL-terminated @list of blocks (linked by yield_next): one lock for
 * all, and the slabs they empty unmapped after it. */
static void slabs_give(Fiber *list)
{
        Slab *dead = NULL;

        spin_lock(&slabs.lock);
        while (list) {
                Fiber *next = list->yield_next;
                slab_give(list, &dead);
                list = next;
        }
        spin_unlock(&slabs.lock);
        while (dead) {
                Slab *next = dead->next;
                munmap(dead, SLAB_BYTES);
                dead = next;
        }
}

/* Take up to @want blocks of one slab and push them on *@list: from its free list
 * (recently given back, so warm), else never-used ones, which are linked (their pages
 * faulted in) after the lock is dropped. Return: blocks taken, 0 when no slab can be
 * mapped. */
static unsigned slab_take(Fiber **list, unsigned want)
{
        unsigned first = 0, n = 0;
        Fiber *chain = NULL, *tail = NULL;
        Slab *s;

        spin_lock(&slabs.lock);
        if ((s = slab_for_take())) {
                if (s->free) {
                        chain = tail = s->free;
                        for (n = 1; n < want && tail->yield_next; n++)
                                tail = tail->yield_next;
                        s->free = tail->yield_next;
                } else {
                        first = s->bump;
                        n = SLAB_BLOCKS - first < want ? (unsigned)(SLAB_BLOCKS - first) : want;
                        s->bump += n;
                }
                s->used += n;
                if (slab_full(s))
                        partial_del(s);
        }
        spin_unlock(&slabs.lock);
        if (chain) {
                tail->yield_next = *list;
                *list = chain;
        } else {
                for (unsigned i = n; i-- > 0;) {
                        Fiber *f = slab_block(s, first + i);
                        f->yield_next = *list;
                        *list = f;
                }
        }
        return n;
}

Fiber *slab_block_get(Worker *w)
{
        Fiber *f = NULL;

        if (!w) {
                slab_take(&f, 1);
                return f;
        }
        if (!w->blocks && !(w->nblocks = slab_take(&w->blocks, SLAB_BATCH)))
                return NULL;
        f = w->blocks;
        w->blocks = f->yield_next;
        w->nblocks--;
        return f;
}

void slab_block_put(Worker *w, Fiber *f)
{
        if (!w) {
                f->yield_next = NULL;
                slabs_give(f);
                return;
        }
        f->yield_next = w->blocks;
        w->blocks = f;
        if (++w->nblocks < SLAB_CACHE)
                return;
        /* full: a batch from the top goes back (as Go's gfput moves a P's free g's) */
        Fiber *back = w->blocks, *last = back;
        for (unsigned i = 1; i < SLAB_BATCH; i++)
                last = last->yield_next;
        w->blocks = last->yield_next;
        w->nblocks -= SLAB_BATCH;
        last->yield_next = NULL;
        slabs_give(back);
}

void slab_cache_term(Worker *w)
{
        slabs_give(w->blocks);
        w->blocks = NULL;
        w->nblocks = 0;
}

size_t slab_mapped(void)
{
        return __atomic_load_n(&slabs.mapped, __ATOMIC_RELAXED);
}

#else /* SCHED_ASAN */

Fiber *slab_block_get(Worker *w)
{
        (void)w;
        return malloc(sizeof(Fiber));
}

void slab_block_put(Worker *w, Fiber *f)
{
        (void)w;
        free(f);
}

void slab_cache_term(Worker *w)
{
        (void)w;
}

size_t slab_mapped(void)
{
        return 0;
}

#endif
