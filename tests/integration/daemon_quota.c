/* SPDX-License-Identifier: MIT */
/*
 * daemon_quota.c — what one user's jobs may hold of fiberd's memory and store
 * (daemon/job/jobquota.h), with fiberd as root and clients as two other uids (forked
 * children that drop to them: fiberd_run_as()):
 *  - a user's flood of finished jobs past retention_max_per_user drops that user's own
 *    oldest, never another user's result; the global retention_max takes from whoever
 *    holds the most; NOT_FOUND says "at most N per user";
 *  - a user past max_bytes_per_user with jobs that still hold their args gets OVERLOADED
 *    naming the setting, and another user is not affected; a user at its budget with
 *    finished jobs loses its own oldest ones instead of being refused;
 *  - a plugin's result over max_result_bytes fails its job (INVALID_ARGUMENT, the
 *    sizes and the setting in the message): the bundled echo returns its args;
 *  - SIGHUP changes every one of these limits, and what is over the new ones is
 *    dropped at once.
 * The children report through their exit status (CHECK) and hand ids back through a
 * shared page; every wait is bounded.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define USER_A 65534 /* nobody */
#define USER_B 65533 /* any uid will do: fiberd needs no passwd entry */
#define WAIT_MS 20000
#define MAX_IDS 64

static Fiberd fd_;
static uint64_t *ids_; /* MAP_SHARED: the children write the ids of their jobs here */

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_quota, .fini = teardown, .timeout = 60);

static void start_as_root(const char *config, bool notify)
{
        cr_assert(geteuid() == 0, "this test needs root to act as other uids");
        ids_ = mmap(NULL, MAX_IDS * sizeof(*ids_), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        cr_assert(ids_ != MAP_FAILED);
        fiberd_start(&fd_,
                     &(FiberdOpts){.config = config, .plugins = "echo sleep", .notify = notify});
        cr_assert(chmod(fd_.dir, 0755) == 0);
}

/* A string of @n bytes (static: one at a time). */
static const char *blob(size_t n)
{
        static char buf[256 * 1024];

        cr_assert(n < sizeof(buf));
        memset(buf, 'x', n);
        buf[n] = '\0';
        return buf;
}

/* What a run as another user does: submit @n echo jobs with a @bytes-long "s", each
 * waited for (done) unless @no_wait, their ids into ids_[@first...]. */
typedef struct Flood {
        unsigned first, n;
        size_t bytes;
        bool no_wait;
} Flood;

static void flood(const void *arg)
{
        const Flood *f = arg;
        Client *c = fiberd_connect(&fd_);

        for (unsigned i = 0; i < f->n; i++) {
                IpcStatus st = {0};
                Arg a = f->bytes ? ARG_S("s", blob(f->bytes)) : ARG_I("n", i);
                uint64_t id = rpc_submit(c, "echo", &a, 1, 0, 0, &st);
                Reply rp;
                CHECK(id != 0, "submit %u: %s %s", i, st.code, st.message);
                ids_[f->first + i] = id;
                if (f->no_wait)
                        continue;
                rpc_job_wait(c, id, WAIT_MS, &rp);
                CHECK(rp.r == 0 && strcmp(map_str(rp.result, "state"), "done") == 0,
                      "job %llu: %s %s", (unsigned long long)id, map_str(rp.result, "state"),
                      rp.st.message);
                reply_clear(&rp);
        }
        client_free(c);
}

/* As root (an admin sees every job): whether job @id is still known. */
static bool known(Client *c, uint64_t id)
{
        Reply rp;
        bool found;

        rpc_simple(c, "job.status", 1, &id, &rp);
        cr_assert(rp.r == 0 || strcmp(rp.st.code, "NOT_FOUND") == 0, "job.status %llu: %s %s",
                  (unsigned long long)id, rp.st.code, rp.st.message);
        found = rp.r == 0;
        reply_clear(&rp);
        return found;
}

/* As a user: job ids_[0] is gone, and NOT_FOUND says how many are kept per user. */
static void first_is_gone(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        Reply rp;

        rpc_simple(c, "job.status", 1, &ids_[0], &rp);
        CHECK(rp.r != 0 && strcmp(rp.st.code, "NOT_FOUND") == 0, "job %llu is still there",
              (unsigned long long)ids_[0]);
        CHECK(strstr(rp.st.message, (const char *)arg), "NOT_FOUND says: %s", rp.st.message);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------------ retention ------- */

Test(daemon_quota, a_flood_of_finished_jobs_drops_only_its_senders_oldest)
{
        Client *c;

        start_as_root("[jobs]\nretention_max = 12\nretention_max_per_user = 5\n", false);
        cr_assert(fiberd_run_as(USER_B, USER_B, flood, &(Flood){.first = 40, .n = 1}));
        cr_assert(fiberd_run_as(USER_A, USER_A, flood, &(Flood){.first = 0, .n = 20}));
        c = fiberd_connect(&fd_);
        cr_assert(known(c, ids_[40]), "B's result went with A's flood");
        for (unsigned i = 0; i < 15; i++)
                cr_assert(!known(c, ids_[i]), "A's job %u of 20 outlived its 5", i);
        for (unsigned i = 15; i < 20; i++)
                cr_assert(known(c, ids_[i]), "A's newest 5 stay: job %u", i);
        client_free(c);
        cr_assert(fiberd_run_as(USER_A, USER_A, first_is_gone,
                                "kept for 10 minutes, at most 5 "
                                "per user)"));
}

Test(daemon_quota, the_global_retention_takes_from_whoever_holds_the_most)
{
        Client *c;

        /* no per-user bound: only retention_max = 10 in all */
        start_as_root("[jobs]\nretention_max = 10\nretention_max_per_user = 0\n", false);
        cr_assert(fiberd_run_as(USER_B, USER_B, flood, &(Flood){.first = 40, .n = 2}));
        cr_assert(fiberd_run_as(USER_A, USER_A, flood, &(Flood){.first = 0, .n = 20}));
        c = fiberd_connect(&fd_);
        cr_assert(known(c, ids_[40]) && known(c, ids_[41]), "B's results went with A's flood");
        cr_assert(!known(c, ids_[11]), "A kept more than the 8 left of 10");
        for (unsigned i = 12; i < 20; i++)
                cr_assert(known(c, ids_[i]), "A's job %u", i);
        client_free(c);
}

/* ------------------------------------------------------------------ bytes ----------- */

/* As A: with three 30,000-byte jobs queued, a fourth passes its 100,000 bytes. */
static void over_bytes(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        IpcStatus st = {0};
        Arg a = ARG_S("s", blob(30000));

        (void)arg;
        for (int i = 0; i < 3; i++)
                CHECK(rpc_submit(c, "echo", &a, 1, 0, 0, &st) != 0, "submit %d: %s", i, st.message);
        CHECK(rpc_submit(c, "echo", &a, 1, 0, 0, &st) == 0 && strcmp(st.code, "OVERLOADED") == 0,
              "the fourth: %s %s", st.code ? st.code : "accepted", st.message);
        CHECK(strstr(st.message, "uid 65534 holds 87.") &&
                      strstr(st.message, "max_bytes_per_user") &&
                      strstr(st.message, "(97.7 KiB)") && strstr(st.message, "fiberctl discard"),
              "the refusal: %s", st.message);
        client_free(c);
}

Test(daemon_quota, a_user_over_max_bytes_per_user_is_refused_and_others_are_not)
{
        Client *c;

        /* one slot, held by root's sleep: every echo job stays queued with its args */
        start_as_root("[jobs]\nmax_running = 1\nmax_bytes_per_user = 100000\n", false);
        c = fiberd_connect(&fd_);
        rpc_submit_long(c, "sleep");
        cr_assert(fiberd_run_as(USER_A, USER_A, over_bytes, NULL));
        cr_assert(fiberd_run_as(USER_B, USER_B, flood,
                                &(Flood){.first = 0, .n = 3, .bytes = 30000, .no_wait = true}),
                  "B has a budget of its own");
        client_free(c);
}

Test(daemon_quota, a_user_at_its_budget_drops_its_own_oldest_finished_jobs)
{
        Client *c;

        /* each job holds 2 x 30,000 bytes once done (args and result): two fit in 150,000 */
        start_as_root("[jobs]\nmax_bytes_per_user = 150000\n", false);
        cr_assert(fiberd_run_as(USER_B, USER_B, flood,
                                &(Flood){.first = 40, .n = 1, .bytes = 30000}));
        cr_assert(
                fiberd_run_as(USER_A, USER_A, flood, &(Flood){.first = 0, .n = 10, .bytes = 30000}),
                "a user at its budget was refused while its finished jobs could make room");
        c = fiberd_connect(&fd_);
        cr_assert(known(c, ids_[40]), "B's result went");
        for (unsigned i = 0; i < 8; i++)
                cr_assert(!known(c, ids_[i]), "A's job %u stayed past its budget", i);
        cr_assert(known(c, ids_[8]) && known(c, ids_[9]), "A's newest two fit");
        client_free(c);
}

/* As a user: a sleep job of a minute whose args hold *@arg bytes more, its id in ids_[20]. */
static void long_sleeper(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        IpcStatus st = {0};
        Arg a[] = {ARG_I("ms", 60000), ARG_S("pad", blob(*(const size_t *)arg))};

        ids_[20] = rpc_submit(c, "sleep", a, 2, 0, 0, &st);
        CHECK(ids_[20] != 0, "submit: %s %s", st.code, st.message);
        client_free(c);
}

/* The room a submission needs is made when it is accepted, not when something ends: with
 * the new job still running, the sender's oldest finished job is gone already and the
 * one after it is kept. */
Test(daemon_quota, the_room_a_submission_needs_is_made_when_it_is_accepted)
{
        const size_t pad = 60000;
        Client *c;
        Reply rp;

        start_as_root("[jobs]\nmax_bytes_per_user = 150000\n", false);
        cr_assert(fiberd_run_as(USER_A, USER_A, flood,
                                &(Flood){.first = 0, .n = 2, .bytes = 30000})); /* 120,000 */
        cr_assert(fiberd_run_as(USER_A, USER_A, long_sleeper, &pad));
        c = fiberd_connect(&fd_);
        cr_assert(known(c, ids_[20]), "the sleep job");
        cr_assert(!known(c, ids_[0]), "its oldest finished job stayed: 180,000 held of 150,000");
        cr_assert(known(c, ids_[1]), "one finished job made room; the next one went too");
        rpc_simple(c, "job.cancel", 1, &ids_[20], &rp);
        cr_assert_eq(rp.r, 0, "job.cancel: %s", rp.st.message);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------------ results --------- */

/* As root: an echo of @n bytes; its final record's state and error into @state and
 * @message. */
static void echo_result(Client *c, size_t n, char *state, char *code, char *message)
{
        IpcStatus st = {0};
        Arg a = ARG_S("s", blob(n));
        uint64_t id = rpc_submit(c, "echo", &a, 1, 0, 0, &st);
        const msgpack_object *e;
        Reply rp;

        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, WAIT_MS, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        snprintf(state, 32, "%s", map_str(rp.result, "state"));
        e = map_get(rp.result, "error");
        snprintf(code, 32, "%s", e && e->type == MSGPACK_OBJECT_MAP ? map_str(e, "code") : "");
        snprintf(message, 256, "%s",
                 e && e->type == MSGPACK_OBJECT_MAP ? map_str(e, "message") : "");
        reply_clear(&rp);
}

Test(daemon_quota, a_result_over_max_result_bytes_fails_its_job)
{
        char state[32], code[32], message[256];
        Client *c;

        start_as_root("[jobs]\nmax_result_bytes = 4096\n", false);
        c = fiberd_connect(&fd_);
        echo_result(c, 1000, state, code, message);
        cr_assert_str_eq(state, "done", "%s", message);
        echo_result(c, 10000, state, code, message);
        cr_assert_str_eq(state, "failed");
        cr_assert_str_eq(code, "INVALID_ARGUMENT");
        cr_assert(strstr(message, "the result is 9.8 KiB, more than max_result_bytes (4 KiB)"),
                  "%s", message);
        client_free(c);
}

/* ------------------------------------------------------------------ reload ---------- */

/* As A: a job of 2,000 bytes of args is over max_bytes_per_user 1000. */
static void refused_after_reload(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        IpcStatus st = {0};
        Arg a = ARG_S("s", blob(2000));

        (void)arg;
        CHECK(rpc_submit(c, "echo", &a, 1, 0, 0, &st) == 0 && strcmp(st.code, "OVERLOADED") == 0 &&
                      strstr(st.message, "max_bytes_per_user (1000 B)"),
              "%s %s", st.code ? st.code : "accepted", st.message);
        client_free(c);
}

Test(daemon_quota, sighup_changes_the_limits)
{
        char conf[256], state[32], code[32], message[256];
        Client *c;
        FILE *f;

        start_as_root("[jobs]\nretention_max_per_user = 100\n", true);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        cr_assert(fiberd_run_as(USER_A, USER_A, flood, &(Flood){.first = 0, .n = 6}));
        c = fiberd_connect(&fd_);
        echo_result(c, 10000, state, code, message);
        cr_assert_str_eq(state, "done", "%s", message);

        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs("[jobs]\nretention_max_per_user = 2\nmax_result_bytes = 4096\n"
              "max_bytes_per_user = 1000\n",
              f);
        fclose(f);
        kill(fd_.pid, SIGHUP);
        cr_assert(fiberd_notify_wait(&fd_, "RELOADING=1", 10000));
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        cr_assert(fiberd_log_contains(&fd_, "retention_max_per_user"),
                  "the reload line does not name the new key");

        for (unsigned i = 0; i < 4; i++)
                cr_assert(!known(c, ids_[i]), "A's job %u outlived the lowered bound", i);
        cr_assert(known(c, ids_[4]) && known(c, ids_[5]));
        echo_result(c, 10000, state, code, message);
        cr_assert_str_eq(state, "failed", "max_result_bytes was not lowered");
        cr_assert(strstr(message, "max_result_bytes (4 KiB)"), "%s", message);
        cr_assert(fiberd_run_as(USER_A, USER_A, refused_after_reload, NULL));
        client_free(c);
}
