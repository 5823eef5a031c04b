/* SPDX-License-Identifier: MIT */
/*
 * stack.c — fiber stacks: mmap'ed with a PROT_NONE guard page below, committed lazily
 * by the kernel page by page, cached so that creating a fiber does not mmap in steady
 * state, and a SIGSEGV handler on an alternate signal stack that reports an overflow
 * into the guard page.
 *
 * Caching (libdill's stack.c, flare): each worker keeps a capped LIFO of default-size
 * stacks (the most recently used one is the warmest in cache and TLB); beyond it the
 * group keeps a capped pool shared by all its workers, linked through the stacks
 * themselves; beyond that stacks are unmapped. Stacks of another size are never cached.
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

/* Pooled stacks are linked through the last word of the mapping: the top page, which
 * holds the control block and is resident anyway (the lowest page would be faulted in,
 * and kept resident, only for the link). */
static char **pool_link(const SchedulingGroup *g, char *map_lo)
{
        return (char **)(map_lo + page_size() + g->stack_size - sizeof(char *));
}

int stack_alloc(SchedulingGroup *g, size_t size, char **ret_map_lo)
{
        Worker *w = worker_self();
        char *p = NULL;

        if (size == g->stack_size) {
                if (w && w->group == g && w->stacks.n)
                        p = w->stacks.slot[--w->stacks.n];
                if (!p && __atomic_load_n(&g->pool, __ATOMIC_RELAXED)) {
                        spin_lock(&g->pool_lock);
                        p = g->pool;
                        if (p) {
                                __atomic_store_n(&g->pool, *pool_link(g, p), __ATOMIC_RELAXED);
                                g->pool_n--;
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
                if (!to_pool && w && w->group == g && w->stacks.n < w->stacks.cap) {
                        w->stacks.slot[w->stacks.n++] = map_lo;
                        return;
                }
                spin_lock(&g->pool_lock);
                if (g->pool_n < g->pool_cap) {
                        *pool_link(g, map_lo) = g->pool;
                        __atomic_store_n(&g->pool, map_lo, __ATOMIC_RELAXED);
                        g->pool_n++;
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
        while (g->pool) {
                char *p = g->pool;
                g->pool = *pool_link(g, p);
                munmap(p, map_size);
        }
        g->pool_n = 0;
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
