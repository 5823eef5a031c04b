/* SPDX-License-Identifier: MIT */
/*
 * daemon_fulldisk.c — a full disk loses nothing (daemon/store/store.h, "When the disk
 * cannot take a write"): fiberd's sqlite store lives on a 2 MiB tmpfs of the test's own
 * ([store] path), which a filler file fills. Submissions then answer UNAVAILABLE
 * ("retry later") and are never written; a job that was running finishes while the
 * disk is full, its job.wait with a timeout answers UNAVAILABLE "wait again" and one
 * without a timeout waits, and so does a job.run whose job ends then (its only write is
 * at its end); stats and the log say the store is failing. Once the filler is gone the
 * held final states are written, the waiters are answered done, and after a kill -9
 * and a restart both jobs are done on disk, ran once, and the refused submissions never
 * existed. Mounting needs root (CAP_SYS_ADMIN): elsewhere the test is skipped,
 * saying why.
 */
#include "tests/integration/fiberd_harness.h"
#include "scheduler/base/macro.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static Fiberd fd_;
static char mnt[64]; /* the tmpfs, when mounted */
static bool mounted;

static void teardown(void)
{
        fiberd_stop(&fd_);
        if (mounted && umount2(mnt, MNT_DETACH) < 0)
                fprintf(stderr, "daemon_fulldisk: umount %s: %s\n", mnt, strerror(errno));
        mounted = false;
        if (mnt[0])
                rmdir(mnt);
}

TestSuite(daemon_fulldisk, .fini = teardown, .timeout = 90);

/* A 2 MiB tmpfs at a directory of the test's own; skips the test when it cannot mount. */
static void mount_small_disk(void)
{
        snprintf(mnt, sizeof(mnt), "/tmp/fiberd-fulldisk-XXXXXX");
        cr_assert(mkdtemp(mnt), "mkdtemp: %s", strerror(errno));
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=2m,mode=0700") < 0) {
                int e = errno;
                rmdir(mnt);
                mnt[0] = '\0';
                cr_skip_test("cannot mount a tmpfs for the job store (%s): this test needs "
                             "root (CAP_SYS_ADMIN) to make a disk it can fill",
                             strerror(e));
        }
        mounted = true;
}

/* The status's code is @code (a NULL code, success, is not). */
static bool code_is(const IpcStatus *st, const char *code)
{
        return st->code && strcmp(st->code, code) == 0;
}

/* Writes @path until the disk is full; returns the bytes written. */
static size_t fill(const char *path)
{
        static char buf[64 * 1024];
        size_t total = 0, chunk = sizeof(buf);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
        memset(buf, 0x5a, sizeof(buf));
        while (chunk) {
                ssize_t n = write(fd, buf, chunk);
                if (n > 0) {
                        total += (size_t)n;
                        continue;
                }
                cr_assert(n < 0 && errno == ENOSPC, "filling %s: %s", path, strerror(errno));
                chunk /= 2; /* the last pages, to the last byte */
        }
        fsync(fd);
        close(fd);
        return total;
}

/* job.status of @id: its state into @state (size 32) and attempt; the call's error. */
static int job_state(Client *c, uint64_t id, char *state, uint64_t *attempt)
{
        Reply rp;
        int r;

        rpc_simple(c, "job.status", 1, &id, &rp);
        r = rp.r;
        if (r == 0) {
                snprintf(state, 32, "%s", map_str(rp.result, "state"));
                if (attempt)
                        *attempt = map_uint(rp.result, "attempt");
        }
        reply_clear(&rp);
        return r;
}

/* Polls job.status until @id is in @want (asserts after 15 s). */
static void wait_state(Client *c, uint64_t id, const char *want)
{
        uint64_t deadline = fiberd_now_ms() + 15000;
        char state[32] = "";

        while (job_state(c, id, state, NULL) != 0 || strcmp(state, want) != 0) {
                cr_assert(fiberd_now_ms() < deadline, "job %llu is %s, not %s, after 15 s",
                          (unsigned long long)id, state, want);
                usleep(5000);
        }
}

/* The ids job.list answers (every job, here: root's), ascending, at most @max. */
static size_t list_ids(Client *c, uint64_t *ids, size_t max)
{
        const msgpack_object *jobs;
        size_t n = 0;
        uint32_t msgid;
        Reply rp;
        msgpack_packer *pk = client_request(c, "job.list", 1, &msgid);

        cr_assert(pk);
        msgpack_pack_nil(pk);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.list: %s", rp.st.message);
        jobs = rp.result->type == MSGPACK_OBJECT_MAP ? map_get(rp.result, "jobs") : rp.result;
        cr_assert(jobs && jobs->type == MSGPACK_OBJECT_ARRAY, "job.list: no array");
        for (uint32_t i = 0; i < jobs->via.array.size && n < max; i++)
                ids[n++] = map_uint(&jobs->via.array.ptr[i], "id");
        reply_clear(&rp);
        qsort(ids, n, sizeof(*ids), u64_compare);
        return n;
}

/* stats' store map: *@failing and *@pending. */
static void store_stats(Client *c, bool *failing, uint64_t *pending)
{
        const msgpack_object *st;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "stats: %s", rp.st.message);
        st = map_get(rp.result, "store");
        cr_assert(st && st->type == MSGPACK_OBJECT_MAP, "stats has no store map");
        {
                const msgpack_object *f = map_get(st, "failing");
                cr_assert(f && f->type == MSGPACK_OBJECT_BOOLEAN);
                *failing = f->via.boolean;
        }
        *pending = map_uint(st, "pending_writes");
        reply_clear(&rp);
}

/* Polls the log until it has a line containing @needle (asserts after 15 s). */
static void wait_log(const char *needle)
{
        uint64_t deadline = fiberd_now_ms() + 15000;

        while (!fiberd_log_contains(&fd_, needle)) {
                cr_assert(fiberd_now_ms() < deadline, "no log line with \"%s\" after 15 s", needle);
                usleep(10000);
        }
}

/* kill -9 of fiberd and a restart on the same store; a client of the new one. */
static Client *killed_and_restarted(void)
{
        int status = fiberd_signal_and_wait(&fd_, SIGKILL, 10000);

        cr_assert(WIFSIGNALED(status), "status 0x%x", status);
        fiberd_restart(&fd_);
        return fiberd_connect(&fd_);
}

/* Job @id is done on disk, and ran once (attempt 0). */
static void expect_done_once(Client *c, uint64_t id)
{
        char state[32] = "";
        uint64_t attempt = 99;

        cr_assert_eq(job_state(c, id, state, &attempt), 0, "job %llu is gone after the restart",
                     (unsigned long long)id);
        cr_assert_str_eq(state, "done",
                         "job %llu is %s after the restart: its final state was not written",
                         (unsigned long long)id, state);
        cr_assert_eq(attempt, 0, "job %llu ran %llu times", (unsigned long long)id,
                     (unsigned long long)attempt + 1);
}

Test(daemon_fulldisk, a_full_disk_loses_nothing)
{
        char config[256], filler[96];
        Client *c, *waiter, *runner;
        IpcStatus st = {0};
        Reply rp;
        uint32_t msgid;
        uint64_t a, run, after, early, refused, pending = 0;
        uint32_t run_msgid;
        bool failing = false;
        size_t filled;

        mount_small_disk();
        snprintf(config, sizeof(config), "[store]\npath = %s/jobs.db\n", mnt);
        snprintf(filler, sizeof(filler), "%s/filler", mnt);
        fiberd_start(&fd_, &(FiberdOpts){.config = config, .plugins = "sleep echo"});
        c = fiberd_connect(&fd_);
        waiter = fiberd_connect(&fd_);
        runner = fiberd_connect(&fd_);

        /* before: one job done, one running across the outage */
        early = rpc_submit(c, "echo", NULL, 0, 0, 0, &st);
        cr_assert(early, "echo: %s", st.message);
        wait_state(c, early, "done");
        a = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 2500)}, 1, 0, 0, &st);
        cr_assert(a, "sleep: %s", st.message);
        wait_state(c, a, "running");
        {
                msgpack_packer *pk = client_request(runner, "job.run", 4, &run_msgid);
                cr_assert(pk);
                ipc_pack_cstr(pk, "sleep");
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_uint(pk, "ms", 2500);
                msgpack_pack_nil(pk);
                msgpack_pack_nil(pk); /* no wait limit */
                cr_assert_eq(client_flush(runner, 5000, &st), 0);
        }
        run = a + 1; /* ids are handed out in order */
        wait_state(c, run, "running");

        /* the disk fills */
        filled = fill(filler);
        cr_assert(filled > 0);

        /* a submission is refused and retryable: nothing is accepted */
        memset(&st, 0, sizeof(st));
        refused = rpc_submit(c, "echo", NULL, 0, 0, 0, &st);
        cr_assert_eq(refused, 0, "job %llu accepted on a full disk", (unsigned long long)refused);
        cr_assert(code_is(&st, "UNAVAILABLE"), "%s: %s", st.code, st.message);
        cr_assert(strstr(st.message, "cannot write (No space left on device)") &&
                          strstr(st.message, "retry later"),
                  "%s", st.message);

        /* the running job ends while the disk is full: its final state is held */
        wait_state(c, a, "done");
        rpc_job_wait(c, a, 300, &rp);
        cr_assert(code_is(&rp.st, "UNAVAILABLE"), "job.wait answered %s: %s",
                  rp.r == 0 ? "its record" : rp.st.code, rp.st.message);
        cr_assert(strstr(rp.st.message, "ended done, but the job store cannot write it yet") &&
                          strstr(rp.st.message, "wait again"),
                  "%s", rp.st.message);
        reply_clear(&rp);
        /* another waiter, without a timeout: answered once the state is written */
        {
                msgpack_packer *pk = client_request(waiter, "job.wait", 2, &msgid);
                cr_assert(pk);
                msgpack_pack_uint64(pk, a);
                msgpack_pack_nil(pk);
                cr_assert_eq(client_flush(waiter, 5000, &st), 0);
        }
        /* submissions are refused up front now */
        memset(&st, 0, sizeof(st));
        cr_assert_eq(rpc_submit(c, "echo", NULL, 0, 0, 0, &st), 0);
        cr_assert(code_is(&st, "UNAVAILABLE"), "%s", st.code);
        store_stats(c, &failing, &pending);
        cr_assert(failing, "stats: the store is not failing");
        cr_assert(pending >= 1, "stats: %llu writes pending", (unsigned long long)pending);
        wait_log("cannot write (No space left on device); holding");
        wait_state(c, run, "done");
        {
                IpcMessage m;
                cr_assert_eq(client_receive(waiter, &m, 200, &st), -ETIMEDOUT,
                             "the waiter was answered before the state was written");
                cr_assert_eq(client_receive(runner, &m, 0, &st), -ETIMEDOUT,
                             "job.run was answered before its record was written");
        }

        /* space returns: the held state is written and the waiter answered */
        cr_assert_eq(unlink(filler), 0);
        wait_log("job store ");
        wait_log("writing again after");
        rpc_wait_reply(waiter, msgid, &rp);
        cr_assert_eq(rp.r, 0, "the waiter got %s: %s", rp.st.code, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        rpc_wait_reply(runner, run_msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.run got %s: %s", rp.st.code, rp.st.message);
        cr_assert_eq(map_uint(rp.result, "id"), run);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        store_stats(c, &failing, &pending);
        cr_assert_not(failing, "stats: the store is still failing");
        cr_assert_eq(pending, 0);
        after = rpc_submit(c, "echo", NULL, 0, 0, 0, &st);
        cr_assert(after, "a submission after: %s", st.message);
        wait_state(c, after, "done");
        client_free(runner);
        client_free(waiter);
        client_free(c);

        /* what is on disk: kill -9 and a restart see the final state, run once */
        c = killed_and_restarted();
        expect_done_once(c, a);
        expect_done_once(c, run); /* job.run's */
        /* nothing else: a submission refused after it had an id was not kept */
        {
                uint64_t want[] = {early, a, run, after}, ids[8];
                size_t n = list_ids(c, ids, 8);
                cr_assert_eq(n, 4, "%zu jobs after the restart, not 4", n);
                for (size_t k = 0; k < n; k++)
                        cr_assert_eq(ids[k], want[k], "job %llu after the restart, not %llu",
                                     (unsigned long long)ids[k], (unsigned long long)want[k]);
        }
        client_free(c);
}

/* A job revived by job.retry lives again: once it ends a second time, a job.wait is
 * answered only when that end is on disk, not at once on the strength of its first
 * end's write. The second end comes while the disk is full; the waiter hears it once
 * space returns, and a kill -9 and a restart find the job done, its retry counted from
 * zero. */
Test(daemon_fulldisk, a_revived_job_is_answered_once_its_new_end_is_written)
{
        char config[256], filler[96];
        Client *c, *waiter;
        IpcStatus st = {0};
        msgpack_packer *pk;
        uint64_t a;
        uint32_t msgid;
        Reply rp;

        mount_small_disk();
        snprintf(config, sizeof(config), "[store]\npath = %s/jobs.db\n", mnt);
        snprintf(filler, sizeof(filler), "%s/filler", mnt);
        fiberd_start(&fd_, &(FiberdOpts){.config = config, .plugins = "sleep"});
        c = fiberd_connect(&fd_);
        waiter = fiberd_connect(&fd_);

        /* its first life ends cancelled, and that end is on disk */
        a = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 3000)}, 1, 0, 0, &st);
        cr_assert(a, "sleep: %s", st.message);
        wait_state(c, a, "running");
        rpc_simple(c, "job.cancel", 1, &a, &rp);
        cr_assert_eq(rp.r, 0, "job.cancel: %s", rp.st.message);
        reply_clear(&rp);
        rpc_job_wait(c, a, 10000, &rp);
        cr_assert_eq(rp.r, 0, "job.wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        reply_clear(&rp);

        /* revived, it runs again; its second end comes while the disk is full */
        pk = client_request(c, "job.retry", 1, &msgid);
        cr_assert(pk);
        msgpack_pack_array(pk, 1);
        msgpack_pack_uint64(pk, a);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.retry: %s", rp.st.message);
        {
                const msgpack_object *ids = map_get(rp.result, "retried");
                cr_assert(ids && ids->type == MSGPACK_OBJECT_ARRAY && ids->via.array.size == 1 &&
                                  ids->via.array.ptr[0].via.u64 == a,
                          "job.retry did not retry job %llu", (unsigned long long)a);
        }
        reply_clear(&rp);
        wait_state(c, a, "running");
        cr_assert(fill(filler) > 0);
        wait_state(c, a, "done");
        pk = client_request(waiter, "job.wait", 2, &msgid);
        cr_assert(pk);
        msgpack_pack_uint64(pk, a);
        msgpack_pack_nil(pk); /* no wait limit */
        cr_assert_eq(client_flush(waiter, 5000, &st), 0);
        {
                IpcMessage m;
                cr_assert_eq(client_receive(waiter, &m, 300, &st), -ETIMEDOUT,
                             "the waiter was answered before the second end was written");
        }

        /* space returns: the second end is written, then the waiter is answered */
        cr_assert_eq(unlink(filler), 0);
        rpc_wait_reply(waiter, msgid, &rp);
        cr_assert_eq(rp.r, 0, "the waiter got %s: %s", rp.st.code, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        client_free(waiter);
        client_free(c);

        c = killed_and_restarted();
        expect_done_once(c, a);
        client_free(c);
}
