/* SPDX-License-Identifier: MIT */
/*
 * stack.c — fiber stacks: mmap'ed with a PROT_NONE guard page below, committed lazily
 * by the kernel page by page, cached so that creating a fiber does not mmap in steady
 * state, and a SIGSEGV handler on an alternate signal stack that reports an overflow
 * into the guard page.
 *
 * Caching (libdill's stack.c, flare; batches as Go's gfget/gfput move goroutines
 * between a P's free list and the global one): each worker keeps a capped LIFO of
 * default-size stacks (the most recently used one is the warmest in cache and TLB);
 * beyond it the group keeps a pool shared by all its workers. Stacks move between a
 * worker's cache and the pool half a cache at a time, under one lock, so a worker that
 * only creates and one that only runs fibers meet at the pool once per batch, not once
 * per fiber. Beyond the pool stacks are unmapped. Stacks of another size are never
 * cached.
 *
 * Every stack costs two kernel memory maps (the guard and the stack), which is why
 * sched_group_new() checks vm.max_map_count against max_fibers.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/spinlock.h"

size_t page_size(void)
{
        static size_t ps;
        size_t v = __atomic_load_n(&ps, __ATOMIC_RELAXED);
        if (!v) {
                v = (size_t)sysconf(_SC_PAGESIZE);
                __atomic_store_n(&ps, v, __ATOMIC_RELAXED);
        }
        return v;
}

static int stack_map(size_t size, char **ret)
{
        size_t ps = page_size();
        char *p = mmap(NULL, size + ps, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (p == MAP_FAILED)
                return -ENOMEM;
        if (mprotect(p, ps, PROT_NONE) < 0) {
                munmap(p, size + ps);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

/* Refill @c with up to half its capacity from the pool. Context: @c's worker. */
static void cache_refill(SchedulingGroup *g, StackCache *c)
{
        size_t n;

        if (!__atomic_load_n(&g->pool_n, __ATOMIC_RELAXED))
                return;
        spin_lock(&g->pool_lock);
        n = g->pool_n < (c->cap + 1) / 2 ? g->pool_n : (c->cap + 1) / 2;
        memcpy(c->slot + c->n, g->pool + g->pool_n - n, n * sizeof(char *));
        __atomic_store_n(&g->pool_n, g->pool_n - n, __ATOMIC_RELAXED);
        spin_unlock(&g->pool_lock);
        c->n += (unsigned)n;
}

/* Move the top half of a full @c (the most recently freed stacks, still in this CPU's
 * cache: the creator that refills from the pool gets them warm) to the pool; what does
 * not fit is unmapped. Context: @c's worker. */
static void cache_spill(SchedulingGroup *g, StackCache *c)
{
        size_t half = (c->cap + 1) / 2, n;

        spin_lock(&g->pool_lock);
        n = g->pool_cap - g->pool_n < half ? g->pool_cap - g->pool_n : half;
        memcpy(g->pool + g->pool_n, c->slot + c->n - half, n * sizeof(char *));
        __atomic_store_n(&g->pool_n, g->pool_n + n, __ATOMIC_RELAXED);
        spin_unlock(&g->pool_lock);
        for (size_t i = n; i < half; i++)
                munmap(c->slot[c->n - half + i], g->stack_size + page_size());
        c->n -= (unsigned)half;
}

int stack_alloc(SchedulingGroup *g, size_t size, char **ret_map_lo)
{
        Worker *w = worker_self();
        char *p = NULL;

        if (size == g->stack_size) {
                if (w && w->group == g) {
                        if (!w->stacks.n)
                                cache_refill(g, &w->stacks);
                        if (w->stacks.n)
                                p = w->stacks.slot[--w->stacks.n];
                } else if (__atomic_load_n(&g->pool_n, __ATOMIC_RELAXED)) {
                        spin_lock(&g->pool_lock);
                        if (g->pool_n) {
                                p = g->pool[g->pool_n - 1];
                                __atomic_store_n(&g->pool_n, g->pool_n - 1, __ATOMIC_RELAXED);
                        }
                        spin_unlock(&g->pool_lock);
                }
        }
        if (p) {
                *ret_map_lo = p;
                return 0;
        }
        int r = stack_map(size, ret_map_lo);
        if (r == 0 && g->bind && g->node >= 0)
                numa_prefer_range(*ret_map_lo + page_size(), size, g->node);
        return r;
}

void stack_free(SchedulingGroup *g, char *map_lo, size_t map_size, bool to_pool)
{
        Worker *w = worker_self();

        if (map_size == g->stack_size + page_size()) {
                if (!to_pool && w && w->group == g && w->stacks.cap) {
                        if (w->stacks.n == w->stacks.cap)
                                cache_spill(g, &w->stacks);
                        w->stacks.slot[w->stacks.n++] = map_lo;
                        return;
                }
                spin_lock(&g->pool_lock);
                if (g->pool_n < g->pool_cap) {
                        g->pool[g->pool_n] = map_lo;
                        __atomic_store_n(&g->pool_n, g->pool_n + 1, __ATOMIC_RELAXED);
                        spin_unlock(&g->pool_lock);
                        return;
                }
                spin_unlock(&g->pool_lock);
        }
        munmap(map_lo, map_size);
}

void stack_cache_term(SchedulingGroup *g, StackCache *c)
{
        size_t map_size = g->stack_size + page_size();
        while (c->n)
                munmap(c->slot[--c->n], map_size);
        free(c->slot);
        c->slot = NULL;
}

void stack_pool_term(SchedulingGroup *g)
{
        size_t map_size = g->stack_size + page_size();
        while (g->pool_n)
                munmap(g->pool[--g->pool_n], map_size);
        free(g->pool);
        g->pool = NULL;
}

/* ------------------------------------------------------------------ overflow ------ */

/* Async-signal-safe formatting: only write(2) and our own digits. */
static void put_str(char *buf, size_t *len, size_t cap, const char *s)
{
        while (*s && *len + 1 < cap)
                buf[(*len)++] = *s++;
}

static void put_u64(char *buf, size_t *len, size_t cap, uint64_t v)
{
        char tmp[24];
        int n = 0;
        do {
                tmp[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        while (n && *len + 1 < cap)
                buf[(*len)++] = tmp[--n];
}

static struct sigaction previous_segv;
static int handler_installs;

static void overflow_handler(int sig, siginfo_t *si, void *uctx)
{
        Worker *w = worker_self();
        Fiber *f = w ? w->current : NULL;
        char *addr = si->si_addr;

        if (f && addr >= f->map_lo - page_size() && addr < f->map_lo + page_size()) {
                char msg[512];
                size_t n = 0;
                put_str(msg, &n, sizeof(msg), "<2>sched: stack overflow in fiber ");
                put_u64(msg, &n, sizeof(msg), f->id);
                put_str(msg, &n, sizeof(msg), " (");
                put_str(msg, &n, sizeof(msg), f->tag ? f->tag : "no tag");
                put_str(msg, &n, sizeof(msg), "): it used all of its ");
                put_u64(msg, &n, sizeof(msg), f->map_size - page_size());
                put_str(msg, &n, sizeof(msg),
                        "-byte stack and hit the guard page; give it a larger stack_size. "
                        "Aborting.\n");
                if (write(STDERR_FILENO, msg, n) < 0) {
                        /* nothing more we can do */
                }
                signal(SIGABRT, SIG_DFL);
                abort();
        }
        /* Not ours: restore the previous disposition and let the fault happen again. */
        (void)sig;
        (void)uctx;
        sigaction(SIGSEGV, &previous_segv, NULL);
}

int stack_overflow_handler_install(Worker *w)
{
        stack_t ss = {0};
        struct sigaction sa;
        size_t size = 64 * 1024;

        w->altstack = malloc(size);
        if (!w->altstack)
                return -ENOMEM;
        ss.ss_sp = w->altstack;
        ss.ss_size = size;
        if (sigaltstack(&ss, NULL) < 0) {
                free(w->altstack);
                w->altstack = NULL;
                return -errno;
        }
        if (__atomic_fetch_add(&handler_installs, 1, __ATOMIC_ACQ_REL) == 0) {
                memset(&sa, 0, sizeof(sa));
                sa.sa_sigaction = overflow_handler;
                sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
                sigemptyset(&sa.sa_mask);
                sigaction(SIGSEGV, &sa, &previous_segv);
        }
        return 0;
}

void stack_overflow_handler_remove(Worker *w)
{
        stack_t ss = {.ss_flags = SS_DISABLE};

        if (!w->altstack)
                return;
        sigaltstack(&ss, NULL);
        free(w->altstack);
        w->altstack = NULL;
}
