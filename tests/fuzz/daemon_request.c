/* SPDX-License-Identifier: MIT */
/*
 * daemon_request.c — libFuzzer target for fiberd's request layer, without a socket:
 * bytes → IpcDecoder (envelope) → methods_lookup() (method) → the method itself, which
 * reads its params and options (ipc/value.h) and, for job.submit, the plugin and its
 * args (plugin_host_check_args(), the loaded bundled plugins) and queues the job in a
 * real JobTable.
 *
 * The first input byte picks the caller: 0 is root, anything else uid 1000 + (byte & 3),
 * so the owner checks of job.status/result/cancel/list are reached by both sides. The
 * rest is a byte stream drained as the server's reader does. The daemon is set up once
 * (LLVMFuzzerInitialize) without the table's hooks, so a job that is dispatched ends
 * at once (its run is -ENOSYS): no plugin code runs on fuzzed args and no file is
 * opened. After each input every job is cancelled, its supervisor awaited, and the
 * table swept (retention 0), and every schedule dropped, so inputs do not see each
 * other's jobs, schedules do not grow, and no job is held by a fiber when the fuzzer
 * exits (LeakSanitizer does not read fiber stacks).
 *
 * job.wait and job.run are skipped: they park their request fiber until a job ends or
 * the connection closes, and there is no connection here (job.run's params are
 * job.submit's, which is fuzzed).
 *
 * Checked on every method call: a failure carries a wire code; a success packs exactly
 * one msgpack object (or nothing, which the server turns into nil).
 *
 *   make fuzz-request && build/fuzz/daemon_request tests/fuzz/corpus/daemon_request
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server/creds.h"
#include "daemon/daemon.h"
#include "daemon/obs/log.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/plugin/plugin_job.h"
#include "daemon/store/store.h"
#include "ipc/ipc.h"
#include "scheduler/base/time-util.h"

#ifndef FUZZ_PLUGIN_DIR
#error "FUZZ_PLUGIN_DIR: the directory of the bundled plugins"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static Daemon fuzz_daemon;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        Daemon *d = &fuzz_daemon;
        SchedGroupConfig gcfg = {.workers = 1, .name = "fuzz-srv"};
        SchedConfig scfg = {.concurrency = 1, .name = "fuzz-job"};

        log_set_level(LOG_EMERG); /* the methods log refusals; keep the output readable */
        d->start_ns = sched_now_ns();
        if (sched_group_new(&d->server_group, &gcfg) < 0 || sched_new(&d->job_sched, &scfg) < 0)
                abort();
        if (jobtable_init(&d->jobs, d->job_sched, d->server_group, 0, 32, 0, 64) < 0)
                abort();
        /* the memory store, as a fiberd with [store] backend = memory; groups as an
         * unconfigured fiberd (root alone is admin, everyone may submit) */
        if (store_open(&d->store, STORE_MEMORY, NULL, NULL) < 0)
                abort();
        jobtable_set_store(&d->jobs, d->store);
        schedule_table_init(&d->schedules); /* no firing fiber: schedules only listed */
        d->cfg.admin_gid = d->cfg.submit_gid = CONFIG_NO_GROUP;
        d->cfg.plugin_dir = (char *)FUZZ_PLUGIN_DIR;
        d->cfg.max_message = 1 << 16;
        if (server_new(&d->server, -1, d->server_group, 1 << 16, methods_lookup, d) < 0)
                abort();
        server_set_inline(d->server, methods_run_inline);
        if (plugin_job_init(1 << 16, 1 << 16) < 0 ||
            plugin_host_init(FUZZ_PLUGIN_DIR, &plugin_host_functions) < 0 ||
            plugin_host_count() == 0)
                abort();
        return 0;
}

static int collect_job(Job *j, void *arg)
{
        Job **jobs = arg;

        if (job_state_final(j->state))
                return 0;
        for (size_t i = 0; i < 64; i++)
                if (!jobs[i]) {
                        jobs[i] = job_ref(j);
                        return 0;
                }
        return 1;
}

/* Whether some job still has a supervisor fiber (dispatch.c), which holds a reference. */
static int supervised(Job *j, void *arg)
{
        (void)arg;
        return j->supervisors ? 1 : 0;
}

/* Cancels every job that has not ended, waits (10 s at most) until no supervisor runs one, and drops the
 * finished ones. */
static void forget_jobs(JobTable *t)
{
        uint64_t until = sched_now_ns() + 10 * NSEC_PER_SEC;
        bool more;

        do { /* 64 at a time: ended ones are not collected again */
                Job *jobs[64] = {0};
                more = jobtable_foreach(t, collect_job, jobs) != 0;
                for (size_t i = 0; i < 64 && jobs[i]; i++) {
                        jobtable_cancel(t, jobs[i], false);
                        job_unref(jobs[i]);
                }
        } while (more);
        while (jobtable_foreach(t, supervised, NULL) != 0) {
                if (sched_now_ns() > until)
                        abort(); /* a supervisor that never ends is a bug */
                usleep(100);
        }
        jobtable_sweep(t);
}

/* Drops every schedule schedule.add made. */
static void forget_schedules(ScheduleTable *t)
{
        Schedule *s;

        while ((s = schedule_first_locked(t))) {
                schedule_remove_locked(t, s);
                schedule_free(s);
        }
}

static void run_request(Daemon *d, uid_t uid, IpcMessage *msg)
{
        Creds *creds;
        Request req = {.uid = uid, .pid = 1, .msg = *msg};
        MethodFn fn = methods_lookup(msg->method, msg->method_len);
        IpcStatus st = {0};
        msgpack_sbuffer result;
        msgpack_packer pk;
        int r;

        if (!fn || strcmp(msg->method, IPC_METHOD_JOB_WAIT) == 0 ||
            strcmp(msg->method, IPC_METHOD_JOB_RUN) == 0)
                return;
        if (creds_new(uid, uid, NULL, 0, &creds) < 0)
                abort();
        req.creds = creds; /* the connection's, as SO_PEERCRED gives it */
        msgpack_sbuffer_init(&result);
        msgpack_packer_init(&pk, &result, msgpack_sbuffer_write);
        r = fn(d, &req, &pk, &st);
        if (r < 0 || ipc_status_failed(&st)) {
                /* the server answers with st's code, or the one of r */
                if (ipc_status_failed(&st) && (!st.code || !*st.code))
                        abort();
                if (!ipc_status_failed(&st) && r >= 0)
                        abort();
        } else if (result.size > 0) {
                msgpack_unpacked u;
                size_t off = 0;

                msgpack_unpacked_init(&u);
                if (msgpack_unpack_next(&u, result.data, result.size, &off) !=
                            MSGPACK_UNPACK_SUCCESS ||
                    off != result.size)
                        abort();
                msgpack_unpacked_destroy(&u);
        }
        msgpack_sbuffer_destroy(&result);
        creds_unref(creds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        Daemon *d = &fuzz_daemon;
        IpcDecoder *dec;
        uid_t uid;

        if (size < 1)
                return 0;
        uid = data[0] == 0 ? 0 : 1000 + (data[0] & 3);
        data++;
        size--;
        if (ipc_decoder_new(&dec, 1 << 16) < 0)
                abort();
        if (ipc_decoder_feed(dec, data, size) == 0) {
                for (;;) {
                        IpcMessage m;
                        int r = ipc_decoder_next(dec, &m);

                        if (r == 0 || (r < 0 && r != -EPROTO))
                                break;
                        if (r < 0)
                                continue;
                        if (m.type == IPC_REQUEST)
                                run_request(d, uid, &m);
                        ipc_message_clear(&m);
                }
        }
        ipc_decoder_free(dec);
        forget_jobs(&d->jobs);
        forget_schedules(&d->schedules);
        return 0;
}
