/* SPDX-License-Identifier: MIT */
/*
 * stack.c — fiber stacks: a guard below each stack, memory committed lazily by the
 * kernel page by page, caches so that creating a fiber makes no system call in steady
 * state, memory given back beyond the caches, and a SIGSEGV handler on an alternate
 * signal stack that reports an overflow into the guard.
 *
 * Two ways to guard a stack, chosen once per process (stack_guard_mode()):
 *  - Guard regions (Linux >= 6.13). A group reserves large arenas (MAP_NORESERVE address
 *    space, bound whole to the group's NUMA node; the first STACK_ARENA_BYTES, each next
 *    one twice the last up to STACK_ARENA_MAX_BYTES) and carves [guard | stack] slots
 *    out of them; each slot's guard is installed with madvise(MADV_GUARD_INSTALL), which
 *    puts markers in the page tables instead of splitting the mapping (kernel
 *    Documentation/mm/process_addrs.rst, madvise(2)). An arena stays one memory map
 *    however many stacks it holds, so a million fibers fit in a few dozen maps, far
 *    below the kernel's default vm.max_map_count of 65530.
 *  - mprotect (older kernels, where the madvise answers EINVAL, or
 *    FIBERD_STACK_GUARD=mprotect): each stack is its own mmap with a PROT_NONE guard, two
 *    memory maps per stack, so the process's groups together reserve 2 * max_fibers maps
 *    each against vm.max_map_count (stack_budget_reserve()).
 *
 * The guard is STACK_GUARD_SIZE (2 MiB) deep, not a page: code built without
 * -fstack-clash-protection moves the stack pointer past a big frame at once and writes
 * wherever it likes in it, so a guard smaller than the frame is jumped, and the write
 * lands in the slot below, another fiber's stack, unreported. 2 MiB catches any frame up
 * to 2 MiB minus the stack's used part (a 1 MiB frame on a 128 KiB stack with room to
 * spare). Its cost is address space (2 MiB per slot: 32 GiB for 16384 fibers, of the
 * 128 TiB x86-64 gives a process) and, with guard regions, the page tables that hold
 * the markers (one 4 KiB page per 2 MiB, about 4 KiB per slot: measured 68 MiB of page
 * tables for 16384 live fibers, against 6 MiB with a 64 KiB guard). A PROT_NONE
 * mprotect guard needs no page tables.
 *
 * New arena slots: a worker carves STACK_CARVE_RUN of them at a time for itself and
 * installs the run's guards in one process_madvise(2) call (one madvise each as it is
 * taken where the kernel refuses that). With one carve point for all, two workers
 * took neighbouring slots, and one's guard markers went into the page-table page that
 * the other's stack faulted into, under the same PTE lock (contended: 10 % of skynet's
 * samples on the shared queue).
 *
 * Caching (libdill's stack.c, flare; batches as Go's gfget/gfput move goroutines
 * between a P's free list and the global one): each worker keeps a capped LIFO of
 * default-size stacks (the most recently used one is the warmest in cache and TLB);
 * beyond it the group keeps a warm pool shared by its workers. Stacks move between a
 * worker's cache and the pool half a cache at a time, under one lock, so a worker that
 * only creates and one that only runs fibers meet at the pool once per batch, not once
 * per fiber.
 *
 * Beyond the warm pool a stack gives its memory back: it waits in a batch of
 * STACK_RELEASE_BATCH, and the batch is released with MADV_DONTNEED in one
 * process_madvise(2) call over the stacks alone (advise_vector(): Linux >= 6.15), so the
 * guards' markers between the stacks are not walked (a run of neighbouring slots
 * released by one madvise walked 512 markers a slot for a stack's 32 entries: 14 % of
 * skynet's samples on the shared queue), and a kernel that batches the call's TLB
 * flushes shoots the TLB down once per batch. Where the kernel refuses the call, one
 * madvise per run of neighbouring slots (guard markers survive it), a shootdown per run.
 * The released slot keeps its guard and its address range and is reused before any new
 * one is made. MADV_DONTNEED rather than MADV_FREE: MADV_FREE is cheaper to reuse
 * (about 0.5 us against 3.5 us to fault two pages back, measured on this project's
 * 2-core machine) but its pages stay in the process's RSS until the kernel is short of
 * memory, so an operator reading RSS after a burst would see nothing given back.
 *
 * Stacks of another size than the group's default are never cached: each is its own
 * mapping (guarded the same way), unmapped when its fiber is gone.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "scheduler/base/macro.h"
#include "scheduler/base/sigsafe.h"
#include "scheduler/base/time-util.h"
#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* uapi/asm-generic/mman-common.h, Linux 6.13 */
#endif

/* One batch of stacks given back at once: bounds the work done by the one free that
 * fills it (64 stacks: about 15 us when they are neighbours). */
#define STACK_RELEASE_BATCH 64
/* Address space reserved for a group's first arena; each next one doubles, up to
 * STACK_ARENA_MAX_BYTES, so a group of a few fibers reserves 1 GiB and one of a million
 * (2 TiB of slots) a dozen maps. Halved on ENOMEM (strict overcommit). */
#define STACK_ARENA_BYTES (1UL << 30)
#define STACK_ARENA_MAX_BYTES (256UL << 30)
/* Memory maps left for everything else in the process (libraries, heaps, threads). */
#define STACK_MAP_SLACK 4096
/* Fresh arena slots a worker carves at once for itself (slot_take()). */
#define STACK_CARVE_RUN 16

struct StackArena {
        StackArena *next;
        char *base;
        size_t size; /* bytes */
};

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

/* ------------------------------------------------------------------ guard mode ---- */

static SchedGuardMode guard_mode;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void guard_mode_detect(void)
{
        const char *want = getenv("FIBERD_STACK_GUARD");
        size_t ps = page_size();
        char *probe;

        guard_mode = SCHED_GUARD_MPROTECT;
        if (want && strcmp(want, "mprotect") == 0) {
                sched_log(LOG_INFO, "fiber stacks: mprotect guards (FIBERD_STACK_GUARD=mprotect): "
                                    "two memory maps per fiber");
                return;
        }
        if (want && *want && strcmp(want, "auto") != 0)
                sched_log(LOG_WARNING, "FIBERD_STACK_GUARD=%s is not auto or mprotect: using auto",
                          want);
        probe = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (probe != MAP_FAILED) {
                if (madvise(probe, ps, MADV_GUARD_INSTALL) == 0)
                        guard_mode = SCHED_GUARD_REGIONS;
                munmap(probe, 2 * ps);
        }
        if (guard_mode == SCHED_GUARD_REGIONS)
                sched_log(LOG_INFO,
                          "fiber stacks: guard regions (MADV_GUARD_INSTALL), %zu KiB guard, "
                          "arenas from %lu MiB: no memory map per fiber",
                          (size_t)STACK_GUARD_SIZE / 1024, STACK_ARENA_BYTES >> 20);
        else
                sched_log(LOG_INFO,
                          "fiber stacks: mprotect guards (this kernel has no MADV_GUARD_INSTALL, "
                          "Linux >= 6.13): two memory maps per fiber, bounded by "
                          "vm.max_map_count");
}

SchedGuardMode sched_stack_guard_mode(void)
{
        pthread_once(&guard_once, guard_mode_detect);
        return guard_mode;
}

size_t sched_stack_maps_per_fiber(void)
{
        return sched_stack_guard_mode() == SCHED_GUARD_REGIONS ? 0 : 2;
}

/* ------------------------------------------------------------------ map budget ---- */

static size_t maps_reserved; /* atomic: mprotect-mode maps reserved by all groups */

static unsigned long max_map_count(void)
{
        unsigned long v = 0;
        FILE *fp = fopen("/proc/sys/vm/max_map_count", "re");

        if (!fp)
                return 0; /* not Linux /proc: nothing to check */
        if (fscanf(fp, "%lu", &v) != 1)
                v = 0;
        fclose(fp);
        return v;
}

int stack_budget_reserve(SchedulingGroup *g)
{
        size_t need, total;
        unsigned long have;

        if (sched_stack_guard_mode() == SCHED_GUARD_REGIONS)
                return 0;
        need = 2 * g->max_fibers;
        have = max_map_count();
        if (have && need + STACK_MAP_SLACK > have) {
                sched_log(LOG_ERR,
                          "vm.max_map_count is %lu, but max_fibers=%zu of group %s needs %zu "
                          "memory maps (mprotect guards: a stack and its guard per fiber, plus "
                          "slack): raise it with 'sysctl -w vm.max_map_count=%zu' (or the "
                          "sysctl.d drop-in), lower max_fibers, or run on Linux >= 6.13, whose "
                          "guard regions need no map per fiber",
                          have, g->max_fibers, g->name, need + STACK_MAP_SLACK,
                          need + STACK_MAP_SLACK);
                return -ENOMEM;
        }
        total = __atomic_add_fetch(&maps_reserved, need, __ATOMIC_RELAXED);
        g->stacks.maps_reserved = need;
        if (have && total + STACK_MAP_SLACK > have)
                sched_log(LOG_WARNING,
                          "vm.max_map_count is %lu, but this process's scheduling groups may "
                          "hold fibers needing %zu memory maps (group %s adds %zu; mprotect "
                          "guards use two per fiber): fiber creation fails with ENOMEM once "
                          "the maps run out; raise it with 'sysctl -w vm.max_map_count=%zu' or "
                          "lower max_fibers",
                          have, total + STACK_MAP_SLACK, g->name, need, total + STACK_MAP_SLACK);
        return 0;
}

/* Say once per 10 s why a stack could not be made, naming the cause. */
static void stack_report_enomem(SchedulingGroup *g, const char *what)
{
        static uint64_t last_ns;
        uint64_t now = sched_now_ns(), last = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);

        if (last && now - last < 10 * NSEC_PER_SEC)
                return;
        if (!__atomic_compare_exchange_n(&last_ns, &last, now, false, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
                return;
        if (sched_stack_guard_mode() == SCHED_GUARD_MPROTECT)
                sched_log(LOG_ERR,
                          "group %s: %s failed: out of memory maps? vm.max_map_count is %lu and "
                          "mprotect guards use two per fiber; raise it ('sysctl -w "
                          "vm.max_map_count=N') or lower max_fibers",
                          g->name, what, max_map_count());
        else
                sched_log(LOG_ERR, "group %s: %s failed: out of memory or address space", g->name,
                          what);
}

/* ------------------------------------------------------------------ slots -------- */

/* A stack of @size bytes in a mapping of its own, its guard below (one map with a guard
 * region, two with mprotect), placed on @g's node. Returns the stack's lowest byte in
 * *ret_lo; -ENOMEM, logged with its cause. */
static int stack_map(SchedulingGroup *g, size_t size, char **ret_lo)
{
        size_t len = STACK_GUARD_SIZE + size;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        int r = -1;

        if (p != MAP_FAILED) {
                if (sched_stack_guard_mode() == SCHED_GUARD_REGIONS)
                        r = madvise(p, STACK_GUARD_SIZE, MADV_GUARD_INSTALL);
                else
                        r = mprotect(p, STACK_GUARD_SIZE, PROT_NONE);
                if (r < 0)
                        munmap(p, len);
        }
        if (r < 0) {
                stack_report_enomem(g, "mapping a fiber stack");
                return -ENOMEM;
        }
        if (g->bind && g->node >= 0)
                numa_prefer_range(p + STACK_GUARD_SIZE, size, g->node);
        *ret_lo = p + STACK_GUARD_SIZE;
        return 0;
}

static void stack_unmap(char *lo, size_t size)
{
        munmap(lo - STACK_GUARD_SIZE, STACK_GUARD_SIZE + size);
}

/* mprotect mode: unmap the default-size stacks @v[0..*n) (each its own mapping), and
 * empty the array. With guard regions they live in the arenas, unmapped at once by
 * stack_pool_term(). */
static void stacks_unmap(SchedulingGroup *g, char **v, size_t *n)
{
        if (sched_stack_guard_mode() == SCHED_GUARD_MPROTECT)
                while (*n)
                        stack_unmap(v[--*n], g->stack_size);
        *n = 0;
}

/* The newest arena still has room for a slot of @slot bytes. Under sp->lock. */
static bool carve_room(const StackPool *sp, size_t slot)
{
        return sp->carve && sp->carve_end - sp->carve >= (ptrdiff_t)slot;
}

/* Reserve a new arena for @g and make it the one slots are carved from. Context: any;
 * takes g->stacks.arena_mutex. */
static int arena_grow(SchedulingGroup *g)
{
        StackPool *sp = &g->stacks;
        size_t slot = STACK_GUARD_SIZE + g->stack_size;
        size_t want = sp->arena_next ? sp->arena_next : STACK_ARENA_BYTES;
        size_t n = want / slot ? want / slot : 1;
        StackArena *a = malloc(sizeof(*a));
        char *p = MAP_FAILED;

        if (!a)
                return -ENOMEM;
        for (; n; n /= 2) {
                p = mmap(NULL, n * slot, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (p != MAP_FAILED)
                        break;
        }
        if (p == MAP_FAILED) {
                free(a);
                return -ENOMEM;
        }
        a->base = p;
        a->size = n * slot;
        sp->arena_next = MIN(2 * want, STACK_ARENA_MAX_BYTES); /* under arena_mutex */
        /* Bound whole, so the arena stays one memory map with one policy. */
        if (g->bind && g->node >= 0)
                numa_prefer_range(p, a->size, g->node);
        spin_lock(&sp->lock);
        a->next = sp->arenas;
        sp->arenas = a;
        sp->carve = p;
        sp->carve_end = p + a->size;
        spin_unlock(&sp->lock);
        return 0;
}

/* process_madvise(2) on the calling process, with PIDFD_SELF_THREAD_GROUP
 * (include/uapi/linux/pidfd.h), which needs no pidfd, so a forked child cannot advise
 * its parent's memory through one inherited: Linux >= 6.15 (6.13 took any advice for the
 * calling process, 6.15 the PIDFD_SELF values; before, EBADF or EINVAL). */
#ifndef PIDFD_SELF_THREAD_GROUP
#define PIDFD_SELF_THREAD_GROUP -10001
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440 /* the same on every architecture (Linux 5.10) */
#endif
/* One call advises at most this much: the kernel stops an iovec near 2 GiB. */
#define VECTOR_MAX_BYTES (1UL << 30)
static bool vector_off; /* atomic: the kernel refused process_madvise: for good */

/* @advice over the @n ranges of @iov (@bytes in all) in one process_madvise() call.
 * Return: false when the kernel did not apply all of it (the caller falls back to
 * madvise(), whose advice here is idempotent). */
static bool advise_vector(const struct iovec *iov, size_t n, size_t bytes, int advice)
{
        ssize_t r;

        if (bytes > VECTOR_MAX_BYTES || __atomic_load_n(&vector_off, __ATOMIC_RELAXED))
                return false;
        r = syscall(SYS_process_madvise, PIDFD_SELF_THREAD_GROUP, iov, n, advice, 0);
        if (r == (ssize_t)bytes)
                return true;
        /* A kernel or filter that refuses the call refuses it again: no more tries. Another
         * error (ENOMEM for a page table, EINTR) is this call's: the fallback, then the
         * next batch tries again. */
        if (r < 0 && (errno == ENOSYS || errno == EBADF || errno == EINVAL || errno == EPERM))
                __atomic_store_n(&vector_off, true, __ATOMIC_RELAXED);
        return false;
}

/* Install the guards of the slots [@lo, @end) (each @slot bytes, its guard first) in one
 * call. Return: false when the kernel would not (each slot's is installed as it is
 * taken). */
static bool guard_run(char *lo, char *end, size_t slot)
{
        struct iovec iov[STACK_CARVE_RUN];
        size_t n = 0;

        for (char *q = lo; q < end && n < STACK_CARVE_RUN; q += slot)
                iov[n++] = (struct iovec){.iov_base = q, .iov_len = STACK_GUARD_SIZE};
        return n && advise_vector(iov, n, n * STACK_GUARD_SIZE, MADV_GUARD_INSTALL);
}

/* Take a slot from the released list, else carve or map a new one. The returned stack
 * is zero-filled or released (its pages fault in on use). @c: the calling worker's
 * carved run, where new slots come from; NULL on another thread. Context: any. */
static int slot_take(SchedulingGroup *g, StackRun *c, char **ret_lo)
{
        StackPool *sp = &g->stacks;
        size_t slot = STACK_GUARD_SIZE + g->stack_size;
        char *p = NULL;
        int r;

        for (;;) {
                bool fresh = false, run = false;

                spin_lock(&sp->lock);
                if (sp->free_n) {
                        p = sp->free[--sp->free_n];
                } else if (c && c->lo != c->end) {
                        p = c->lo + STACK_GUARD_SIZE;
                        c->lo += slot;
                        fresh = !c->guarded;
                } else if (carve_room(sp, slot)) {
                        /* A worker carves a run of slots for itself: the page-table page
                         * its guard markers go to is then not the one another worker's
                         * stack faults into (the kernel's PTE lock, contended in perf). */
                        size_t n = MIN((size_t)STACK_CARVE_RUN,
                                       (size_t)(sp->carve_end - sp->carve) / slot);
                        p = sp->carve + STACK_GUARD_SIZE;
                        sp->carve += slot;
                        if (c && n > 1) {
                                c->lo = sp->carve;
                                sp->carve += (n - 1) * slot;
                                c->end = sp->carve;
                                run = true;
                        }
                        fresh = true;
                }
                spin_unlock(&sp->lock);
                /* The run's guards at once, this slot's among them: one system call, not
                 * one a slot (8 % of skynet's time on the shared queue). */
                if (run) {
                        c->guarded = guard_run(p - STACK_GUARD_SIZE, c->end, slot);
                        fresh = !c->guarded;
                }
                if (p && fresh &&
                    madvise(p - STACK_GUARD_SIZE, STACK_GUARD_SIZE, MADV_GUARD_INSTALL) < 0) {
                        /* The slot leaks (address space only); its neighbours are fine. */
                        stack_report_enomem(g, "installing a stack guard");
                        return -ENOMEM;
                }
                if (p) {
                        *ret_lo = p;
                        return 0;
                }
                if (sched_stack_guard_mode() == SCHED_GUARD_MPROTECT)
                        return stack_map(g, g->stack_size, ret_lo);
                /* Out of arena: one thread grows it while the others wait. */
                pthread_mutex_lock(&sp->arena_mutex);
                spin_lock(&sp->lock);
                bool empty = !sp->free_n && !carve_room(sp, slot);
                spin_unlock(&sp->lock);
                r = empty ? arena_grow(g) : 0;
                pthread_mutex_unlock(&sp->arena_mutex);
                if (r < 0) {
                        stack_report_enomem(g, "reserving a stack arena");
                        return r;
                }
        }
}

static int lo_cmp(const void *a, const void *b)
{
        char *x = *(char *const *)a, *y = *(char *const *)b;
        return x < y ? -1 : x > y;
}

/* MADV_DONTNEED the stacks @lo[0..n) alone, in one process_madvise() call, so the
 * kernel neither walks the guards' page tables between them (512 markers a slot, 16
 * times a 128 KiB stack's entries) nor flushes the TLB once per slot. Return: false when
 * this kernel cannot (the caller releases by runs). */
static bool release_vector(char *const *lo, size_t n, size_t size)
{
        struct iovec iov[STACK_RELEASE_BATCH];

        if (n > STACK_RELEASE_BATCH)
                return false;
        for (size_t i = 0; i < n; i++)
                iov[i] = (struct iovec){.iov_base = lo[i], .iov_len = size};
        return advise_vector(iov, n, n * size, MADV_DONTNEED);
}

/* MADV_DONTNEED the sorted stacks @lo[0..n), one madvise per run of neighbouring arena
 * slots, from the first stack to the end of the last: the guards in between are
 * markers, which MADV_DONTNEED leaves in place. In mprotect mode every slot is a mapping
 * of its own, so a run is one slot. */
static void release_runs(SchedulingGroup *g, char *const *lo, size_t n)
{
        size_t slot = STACK_GUARD_SIZE + g->stack_size;
        bool regions = sched_stack_guard_mode() == SCHED_GUARD_REGIONS;

        for (size_t i = 0, j; i < n; i = j) {
                for (j = i + 1; regions && j < n && lo[j] == lo[j - 1] + slot; j++)
                        ;
                madvise(lo[i], (size_t)(lo[j - 1] - lo[i]) + g->stack_size, MADV_DONTNEED);
        }
}

/* Give the memory of @n default-size stacks back, in one call where the kernel can
 * (release_vector()), else by runs; then list them as released. Context: any; no lock
 * held. */
static void slots_release(SchedulingGroup *g, char **lo, size_t n)
{
        StackPool *sp = &g->stacks;

        qsort(lo, n, sizeof(*lo), lo_cmp);
        if (!release_vector(lo, n, g->stack_size))
                release_runs(g, lo, n);
        spin_lock(&sp->lock);
        /* free has room for every slot the group can hold at once (stack_pool_init);
         * should that ever be wrong, a slot is dropped (unmapped in mprotect mode, its
         * address range left unused in an arena), never written past the array. */
        size_t k = MIN(n, sp->free_cap - sp->free_n);
        memcpy(sp->free + sp->free_n, lo, k * sizeof(*lo));
        sp->free_n += k;
        spin_unlock(&sp->lock);
        if (sched_stack_guard_mode() == SCHED_GUARD_MPROTECT)
                for (; k < n; k++)
                        stack_unmap(lo[k], g->stack_size);
}

/* Put @n default-size stacks beyond the workers' caches: into the warm pool while it has
 * room, else into the release batch, releasing each batch as it fills. Context: any. */
static void pool_put(SchedulingGroup *g, char *const *lo, size_t n)
{
        StackPool *sp = &g->stacks;
        char *batch[STACK_RELEASE_BATCH];
        size_t i = 0;

        while (i < n) {
                bool full = false;

                spin_lock(&sp->lock);
                for (; i < n && !full; i++) {
                        if (sp->warm_n < sp->warm_cap) {
                                sp->warm[sp->warm_n] = lo[i];
                                __atomic_store_n(&sp->warm_n, sp->warm_n + 1, __ATOMIC_RELAXED);
                                continue;
                        }
                        sp->dirty[sp->dirty_n] = lo[i];
                        __atomic_store_n(&sp->dirty_n, sp->dirty_n + 1, __ATOMIC_RELAXED);
                        if (sp->dirty_n == STACK_RELEASE_BATCH) {
                                memcpy(batch, sp->dirty, sizeof(batch));
                                __atomic_store_n(&sp->dirty_n, 0, __ATOMIC_RELAXED);
                                full = true;
                        }
                }
                spin_unlock(&sp->lock);
                if (full)
                        slots_release(g, batch, STACK_RELEASE_BATCH);
        }
}

/* Take up to @want warm stacks (the pool, then the release batch, whose stacks still
 * hold their pages) into @out. Returns how many. */
static size_t pool_get(SchedulingGroup *g, char **out, size_t want)
{
        StackPool *sp = &g->stacks;
        size_t n = 0, k;

        if (!__atomic_load_n(&sp->warm_n, __ATOMIC_RELAXED) &&
            !__atomic_load_n(&sp->dirty_n, __ATOMIC_RELAXED))
                return 0;
        spin_lock(&sp->lock);
        k = MIN(sp->warm_n, want);
        memcpy(out, sp->warm + sp->warm_n - k, k * sizeof(char *));
        __atomic_store_n(&sp->warm_n, sp->warm_n - k, __ATOMIC_RELAXED);
        n = k;
        k = MIN((size_t)sp->dirty_n, want - n);
        memcpy(out + n, sp->dirty + sp->dirty_n - k, k * sizeof(char *));
        __atomic_store_n(&sp->dirty_n, sp->dirty_n - (unsigned)k, __ATOMIC_RELAXED);
        n += k;
        spin_unlock(&sp->lock);
        return n;
}

/* ------------------------------------------------------------------ alloc/free ---- */

int stack_alloc(SchedulingGroup *g, size_t size, char **ret_lo)
{
        Worker *w = worker_self();
        StackCache *c;
        char *p = NULL;

        if (size != g->stack_size)
                return stack_map(g, size, ret_lo);
        if (!w || w->group != g) {
                if (pool_get(g, &p, 1)) {
                        *ret_lo = p;
                        return 0;
                }
                return slot_take(g, NULL, ret_lo);
        }
        c = &w->stacks;
        if (!c->n)
                c->n = (unsigned)pool_get(g, c->slot, (c->cap + 1) / 2);
        if (c->n) {
                *ret_lo = c->slot[--c->n];
                return 0;
        }
        return slot_take(g, &w->carved, ret_lo);
}

void stack_free(SchedulingGroup *g, char *lo, size_t size, bool to_pool)
{
        Worker *w = worker_self();
        StackCache *c;

        if (size != g->stack_size) {
                stack_unmap(lo, size);
                return;
        }
        if (!to_pool && w && w->group == g && w->stacks.cap) {
                c = &w->stacks;
                if (c->n == c->cap) {
                        /* Spill the top half of the cache (the most recently freed
                         * stacks, still in this CPU's cache: the creator that refills
                         * from the pool gets them warm). */
                        size_t half = (c->cap + 1) / 2;
                        c->n -= (unsigned)half;
                        pool_put(g, c->slot + c->n, half);
                }
                c->slot[c->n++] = lo;
                return;
        }
        pool_put(g, &lo, 1);
}

/* ------------------------------------------------------------------ lifecycle ----- */

int stack_cache_init(StackCache *c, unsigned cap)
{
        c->n = 0;
        c->cap = cap;
        c->slot = calloc(cap ? cap : 1, sizeof(char *));
        return c->slot ? 0 : -ENOMEM;
}

void stack_cache_term(SchedulingGroup *g, StackCache *c)
{
        size_t n = c->n;

        stacks_unmap(g, c->slot, &n);
        c->n = 0;
        free(c->slot);
        c->slot = NULL;
}

int stack_pool_init(SchedulingGroup *g, unsigned nworkers, unsigned cache)
{
        StackPool *sp = &g->stacks;
        size_t warm = MAX((size_t)1024, 4 * (size_t)nworkers * cache);

        memset(sp, 0, sizeof(*sp));
        pthread_mutex_init(&sp->arena_mutex, NULL);
        sp->warm_cap = MIN(warm, g->max_fibers);
        /* Every slot the group can hold at once: its live fibers, the workers' caches,
         * the warm pool and one release batch. Arrays are touched only as used. */
        sp->free_cap =
                g->max_fibers + (size_t)nworkers * cache + sp->warm_cap + STACK_RELEASE_BATCH;
        sp->warm = calloc(sp->warm_cap ? sp->warm_cap : 1, sizeof(char *));
        sp->free = calloc(sp->free_cap, sizeof(char *));
        if (!sp->warm || !sp->free)
                return -ENOMEM;
        return 0;
}

void stack_pool_term(SchedulingGroup *g)
{
        StackPool *sp = &g->stacks;

        size_t dirty_n = sp->dirty_n;

        stacks_unmap(g, sp->warm, &sp->warm_n);
        stacks_unmap(g, sp->dirty, &dirty_n);
        sp->dirty_n = 0;
        stacks_unmap(g, sp->free, &sp->free_n);
        while (sp->arenas) {
                StackArena *a = sp->arenas;
                sp->arenas = a->next;
                munmap(a->base, a->size);
                free(a);
        }
        free(sp->warm);
        free(sp->free);
        sp->warm = sp->free = NULL;
        if (sp->maps_reserved)
                __atomic_sub_fetch(&maps_reserved, sp->maps_reserved, __ATOMIC_RELAXED);
        sp->maps_reserved = 0;
        pthread_mutex_destroy(&sp->arena_mutex);
}

/* ------------------------------------------------------------------ overflow ------ */

static struct sigaction previous_segv;
static int handler_installs;
static SchedFatalFn fatal_hook; /* sched_set_fatal_hook() */

void sched_set_fatal_hook(SchedFatalFn fn)
{
        __atomic_store_n(&fatal_hook, fn, __ATOMIC_RELEASE);
}

static void overflow_handler(int sig, siginfo_t *si, void *uctx)
{
        Worker *w = worker_self();
        Fiber *f = w ? w->current : NULL;
        char *addr = si->si_addr;

        /* In the guard, or (a frame that skipped it) just below it. */
        if (f && addr >= f->stack_lo - STACK_GUARD_SIZE - page_size() && addr < f->stack_lo) {
                char msg[512];
                size_t n = 0;
                sigsafe_put_str(msg, &n, sizeof(msg), "<2>sched: stack overflow in fiber ");
                sigsafe_put_u64(msg, &n, sizeof(msg), f->id);
                sigsafe_put_str(msg, &n, sizeof(msg), " (");
                sigsafe_put_str(msg, &n, sizeof(msg), f->tag ? f->tag : "no tag");
                sigsafe_put_str(msg, &n, sizeof(msg), "): it ran past its ");
                sigsafe_put_u64(msg, &n, sizeof(msg), f->stack_size);
                sigsafe_put_str(msg, &n, sizeof(msg),
                                "-byte stack (deep calls, or one frame too big for it) into its ");
                sigsafe_put_u64(msg, &n, sizeof(msg), STACK_GUARD_SIZE / 1024);
                sigsafe_put_str(msg, &n, sizeof(msg),
                                guard_mode == SCHED_GUARD_REGIONS ? " KiB guard region"
                                                                  : " KiB mprotect guard");
                sigsafe_put_str(msg, &n, sizeof(msg), "; give it a larger stack_size. Aborting.\n");
                if (sigsafe_write(STDERR_FILENO, msg, n) < 0) {
                        /* nothing more we can do */
                }
                SchedFatalFn hook = __atomic_load_n(&fatal_hook, __ATOMIC_ACQUIRE);
                if (hook)
                        hook(SIGSEGV, f->tag);
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
