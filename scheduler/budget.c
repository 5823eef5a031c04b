/* SPDX-License-Identifier: MIT */
/*
 * budget.c — what a group layout costs before it is started, and whether this process
 * can pay it: sched_budget() and sched_check() (sched.h).
 *
 * sched_new() finds out the hard way that a layout does not fit: it allocates every
 * group's run queues and workers, then creates thread after thread until
 * pthread_create() answers EAGAIN (a cgroup's pids.max, systemd's TasksMax=,
 * RLIMIT_NPROC, kernel.threads-max) or ENOMEM (RLIMIT_AS, strict overcommit), seconds
 * and gigabytes later. A configuration checker cannot start threads to find out, so
 * this file adds up, from the same numbers group_alloc() uses, what the groups take at
 * start:
 *   - threads: each group's workers, its reactor thread and, when the stall detector
 *     or the rescue is on, its monitor thread; the rescue's spare workers come later,
 *     one at a time, and are reported apart (SchedBudget.spare_threads);
 *   - descriptors: each group's epoll, timerfd and eventfd;
 *   - memory touched at start: every class's run queue (runq_init() writes each cell),
 *     the workers and their wait slots, a few pages of each thread's stack;
 *   - address space: each thread's stack (the C library's default size, what
 *     pthread_create() maps) on top of that memory;
 *   - memory maps: with mprotect guards only, two per fiber of a full group, which
 *     stack_budget_reserve() refuses beyond vm.max_map_count.
 * It is a lower bound on purpose: what sched_check() refuses cannot start, and a layout
 * it lets through may still fail later for reasons it does not model (the stack
 * arenas' address space, another process taking the last pids).
 *
 * The limits, read once per call: RLIMIT_NPROC (not for root, which the kernel exempts),
 * RLIMIT_AS and RLIMIT_NOFILE; the pids and memory controllers of this process's cgroup
 * and of its ancestors, v2 (pids.max, memory.max) or v1 (pids.max,
 * memory.limit_in_bytes), less what they count already; kernel.threads-max less the
 * threads alive (/proc/loadavg); CommitLimit - Committed_AS when vm.overcommit_memory
 * is 2; vm.max_map_count.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "scheduler/base/macro.h"
#include "scheduler/localq.h"
#include "scheduler/runq.h"
#include "scheduler/runtime.h"

/* Stack pages a thread touches by the time it waits for work (its frames, the C
 * library's TLS and thread descriptor): a lower bound. */
#define BUDGET_THREAD_TOUCHED (16 * 1024)
/* Descriptors a group keeps open: the reactor's epoll, timerfd and eventfd. */
#define BUDGET_GROUP_FDS 3
/* Memory maps left to the rest of the process (stack.c's STACK_MAP_SLACK). */
#define BUDGET_MAP_SLACK 4096

int sched_budget(const SchedConfig *cfg, const SchedPlan *plan, SchedBudget *ret)
{
        static const SchedConfig defaults;
        pthread_attr_t attr;
        size_t stack = 0, cap, max_fibers;
        unsigned workers, spares = 0, nclasses, threads;
        bool monitor, rescue;
        uint64_t per_group;
        SchedBudget b = {0};

        if (!cfg)
                cfg = &defaults;
        workers = plan->group_size ? plan->group_size : 1;
        if (workers > SCHED_MAX_WORKERS)
                return -EINVAL;
        cap = cfg->runq_capacity ? cfg->runq_capacity : 65536;
        max_fibers = cfg->max_fibers ? cfg->max_fibers : 16384;
        nclasses = cfg->classes && cfg->nclasses ? cfg->nclasses : 1;
        /* group_alloc()'s rules: 0 = the default (on); SCHED_FOREVER = off */
        rescue = cfg->control.rescue_after_ns != SCHED_FOREVER;
        monitor = rescue || cfg->control.stall_threshold_ns != SCHED_FOREVER;
        if (rescue) {
                spares = cfg->control.max_spare_workers ? cfg->control.max_spare_workers : workers;
                spares = MIN(spares, SCHED_MAX_WORKERS - workers);
        }
        /* the stack pthread_create() maps for a thread without attributes */
        if (pthread_getattr_default_np(&attr) == 0) {
                pthread_attr_getstacksize(&attr, &stack);
                pthread_attr_destroy(&attr);
        }
        threads = workers + 1 /* the reactor */ + (monitor ? 1 : 0);
        per_group = (uint64_t)nclasses * cap * sizeof(RunqCell) +
                    (uint64_t)(workers + spares) * (sizeof(Worker) + sizeof(WaitSlot)) +
                    sizeof(SchedulingGroup) + (uint64_t)threads * BUDGET_THREAD_TOUCHED;
        b.groups = plan->groups;
        b.threads = plan->groups * threads;
        b.spare_threads = plan->groups * spares;
        b.fds = plan->groups * BUDGET_GROUP_FDS;
        b.memory_bytes = plan->groups * per_group;
        b.stack_bytes = (uint64_t)b.threads * (stack + page_size());
        if (sched_stack_guard_mode() == SCHED_GUARD_MPROTECT)
                b.stack_maps = 2 * (uint64_t)max_fibers;
        *ret = b;
        return 0;
}

/* ------------------------------------------------------------------ limits ----- */

/* The first number in file @path (a "max" counts as none). Return: true and *@ret. */
static bool read_u64(const char *path, uint64_t *ret)
{
        FILE *f = fopen(path, "re");
        char word[32];
        bool ok;

        if (!f)
                return false;
        ok = fscanf(f, "%31s", word) == 1 && strcmp(word, "max") != 0;
        fclose(f);
        if (ok)
                *ret = strtoull(word, NULL, 10);
        return ok;
}

/* @key's value in /proc/meminfo, bytes. */
static bool meminfo(const char *key, uint64_t *ret)
{
        FILE *f = fopen("/proc/meminfo", "re");
        char line[128];
        size_t klen = strlen(key);
        bool ok = false;

        if (!f)
                return false;
        while (!ok && fgets(line, sizeof(line), f))
                if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
                        *ret = strtoull(line + klen + 1, NULL, 10) * 1024;
                        ok = true;
                }
        fclose(f);
        return ok;
}

/* The least room any of this process's cgroups leaves, for threads and memory, and the
 * file of the limit that leaves it. */
typedef struct CgroupRoom {
        uint64_t threads, memory; /* UINT64_MAX = no limit */
        char threads_file[PATH_MAX + 96], memory_file[PATH_MAX + 96];
} CgroupRoom;

/* Room left by the limit @max_file, less @cur_file, of the cgroup @path (under @root)
 * and each of its ancestors: lowers *@room to the least, naming its file in @which. */
static void cgroup_room(const char *root, const char *path, const char *max_file,
                        const char *cur_file, uint64_t *room, char *which, size_t which_size)
{
        char dir[PATH_MAX], file[PATH_MAX + 32], cur_path[PATH_MAX + 32], *slash;
        size_t root_len = strlen(root);
        uint64_t max, cur, left;

        snprintf(dir, sizeof(dir), "%s%s", root, path);
        for (;;) {
                snprintf(file, sizeof(file), "%s/%s", dir, max_file);
                snprintf(cur_path, sizeof(cur_path), "%s/%s", dir, cur_file);
                /* v1's "no limit" is a huge number rather than "max" */
                if (read_u64(file, &max) && max < (UINT64_MAX >> 2)) {
                        if (!read_u64(cur_path, &cur))
                                cur = 0;
                        left = cur > max ? 0 : max - cur;
                        if (left < *room) {
                                *room = left;
                                snprintf(which, which_size, "%s is %" PRIu64 ", %" PRIu64 " in use",
                                         file, max, cur);
                        }
                }
                slash = strrchr(dir, '/');
                if (!slash || (size_t)(slash - dir) < root_len)
                        break;
                *slash = '\0';
        }
}

/* The pids and memory controllers of this process's cgroups: v2 ("0::/path"), or v1
 * ("N:pids:/path", "N:memory:/path"). */
static void cgroup_limits(CgroupRoom *ret)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 64], *ctl, *path;

        ret->threads = ret->memory = UINT64_MAX;
        ret->threads_file[0] = ret->memory_file[0] = '\0';
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                ctl = strchr(line, ':');
                if (!ctl || !(path = strchr(ctl + 1, ':')))
                        continue;
                *path++ = '\0';
                ctl++;
                path[strcspn(path, "\n")] = '\0';
                if (strcmp(path, "/") == 0)
                        path = "";
                if (*ctl == '\0') {
                        cgroup_room("/sys/fs/cgroup", path, "pids.max", "pids.current",
                                    &ret->threads, ret->threads_file, sizeof(ret->threads_file));
                        cgroup_room("/sys/fs/cgroup", path, "memory.max", "memory.current",
                                    &ret->memory, ret->memory_file, sizeof(ret->memory_file));
                } else if (strcmp(ctl, "pids") == 0) {
                        cgroup_room("/sys/fs/cgroup/pids", path, "pids.max", "pids.current",
                                    &ret->threads, ret->threads_file, sizeof(ret->threads_file));
                } else if (strcmp(ctl, "memory") == 0) {
                        cgroup_room("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes",
                                    "memory.usage_in_bytes", &ret->memory, ret->memory_file,
                                    sizeof(ret->memory_file));
                }
        }
        fclose(f);
}

/* This process's address space now, bytes (VmSize). */
static uint64_t address_space_now(void)
{
        FILE *f = fopen("/proc/self/status", "re");
        char line[128];
        uint64_t v = 0;

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "VmSize:", 7) == 0)
                        v = strtoull(line + 7, NULL, 10) * 1024;
        fclose(f);
        return v;
}

#define MIB(x) ((unsigned long long)(((x) + (1 << 20) - 1) >> 20))

int sched_check(const SchedConfig *cfg, const SchedTopology *topo, const SchedBudget *extra,
                SchedPlan *ret_plan, SchedBudget *ret_budget, char *why, size_t why_size)
{
        static const SchedConfig defaults;
        static const SchedBudget none;
        CgroupRoom cg;
        SchedPlan plan;
        SchedBudget b;
        struct rlimit rl;
        uint64_t need, room, v, used;
        int r;

        if (!cfg)
                cfg = &defaults;
        if (!extra)
                extra = &none;
        why[0] = '\0';
        if (!topo)
                topo = cfg->topology;
        if (!topo) {
                SchedTopology *detected = malloc(sizeof(*detected));
                if (!detected)
                        return -ENOMEM;
                r = sched_topology_detect(detected);
                if (r == 0)
                        r = sched_plan(cfg, detected, &plan);
                free(detected);
        } else {
                r = sched_plan(cfg, topo, &plan);
        }
        if (r < 0) {
                snprintf(why, why_size, "no scheduling group layout fits");
                return r;
        }
        r = sched_budget(cfg, &plan, &b);
        if (r < 0) {
                snprintf(why, why_size, "groups of %u workers (at most %d)", plan.group_size,
                         SCHED_MAX_WORKERS);
                return r;
        }
        if (ret_plan)
                *ret_plan = plan;
        if (ret_budget)
                *ret_budget = b;

        /* threads */
        cgroup_limits(&cg);
        need = (uint64_t)b.threads + extra->threads;
        if (need > cg.threads) {
                snprintf(why, why_size,
                         "%u groups of %u workers start %" PRIu64 " threads, and the cgroup "
                         "allows %" PRIu64 " more: %s (systemd: TasksMax=)",
                         plan.groups, plan.group_size, need, cg.threads, cg.threads_file);
                return -EAGAIN;
        }
        if (read_u64("/proc/sys/kernel/threads-max", &v)) {
                FILE *f = fopen("/proc/loadavg", "re");
                unsigned long long running, total = 0;
                if (f) {
                        if (fscanf(f, "%*s %*s %*s %llu/%llu", &running, &total) != 2)
                                total = 0;
                        fclose(f);
                }
                if (need + total > v) {
                        snprintf(why, why_size,
                                 "%u groups of %u workers start %" PRIu64 " threads, and "
                                 "kernel.threads-max (%" PRIu64 ") leaves %llu",
                                 plan.groups, plan.group_size, need, v,
                                 v > total ? (unsigned long long)(v - total) : 0ULL);
                        return -EAGAIN;
                }
        }
        if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            need > rl.rlim_cur) {
                snprintf(why, why_size,
                         "%u groups of %u workers start %" PRIu64 " threads, more than "
                         "RLIMIT_NPROC (%llu processes and threads of this user; ulimit -u, "
                         "systemd: LimitNPROC=)",
                         plan.groups, plan.group_size, need, (unsigned long long)rl.rlim_cur);
                return -EAGAIN;
        }

        /* descriptors */
        need = (uint64_t)b.fds + extra->fds;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            need > rl.rlim_cur) {
                snprintf(why, why_size,
                         "%u groups keep %" PRIu64 " descriptors open, more than RLIMIT_NOFILE "
                         "(%llu; ulimit -n, systemd: LimitNOFILE=)",
                         plan.groups, need, (unsigned long long)rl.rlim_cur);
                return -EMFILE;
        }

        /* memory maps (mprotect guards) */
        if (b.stack_maps && read_u64("/proc/sys/vm/max_map_count", &v) &&
            b.stack_maps + BUDGET_MAP_SLACK > v) {
                snprintf(why, why_size,
                         "vm.max_map_count is %" PRIu64 ", and a group's fibers need %" PRIu64
                         " memory maps with mprotect stack guards: raise it with 'sysctl -w "
                         "vm.max_map_count=%" PRIu64 "' (or the sysctl.d drop-in)",
                         v, b.stack_maps + BUDGET_MAP_SLACK, b.stack_maps + BUDGET_MAP_SLACK);
                return -ENOMEM;
        }

        /* memory touched: the cgroup's limit */
        need = b.memory_bytes + extra->memory_bytes;
        if (need > cg.memory) {
                snprintf(why, why_size,
                         "%u groups of %u workers (%u classes) take %llu MiB at start, and the "
                         "cgroup leaves %llu MiB: %s (systemd: MemoryMax=)",
                         plan.groups, plan.group_size,
                         cfg->classes && cfg->nclasses ? cfg->nclasses : 1, MIB(need),
                         MIB(cg.memory), cg.memory_file);
                return -ENOMEM;
        }
        /* address space: RLIMIT_AS */
        need += b.stack_bytes + extra->stack_bytes;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
                used = address_space_now();
                room = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
                if (need > room) {
                        snprintf(why, why_size,
                                 "%u groups of %u workers need %llu MiB of address space at "
                                 "start (%" PRIu64 " thread stacks), and RLIMIT_AS leaves %llu "
                                 "MiB (ulimit -v, systemd: LimitAS=)",
                                 plan.groups, plan.group_size, MIB(need),
                                 (uint64_t)b.threads + extra->threads, MIB(room));
                        return -ENOMEM;
                }
        }
        /* committed memory under strict overcommit: thread stacks count whole */
        if (read_u64("/proc/sys/vm/overcommit_memory", &v) && v == 2 &&
            meminfo("CommitLimit", &v) && meminfo("Committed_AS", &used)) {
                room = v > used ? v - used : 0;
                if (need > room) {
                        snprintf(why, why_size,
                                 "%u groups of %u workers commit %llu MiB at start, and "
                                 "vm.overcommit_memory = 2 leaves %llu MiB (CommitLimit - "
                                 "Committed_AS)",
                                 plan.groups, plan.group_size, MIB(need), MIB(room));
                        return -ENOMEM;
                }
        }
        return 0;
}
