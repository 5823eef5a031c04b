/* SPDX-License-Identifier: MIT */
/*
 * daemon_schedule.c — periodic schedules seen from a client (PROTOCOL.md, "schedule.add",
 * "schedule.list, schedule.remove, schedule.pause, schedule.resume"): an interval's
 * ticks submit jobs as the schedule's owner, with the key schedule:<name>:<tick ms>;
 * pause holds them and resume starts them again from now; remove ends a schedule; bad
 * specs are refused naming the field; another user's schedules are not seen; a
 * schedule survives kill -9 and fires again; a tick that passed while fiberd was down
 * is fired once at the start with missed = run_once and dropped with skip; a cron
 * expression's next tick is the next minute (checked without waiting for it); a tick
 * whose job is refused is logged once and the schedule goes on.
 *
 * Intervals are the least allowed, 1 s; every wait for something to happen is a bounded
 * poll of a condition (schedule.list's last_job, job.list, the log, the wall clock); the
 * checks that something does not happen (a paused schedule submits, a refused tick is
 * logged twice) watch for two and a half intervals.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534
#define WAIT_MS 15000

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_schedule, .fini = teardown, .timeout = 90);

static void start(const char *config)
{
        fiberd_start(&fd_, &(FiberdOpts){.config = config, .workers = 2});
}

static uint64_t wall_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What schedule.add sends; NULL / 0 fields are left out of the spec. */
typedef struct Spec {
        const char *cron, *tz, *missed;
        uint64_t every_ms;
        const char *extra_key; /* one more spec key (an unknown one), with value 1 */
        const char *plugin;    /* NULL: "echo" */
        const char *args_ms;   /* sleep's "ms" as a string (a bad argument), or NULL */
        const char *option;    /* one option key with the value 1 (e.g. "key"), or NULL */
} Spec;

/* schedule.add [@name, spec, plugin, args, options] into @rp (the caller clears it). */
static void add(Client *c, const char *name, const Spec *s, Reply *rp)
{
        uint32_t msgid, n;
        msgpack_packer *pk = client_request(c, "schedule.add", 5, &msgid);

        cr_assert(pk);
        ipc_pack_cstr(pk, name);
        n = !!s->cron + !!s->tz + !!s->missed + !!s->every_ms + !!s->extra_key;
        msgpack_pack_map(pk, n);
        if (s->cron)
                ipc_pack_kv_cstr(pk, "cron", s->cron);
        if (s->tz)
                ipc_pack_kv_cstr(pk, "tz", s->tz);
        if (s->missed)
                ipc_pack_kv_cstr(pk, "missed", s->missed);
        if (s->every_ms)
                ipc_pack_kv_uint(pk, "every_ms", s->every_ms);
        if (s->extra_key)
                ipc_pack_kv_uint(pk, s->extra_key, 1);
        ipc_pack_cstr(pk, s->plugin ? s->plugin : "echo");
        if (s->args_ms) {
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_cstr(pk, "ms", s->args_ms);
        } else {
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_uint(pk, "n", 7);
        }
        if (s->option) {
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_uint(pk, s->option, 1);
        } else {
                msgpack_pack_map(pk, 0);
        }
        rpc_wait_reply(c, msgid, rp);
}

/* schedule.add that must succeed. */
static void add_ok(Client *c, const char *name, const Spec *s)
{
        Reply rp;

        add(c, name, s, &rp);
        cr_assert_eq(rp.r, 0, "schedule.add %s: %s %s", name, rp.st.code, rp.st.message);
        reply_clear(&rp);
}

/* schedule.add that must fail with @code and a message containing @needle. */
static void add_refused(Client *c, const char *name, const Spec *s, const char *code,
                        const char *needle)
{
        Reply rp;

        add(c, name, s, &rp);
        cr_assert_neq(rp.r, 0, "schedule.add %s was accepted", name);
        cr_assert_str_eq(rp.st.code, code, "%s: %s", name, rp.st.message);
        cr_assert(strstr(rp.st.message, needle), "%s: \"%s\" lacks \"%s\"", name, rp.st.message,
                  needle);
        reply_clear(&rp);
}

/* schedule.remove|pause|resume [@name] or [@name, @owner] (@owner < 0: left out). */
static void named(Client *c, const char *method, const char *name, int64_t owner, Reply *rp)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, method, owner < 0 ? 1 : 2, &msgid);

        cr_assert(pk);
        ipc_pack_cstr(pk, name);
        if (owner >= 0)
                msgpack_pack_uint64(pk, (uint64_t)owner);
        rpc_wait_reply(c, msgid, rp);
}

static void list(Client *c, Reply *rp)
{
        rpc_simple(c, "schedule.list", 0, NULL, rp);
        cr_assert_eq(rp->r, 0, "schedule.list: %s", rp->st.message);
        cr_assert_eq(rp->result->type, MSGPACK_OBJECT_ARRAY);
}

/* @name's map in a schedule.list result, or NULL. */
static const msgpack_object *find(const msgpack_object *arr, const char *name)
{
        for (uint32_t i = 0; i < arr->via.array.size; i++)
                if (strcmp(map_str(&arr->via.array.ptr[i], "name"), name) == 0)
                        return &arr->via.array.ptr[i];
        return NULL;
}

/* @name's field @key now (UINT64_MAX when nil); asserts the schedule is listed. */
static uint64_t field(Client *c, const char *name, const char *key)
{
        const msgpack_object *s;
        Reply rp;
        uint64_t v;

        list(c, &rp);
        s = find(rp.result, name);
        cr_assert(s, "schedule %s is not listed", name);
        v = map_uint(s, key);
        reply_clear(&rp);
        return v;
}

/* Polls until @name's last_job is set and not @not_id; returns it (asserts in 15 s). */
static uint64_t wait_new_job(Client *c, const char *name, uint64_t not_id)
{
        uint64_t deadline = fiberd_now_ms() + WAIT_MS, id;

        for (;;) {
                id = field(c, name, "last_job");
                if (id != UINT64_MAX && id != not_id)
                        return id;
                cr_assert(fiberd_now_ms() < deadline, "schedule %s submitted no new job in %d ms",
                          name, WAIT_MS);
                usleep(20000);
        }
}

/* The tick ms of a "schedule:<name>:<tick>" key, or 0 when @key is not @name's. */
static uint64_t key_tick(const char *key, const char *name)
{
        char prefix[128];
        size_t n = (size_t)snprintf(prefix, sizeof(prefix), "schedule:%s:", name);

        return strncmp(key, prefix, n) == 0 ? strtoull(key + n, NULL, 10) : 0;
}

/* Is there a job of schedule @name for a tick before @before_ms, created at or after
 * @created_from_ms? (job.list of every job) */
static bool catchup_job(Client *c, const char *name, uint64_t before_ms, uint64_t created_from_ms)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.list", 1, &msgid);
        bool found = false;
        Reply rp;

        cr_assert(pk);
        msgpack_pack_map(pk, 0);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.list: %s", rp.st.message);
        for (uint32_t i = 0; i < rp.result->via.array.size; i++) {
                const msgpack_object *j = &rp.result->via.array.ptr[i];
                uint64_t tick = key_tick(map_str(j, "key"), name);
                if (tick && tick < before_ms && map_uint(j, "created_ms") >= created_from_ms)
                        found = true;
        }
        reply_clear(&rp);
        return found;
}

/* ------------------------------------------------------------ intervals --------- */

Test(daemon_schedule, every_ms_submits_a_job_at_each_tick_as_its_owner)
{
        const msgpack_object *s;
        uint64_t before, after, first, second, tick1, tick2;
        Client *c;
        Reply rp;

        start(NULL);
        c = fiberd_connect(&fd_);
        before = wall_ms();
        add(c, "tick", &(Spec){.every_ms = 1000}, &rp);
        after = wall_ms();
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        s = rp.result;
        cr_assert_str_eq(map_str(s, "name"), "tick");
        cr_assert_eq(map_uint(s, "owner"), getuid());
        cr_assert_eq(map_uint(s, "every_ms"), 1000);
        cr_assert_eq(map_get(s, "cron")->type, MSGPACK_OBJECT_NIL);
        cr_assert_str_eq(map_str(s, "missed"), "skip");
        cr_assert_str_eq(map_str(s, "plugin"), "echo");
        cr_assert_eq(map_uint(map_get(s, "args"), "n"), 7, "args come back as a map");
        cr_assert_eq(map_get(s, "options")->type, MSGPACK_OBJECT_MAP);
        cr_assert_eq(map_get(s, "paused")->via.boolean, false);
        cr_assert(map_uint(s, "next_ms") >= before + 1000 && map_uint(s, "next_ms") <= after + 1000,
                  "next_ms %llu", (unsigned long long)map_uint(s, "next_ms"));
        cr_assert_eq(map_get(s, "last_job")->type, MSGPACK_OBJECT_NIL);
        reply_clear(&rp);

        first = wait_new_job(c, "tick", 0);
        tick1 = field(c, "tick", "last_ms");
        rpc_simple(c, "job.status", 1, &first, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "plugin"), "echo");
        cr_assert_eq(map_uint(rp.result, "owner"), getuid());
        cr_assert_eq(key_tick(map_str(rp.result, "key"), "tick"), tick1, "key %s",
                     map_str(rp.result, "key"));
        reply_clear(&rp);

        second = wait_new_job(c, "tick", first);
        tick2 = field(c, "tick", "last_ms");
        cr_assert(second > first);
        cr_assert(tick2 > tick1 && (tick2 - tick1) % 1000 == 0,
                  "ticks %llu and %llu are not whole intervals apart", (unsigned long long)tick1,
                  (unsigned long long)tick2);

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(map_uint(rp.result, "schedules"), 1);
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_schedule, pause_holds_the_ticks_and_resume_starts_them_from_now)
{
        uint64_t id, until, before;
        Client *c;
        Reply rp;

        start(NULL);
        c = fiberd_connect(&fd_);
        add_ok(c, "beat", &(Spec){.every_ms = 1000});
        wait_new_job(c, "beat", 0);
        named(c, "schedule.pause", "beat", -1, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_get(rp.result, "paused")->via.boolean, true);
        cr_assert_eq(map_get(rp.result, "next_ms")->type, MSGPACK_OBJECT_NIL);
        reply_clear(&rp);
        id = field(c, "beat", "last_job");

        /* two and a half intervals: a tick would have come twice */
        until = fiberd_now_ms() + 2500;
        while (fiberd_now_ms() < until) {
                cr_assert_eq(field(c, "beat", "last_job"), id, "a paused schedule submitted");
                usleep(100000);
        }

        before = wall_ms();
        named(c, "schedule.resume", "beat", -1, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_get(rp.result, "paused")->via.boolean, false);
        cr_assert(map_uint(rp.result, "next_ms") >= before + 1000 &&
                          map_uint(rp.result, "next_ms") <= wall_ms() + 1000,
                  "resume counts the next tick from now");
        reply_clear(&rp);
        wait_new_job(c, "beat", id);
        client_free(c);
}

Test(daemon_schedule, remove_answers_the_schedule_and_ends_it)
{
        Client *c;
        Reply rp;

        start(NULL);
        c = fiberd_connect(&fd_);
        add_ok(c, "gone", &(Spec){.every_ms = 60000});
        named(c, "schedule.remove", "gone", -1, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "name"), "gone");
        cr_assert_eq(map_uint(rp.result, "every_ms"), 60000);
        reply_clear(&rp);
        list(c, &rp);
        cr_assert_eq(rp.result->via.array.size, 0);
        reply_clear(&rp);
        named(c, "schedule.remove", "gone", -1, &rp);
        cr_assert_str_eq(rp.st.code, "NOT_FOUND");
        cr_assert(strstr(rp.st.message, "gone"), "%s", rp.st.message);
        reply_clear(&rp);
        named(c, "schedule.pause", "gone", -1, &rp);
        cr_assert_str_eq(rp.st.code, "NOT_FOUND");
        reply_clear(&rp);
        add_ok(c, "gone", &(Spec){.every_ms = 60000}); /* the name is free again */
        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(map_uint(rp.result, "schedules"), 1);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------ refusals ---------- */

Test(daemon_schedule, bad_specs_are_refused_naming_the_field)
{
        char long_name[IPC_SCHEDULE_NAME_MAX + 2];
        Client *c;
        Reply rp;

        start(NULL);
        c = fiberd_connect(&fd_);
        add_refused(c, "a", &(Spec){.cron = "61 * * * *"}, "INVALID_ARGUMENT",
                    "cron: minute field");
        add_refused(c, "a", &(Spec){.cron = "* * * *"}, "INVALID_ARGUMENT", "cron: ");
        add_refused(c, "a", &(Spec){.cron = "0 3 * * *", .tz = "Mars/Olympus_Mons"},
                    "INVALID_ARGUMENT", "tz: time zone 'Mars/Olympus_Mons'");
        add_refused(c, "a", &(Spec){.every_ms = 999}, "INVALID_ARGUMENT", "every_ms: 999");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .cron = "* * * * *"}, "INVALID_ARGUMENT",
                    "not both");
        add_refused(c, "a", &(Spec){0}, "INVALID_ARGUMENT", "cron or every_ms is missing");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .tz = "UTC"}, "INVALID_ARGUMENT",
                    "tz: goes with cron");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .missed = "sometimes"}, "INVALID_ARGUMENT",
                    "missed: \"sometimes\"");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .extra_key = "at"}, "INVALID_ARGUMENT",
                    "spec: unknown key at");
        add_refused(c, "a b", &(Spec){.every_ms = 1000}, "INVALID_ARGUMENT", "name: \"a b\"");
        memset(long_name, 'x', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        add_refused(c, long_name, &(Spec){.every_ms = 1000}, "INVALID_ARGUMENT", "name: ");
        /* plugin, args and options as job.submit checks them */
        add_refused(c, "a", &(Spec){.every_ms = 1000, .plugin = "sha512"}, "NOT_FOUND",
                    "no plugin named \"sha512\"");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .plugin = "sleep", .args_ms = "abc"},
                    "INVALID_ARGUMENT", "sleep: ms");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .option = "colour"}, "INVALID_ARGUMENT",
                    "unknown option colour");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .option = "key"}, "INVALID_ARGUMENT",
                    "options: key");
        add_refused(c, "a", &(Spec){.every_ms = 1000, .option = "run_at"}, "INVALID_ARGUMENT",
                    "options: run_at");
        /* nothing of that was kept, and no job was made */
        list(c, &rp);
        cr_assert_eq(rp.result->via.array.size, 0);
        reply_clear(&rp);
        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(map_uint(map_get(rp.result, "jobs"), "submitted"), 0);
        reply_clear(&rp);

        add_ok(c, "a", &(Spec){.every_ms = 60000});
        add_refused(c, "a", &(Spec){.cron = "@daily"}, "ALREADY_EXISTS", "a schedule named a");
        client_free(c);
}

/* How many lines of the daemon's current log contain @needle. */
static int log_count(const char *needle)
{
        char line[4096];
        FILE *f = fopen(fd_.log, "r");
        int n = 0;

        cr_assert(f, "cannot open %s", fd_.log);
        while (fgets(line, sizeof(line), f))
                n += strstr(line, needle) != NULL;
        fclose(f);
        return n;
}

/* Polls until the log has a line with @needle (asserts in 15 s). */
static void wait_log(const char *needle)
{
        uint64_t deadline = fiberd_now_ms() + WAIT_MS;

        while (!fiberd_log_contains(&fd_, needle)) {
                cr_assert(fiberd_now_ms() < deadline, "no \"%s\" in the log", needle);
                usleep(20000);
        }
}

Test(daemon_schedule, a_refused_tick_is_logged_once_and_the_schedule_goes_on)
{
        char path[256], refused[96], again[96];
        uint64_t id, until;
        Client *c;

        snprintf(refused, sizeof(refused), "schedule lost of uid %u: the job of its tick at",
                 (unsigned)getuid());
        snprintf(again, sizeof(again), "schedule lost of uid %u submits again", (unsigned)getuid());
        start(NULL);
        c = fiberd_connect(&fd_);
        add_ok(c, "lost", &(Spec){.every_ms = 1000});
        id = wait_new_job(c, "lost", 0);
        /* its plugin goes: every tick is refused, and logged once */
        snprintf(path, sizeof(path), "%s/echo.so", fd_.plugin_dir);
        cr_assert(unlink(path) == 0);
        wait_log(refused);
        cr_assert(fiberd_log_contains(&fd_, "NOT_FOUND"), "the reason is not logged");
        until = fiberd_now_ms() + 2500;
        while (fiberd_now_ms() < until)
                usleep(100000);
        cr_assert_eq(log_count(refused), 1, "a refused tick is logged once per schedule");
        cr_assert_eq(field(c, "lost", "last_job"), id, "a refused tick submitted a job");
        /* it comes back: the schedule submits again, and says so */
        fiberd_copy_plugin(&fd_, FIBERD_PLUGIN_BUILD_DIR "/echo.so", "echo.so");
        wait_new_job(c, "lost", id);
        wait_log(again);
        client_free(c);
}

/* ------------------------------------------------------------ other users ------- */

static void nobody_checks(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        Reply rp;

        rpc_simple(c, "schedule.list", 0, NULL, &rp);
        CHECK(rp.r == 0 && rp.result->via.array.size == 0, "nobody sees root's schedule");
        reply_clear(&rp);
        named(c, "schedule.remove", "roots", -1, &rp);
        CHECK(rp.r != 0 && strcmp(rp.st.code, "NOT_FOUND") == 0, "remove: %s", rp.st.code);
        reply_clear(&rp);
        named(c, "schedule.pause", "roots", 0, &rp);
        CHECK(rp.r != 0 && strcmp(rp.st.code, "PERMISSION_DENIED") == 0, "pause as root: %s",
              rp.st.code);
        CHECK(strstr(rp.st.message, "admin"), "%s", rp.st.message);
        reply_clear(&rp);
        add(c, "mine", &(Spec){.every_ms = 1000}, &rp);
        CHECK(rp.r == 0, "nobody's schedule.add: %s", rp.st.message);
        CHECK(map_uint(rp.result, "owner") == NOBODY, "owner %llu",
              (unsigned long long)map_uint(rp.result, "owner"));
        reply_clear(&rp);
        rpc_simple(c, "schedule.list", 0, NULL, &rp);
        CHECK(rp.r == 0 && rp.result->via.array.size == 1 && find(rp.result, "mine"),
              "nobody lists its own schedule only");
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_schedule, another_users_schedules_are_invisible_but_an_admin_sees_all)
{
        const msgpack_object *s;
        uint64_t id, deadline;
        Client *c;
        Reply rp;

        start(NULL);
        cr_assert(chmod(fd_.dir, 0755) == 0); /* nobody reaches the socket */
        c = fiberd_connect(&fd_);
        add_ok(c, "roots", &(Spec){.every_ms = 60000});
        fiberd_run_as(NOBODY, NOBODY, nobody_checks, NULL);

        /* root (an admin) sees both, and acts on nobody's with its uid */
        list(c, &rp);
        cr_assert_eq(rp.result->via.array.size, 2);
        s = find(rp.result, "mine");
        cr_assert(s && map_uint(s, "owner") == NOBODY);
        reply_clear(&rp);
        named(c, "schedule.pause", "mine", -1, &rp);
        cr_assert_str_eq(rp.st.code, "NOT_FOUND", "root has no schedule of that name itself");
        reply_clear(&rp);

        /* nobody's ticks submit as nobody */
        deadline = fiberd_now_ms() + WAIT_MS;
        while ((id = field(c, "mine", "last_job")) == UINT64_MAX) {
                cr_assert(fiberd_now_ms() < deadline, "nobody's schedule never fired");
                usleep(20000);
        }
        rpc_simple(c, "job.status", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_uint(rp.result, "owner"), NOBODY);
        reply_clear(&rp);
        named(c, "schedule.pause", "mine", NOBODY, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_get(rp.result, "paused")->via.boolean, true);
        reply_clear(&rp);
        named(c, "schedule.remove", "mine", NOBODY, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------ restarts ---------- */

Test(daemon_schedule, a_schedule_survives_kill_9_and_fires_again)
{
        uint64_t id, again;
        Client *c;
        int status;

        start(NULL);
        c = fiberd_connect(&fd_);
        add_ok(c, "durable", &(Spec){.every_ms = 1000, .missed = "run_once"});
        add_ok(c, "held", &(Spec){.cron = "0 3 * * *", .tz = "Europe/Berlin"});
        id = wait_new_job(c, "durable", 0);
        client_free(c);
        status = fiberd_signal_and_wait(&fd_, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        cr_assert(field(c, "durable", "last_job") >= id, "last_job went back");
        cr_assert_eq(field(c, "durable", "every_ms"), 1000);
        cr_assert_eq(field(c, "held", "every_ms"), UINT64_MAX, "a cron has every_ms nil");
        again = wait_new_job(c, "durable", field(c, "durable", "last_job"));
        cr_assert(again > id);
        client_free(c);
}

/*
 * Stops fiberd with @sig after schedule "gap" (every second, @missed) fired once, keeps it
 * down for two ticks or more, starts it again; *@ret_up_ms is the wall clock just before
 * the start.
 */
static void down_for_two_ticks(const char *missed, int sig, Client **ret_c, uint64_t *ret_up_ms)
{
        uint64_t deadline, down_ms;
        Client *c;

        start(NULL);
        c = fiberd_connect(&fd_);
        add_ok(c, "gap", &(Spec){.every_ms = 1000, .missed = missed});
        wait_new_job(c, "gap", 0);
        client_free(c);
        fiberd_signal_and_wait(&fd_, sig, 10000);
        down_ms = wall_ms();
        deadline = fiberd_now_ms() + 10000;
        while (wall_ms() < down_ms + 2200) {
                cr_assert(fiberd_now_ms() < deadline, "the wall clock does not move");
                usleep(20000);
        }
        *ret_up_ms = wall_ms();
        fiberd_restart(&fd_);
        *ret_c = fiberd_connect(&fd_);
}

Test(daemon_schedule, run_once_fires_a_tick_missed_while_down_at_the_start)
{
        uint64_t up_ms, deadline;
        Client *c;

        down_for_two_ticks("run_once", SIGTERM, &c, &up_ms);
        deadline = fiberd_now_ms() + WAIT_MS;
        while (!catchup_job(c, "gap", up_ms, up_ms)) {
                cr_assert(fiberd_now_ms() < deadline,
                          "no job for a tick missed while fiberd was down");
                usleep(20000);
        }
        cr_assert(fiberd_log_contains(&fd_, "passed while fiberd was down (missed = run_once)"));
        client_free(c);
}

Test(daemon_schedule, skip_drops_the_ticks_missed_while_down)
{
        uint64_t up_ms, id;
        Client *c;

        down_for_two_ticks("skip", SIGKILL, &c, &up_ms);
        /* the first tick after the start comes; nothing for the ticks before it */
        id = wait_new_job(c, "gap", field(c, "gap", "last_job"));
        cr_assert(field(c, "gap", "last_ms") >= up_ms, "the first job after the start is for "
                                                       "a tick before it");
        cr_assert(!catchup_job(c, "gap", up_ms, up_ms), "a missed tick was fired (job %llu)",
                  (unsigned long long)id);
        client_free(c);
}

Test(daemon_schedule, the_memory_store_keeps_no_schedule)
{
        Client *c;
        Reply rp;

        start("[store]\nbackend = memory\n");
        c = fiberd_connect(&fd_);
        add_ok(c, "fleeting", &(Spec){.every_ms = 60000});
        client_free(c);
        fiberd_signal_and_wait(&fd_, SIGTERM, 10000);
        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        list(c, &rp);
        cr_assert_eq(rp.result->via.array.size, 0);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------ cron -------------- */

Test(daemon_schedule, a_cron_schedule_ticks_at_the_next_minute_and_hour)
{
        uint64_t before, after, next, lo, hi;
        Client *c;
        Reply rp;

        start(NULL);
        c = fiberd_connect(&fd_);
        before = wall_ms();
        add(c, "minutely", &(Spec){.cron = "* * * * *"}, &rp);
        after = wall_ms();
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "cron"), "* * * * *");
        cr_assert_str_eq(map_str(rp.result, "tz"), "UTC");
        cr_assert_eq(map_get(rp.result, "every_ms")->type, MSGPACK_OBJECT_NIL);
        next = map_uint(rp.result, "next_ms");
        lo = (before / 60000 + 1) * 60000;
        hi = (after / 60000 + 1) * 60000;
        cr_assert(next == lo || next == hi, "next_ms %llu is not the next minute (%llu)",
                  (unsigned long long)next, (unsigned long long)lo);
        reply_clear(&rp);

        before = wall_ms();
        add(c, "hourly", &(Spec){.cron = "@hourly", .tz = "UTC"}, &rp);
        after = wall_ms();
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "cron"), "0 * * * *", "shortcuts are spelled out");
        next = map_uint(rp.result, "next_ms");
        lo = (before / 3600000 + 1) * 3600000;
        hi = (after / 3600000 + 1) * 3600000;
        cr_assert(next == lo || next == hi, "next_ms %llu is not the next hour",
                  (unsigned long long)next);
        reply_clear(&rp);

        /* a zone: the next 03:00 in Berlin is 01:00 or 02:00 UTC, less than a day ahead */
        add(c, "berlin", &(Spec){.cron = "0 3 * * *", .tz = "Europe/Berlin"}, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "tz"), "Europe/Berlin");
        next = map_uint(rp.result, "next_ms");
        cr_assert(next > wall_ms() && next <= wall_ms() + 86400000, "next_ms %llu",
                  (unsigned long long)next);
        cr_assert(next % 3600000 == 0 && (next / 3600000 % 24 == 1 || next / 3600000 % 24 == 2),
                  "03:00 in Berlin is not %llu", (unsigned long long)next);
        reply_clear(&rp);
        client_free(c);
}
