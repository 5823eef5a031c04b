/* SPDX-License-Identifier: MIT */
/*
 * client_fake.c — criterion tests of the client library and of fiberctl against a fake
 * fiberd: a thread in the test process that listens on a Unix socket in a temporary
 * directory and answers MessagePack-RPC requests from a tiny in-memory job table.
 * The real end-to-end tests (the daemon's) live elsewhere; these check the client side:
 * pipelining, out-of-order answers, output formats and exit codes.
 *
 * Fake jobs, by plugin name at submit (job.submit or job.run): "echo" is done at once
 * with its args as result; "fail" ends failed (NOT_FOUND "no such file"); "slow" is
 * running, and a job.wait on it is answered only after the next request has been
 * answered (so answers come out of order), as done; a job.run of it is answered at once
 * with the running record, as when job.run's wait limit passes, and the job is done then; "nope" is refused with
 * NOT_FOUND; "deny" with PERMISSION_DENIED. Job scheduling: "flaky" is retrying (its
 * second of three attempts, one error kept), "doomed" is dead (three attempts, three
 * errors); a job submitted with delay_ms or run_at is scheduled; a record carries the
 * run_at_ms, after, key and max_attempts it was submitted with. job.retry and
 * job.discard answer the ids given (every dead job's for {"all": true}); pause and
 * resume answer the class or plugin; schedule.add keeps the schedule its params make,
 * for schedule.list, .remove, .pause, .resume. Every method the fake is asked for is
 * logged (fake_methods()), and with its params as msgpack-c prints them
 * (fake_params(): `job.submit ["echo", {}, {"delay_ms"=>5400000}]`), so a test can check
 * which ones fiberctl used and what it packed.
 * Server modes: MODE_GARBAGE answers every request with bytes that are not msgpack;
 * MODE_CLOSE closes the connection on the first request; MODE_NOTICE sends the
 * "connection.error" notification (MESSAGE_TOO_LARGE) and closes; MODE_OLD is a fiberd
 * from before job.run (METHOD_NOT_FOUND for it), otherwise normal.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client/client.h"
#include "client/fiberd/client.h"
#include "ipc/ipc.h"

#ifndef FIBERCTL_PATH
#define FIBERCTL_PATH "build/fiberctl"
#endif

extern char **environ;

enum { MODE_NORMAL, MODE_GARBAGE, MODE_CLOSE, MODE_NOTICE, MODE_OLD };

typedef struct FakeJob {
        char plugin[32];
        const char *state;
        msgpack_sbuffer args; /* packed args map */
        bool fail;
        uint64_t run_at_ms;    /* options.run_at, or created + options.delay_ms; 0 = none */
        uint64_t max_attempts; /* options.max_attempts; 0 = not given */
        uint64_t after[8];     /* options.after */
        unsigned nafter;
        char key[160]; /* options.key; "" = none */
} FakeJob;

#define FAKE_MAX_JOBS 64
#define FAKE_MAX_SCHEDULES 8
#define FAKE_CREATED_MS 1763790000000ULL

/* A schedule.add, kept as its packed params [name, spec, plugin, args, options]. */
typedef struct FakeSchedule {
        bool used, paused;
        char name[72];
        msgpack_sbuffer params;
} FakeSchedule;

typedef struct Fake {
        char dir[64];
        char path[128];
        int listen_fd;
        int stop_pipe[2];
        int mode;
        pthread_t thread;
        FakeJob jobs[FAKE_MAX_JOBS + 1]; /* ids 1..njobs */
        unsigned njobs;
        FakeSchedule schedules[FAKE_MAX_SCHEDULES];
        pthread_mutex_t log_lock;
        char log[4096];     /* the methods asked for, one per line, in order */
        char params[16384]; /* the same, each with its params: "method [params]" */
} Fake;

static Fake fake;

/* ---------------------------------------------------------------- the fake server */

static bool state_is(const FakeJob *j, const char *state)
{
        return strcmp(j->state, state) == 0;
}

/* A job's errors (PROTOCOL.md, "Scheduling jobs"): one per failed run. */
static void pack_errors(msgpack_packer *pk, unsigned n)
{
        msgpack_pack_array(pk, n);
        for (unsigned i = 0; i < n; i++) {
                msgpack_pack_map(pk, 4);
                ipc_pack_kv_uint(pk, "attempt", i);
                ipc_pack_kv_cstr(pk, "code", IPC_INTERNAL);
                ipc_pack_kv_cstr(pk, "message", "boom");
                ipc_pack_kv_uint(pk, "finished_ms", FAKE_CREATED_MS + 1000 * (i + 1));
        }
}

static void pack_record(msgpack_packer *pk, unsigned id)
{
        FakeJob *j = &fake.jobs[id];
        bool final = state_is(j, "done") || state_is(j, "failed") || state_is(j, "cancelled") ||
                     state_is(j, "dead");
        bool retried = state_is(j, "retrying") || state_is(j, "dead");
        msgpack_pack_map(pk, 19);
        ipc_pack_kv_uint(pk, "id", id);
        ipc_pack_kv_cstr(pk, "plugin", j->plugin);
        ipc_pack_kv_uint(pk, "owner", 1000);
        ipc_pack_kv_cstr(pk, "state", j->state);
        ipc_pack_kv_int(pk, "priority", 0);
        ipc_pack_kv_uint(pk, "timeout_ms", 0);
        ipc_pack_kv_uint(pk, "created_ms", FAKE_CREATED_MS);
        if (state_is(j, "scheduled"))
                ipc_pack_kv_nil(pk, "started_ms");
        else
                ipc_pack_kv_uint(pk, "started_ms", FAKE_CREATED_MS + 2);
        if (final)
                ipc_pack_kv_uint(pk, "finished_ms", FAKE_CREATED_MS + 67);
        else
                ipc_pack_kv_nil(pk, "finished_ms");
        ipc_pack_cstr(pk, "progress");
        msgpack_pack_map(pk, 2);
        ipc_pack_kv_uint(pk, "done", 4);
        ipc_pack_kv_uint(pk, "total", 8);
        ipc_pack_cstr(pk, "result");
        if (strcmp(j->state, "done") == 0) {
                msgpack_object o;
                msgpack_zone z;
                size_t off = 0;
                msgpack_zone_init(&z, 1024);
                msgpack_unpack(j->args.data, j->args.size, &off, &z, &o);
                msgpack_pack_object(pk, o);
                msgpack_zone_destroy(&z);
        } else {
                msgpack_pack_nil(pk);
        }
        ipc_pack_cstr(pk, "error");
        if (strcmp(j->state, "failed") == 0)
                ipc_pack_error_map(pk, IPC_NOT_FOUND, "no such file: /nonexistent");
        else if (strcmp(j->state, "cancelled") == 0)
                ipc_pack_error_map(pk, IPC_CANCELLED, "cancelled by uid 1000");
        else if (state_is(j, "dead"))
                ipc_pack_error_map(pk, IPC_INTERNAL, "boom");
        else
                msgpack_pack_nil(pk);
        /* job scheduling */
        ipc_pack_kv_uint(pk, "attempt", state_is(j, "dead") ? 2 : retried ? 1 : 0);
        ipc_pack_kv_uint(pk, "max_attempts", retried ? 3 : j->max_attempts ? j->max_attempts : 1);
        if (state_is(j, "retrying")) /* a minute after now: "due in 1m..." */
                ipc_pack_kv_uint(pk, "next_attempt_ms", (uint64_t)time(NULL) * 1000 + 61000);
        else
                ipc_pack_kv_nil(pk, "next_attempt_ms");
        if (j->run_at_ms)
                ipc_pack_kv_uint(pk, "run_at_ms", j->run_at_ms);
        else
                ipc_pack_kv_nil(pk, "run_at_ms");
        ipc_pack_cstr(pk, "after");
        msgpack_pack_array(pk, j->nafter);
        for (unsigned i = 0; i < j->nafter; i++)
                msgpack_pack_uint64(pk, j->after[i]);
        if (j->key[0])
                ipc_pack_kv_cstr(pk, "key", j->key);
        else
                ipc_pack_kv_nil(pk, "key");
        ipc_pack_cstr(pk, "errors");
        pack_errors(pk, state_is(j, "dead") ? 3 : retried ? 1 : 0);
}

/* The job id in params[0]; packs NOT_FOUND and returns 0 when there is none. */
static unsigned job_param(msgpack_packer *pk, const IpcMessage *m)
{
        uint64_t id;
        IpcStatus st;
        if (ipc_read_uint(ipc_array_at(&m->params, 0), "job id", &id, &st) < 0) {
                ipc_pack_status_response(pk, m->msgid, &st);
                return 0;
        }
        if (id == 0 || id > fake.njobs) {
                ipc_pack_error_response(pk, m->msgid, IPC_NOT_FOUND,
                                        "no job %lu (finished jobs are kept for 10 minutes)",
                                        (unsigned long)id);
                return 0;
        }
        return (unsigned)id;
}

/* What the fake keeps of a submission's options: the scheduling ones. */
static void fake_take_options(FakeJob *j, const msgpack_object *opts)
{
        uint64_t delay = 0, run_at = 0;
        const msgpack_object *after = ipc_map_find(opts, "after");

        ipc_read_uint(ipc_map_find(opts, "delay_ms"), "delay_ms", &delay, NULL);
        ipc_read_uint(ipc_map_find(opts, "run_at"), "run_at", &run_at, NULL);
        ipc_read_uint(ipc_map_find(opts, "max_attempts"), "max_attempts", &j->max_attempts, NULL);
        ipc_read_str(ipc_map_find(opts, "key"), "key", j->key, sizeof(j->key), NULL);
        j->run_at_ms = run_at ? run_at : delay ? FAKE_CREATED_MS + delay : 0;
        if (j->run_at_ms && state_is(j, "done"))
                j->state = "scheduled";
        for (uint32_t i = 0; after && after->type == MSGPACK_OBJECT_ARRAY &&
                             i < after->via.array.size && j->nafter < 8;
             i++)
                ipc_read_uint(&after->via.array.ptr[i], "after", &j->after[j->nafter++], NULL);
}

/* Accepts the job of params [plugin, args, ...]: its id, or 0 with the refusal packed. */
static unsigned fake_accept(msgpack_packer *pk, const IpcMessage *m)
{
        char plugin[32];
        IpcStatus st;
        if (ipc_read_str(ipc_array_at(&m->params, 0), "plugin", plugin, sizeof(plugin), &st) < 0) {
                ipc_pack_status_response(pk, m->msgid, &st);
                return 0;
        }
        if (strcmp(plugin, "nope") == 0) {
                ipc_pack_error_response(pk, m->msgid, IPC_NOT_FOUND,
                                        "no plugin named \"nope\" (loaded: echo, fail, slow)");
                return 0;
        }
        if (strcmp(plugin, "deny") == 0) {
                ipc_pack_error_response(pk, m->msgid, IPC_PERMISSION_DENIED, "not for you");
                return 0;
        }
        if (strncmp(plugin, "code:", 5) == 0) { /* "code:OVERLOADED": answer that code */
                ipc_pack_error_response(pk, m->msgid, plugin + 5, "the fake says %s", plugin + 5);
                return 0;
        }
        cr_assert_lt(fake.njobs, FAKE_MAX_JOBS);
        unsigned id = ++fake.njobs;
        FakeJob *j = &fake.jobs[id];
        snprintf(j->plugin, sizeof(j->plugin), "%s", plugin);
        j->state = strcmp(plugin, "fail") == 0     ? "failed"
                   : strcmp(plugin, "slow") == 0   ? "running"
                   : strcmp(plugin, "flaky") == 0  ? "retrying"
                   : strcmp(plugin, "doomed") == 0 ? "dead"
                                                   : "done";
        fake_take_options(j, ipc_array_at(&m->params, 2));
        msgpack_sbuffer_init(&j->args);
        msgpack_packer apk;
        msgpack_packer_init(&apk, &j->args, msgpack_sbuffer_write);
        const msgpack_object *args = ipc_array_at(&m->params, 1);
        if (args && args->type == MSGPACK_OBJECT_MAP)
                msgpack_pack_object(&apk, *args);
        else
                msgpack_pack_map(&apk, 0);
        return id;
}

static void fake_submit(msgpack_packer *pk, const IpcMessage *m)
{
        unsigned id = fake_accept(pk, m);
        if (id) {
                ipc_pack_response_begin(pk, m->msgid);
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_uint(pk, "id", id);
        }
}

/* The methods the fake was asked for since it started, one per line. */
static const char *fake_methods(void)
{
        static char copy[sizeof(fake.log)];
        pthread_mutex_lock(&fake.log_lock);
        memcpy(copy, fake.log, sizeof(copy));
        pthread_mutex_unlock(&fake.log_lock);
        return copy;
}

/* The methods asked for since the last fake_methods_clear(), each with its params. */
static const char *fake_params(void)
{
        static char copy[sizeof(fake.params)];
        pthread_mutex_lock(&fake.log_lock);
        memcpy(copy, fake.params, sizeof(copy));
        pthread_mutex_unlock(&fake.log_lock);
        return copy;
}

/* Forgets the methods logged so far. */
static void fake_methods_clear(void)
{
        pthread_mutex_lock(&fake.log_lock);
        fake.log[0] = '\0';
        fake.params[0] = '\0';
        pthread_mutex_unlock(&fake.log_lock);
}

/* ---- the scheduling methods: job.retry, job.discard, pause, resume, schedule.* */

/* job.retry and job.discard: [[ids]] or [{"all": true}]; the answer {@key: ids}. An id
 * unknown answers NOT_FOUND, one running FAILED_PRECONDITION, and nothing is done. */
static void fake_retry_or_discard(msgpack_packer *pk, const IpcMessage *m, const char *key)
{
        const msgpack_object *p = ipc_array_at(&m->params, 0);
        uint64_t ids[FAKE_MAX_JOBS];
        unsigned n = 0;

        if (p && p->type == MSGPACK_OBJECT_MAP) {
                for (unsigned i = 1; i <= fake.njobs; i++)
                        if (state_is(&fake.jobs[i], "dead"))
                                ids[n++] = i;
        } else if (p && p->type == MSGPACK_OBJECT_ARRAY) {
                for (uint32_t i = 0; i < p->via.array.size && n < FAKE_MAX_JOBS; i++) {
                        uint64_t id = 0;
                        ipc_read_uint(&p->via.array.ptr[i], "id", &id, NULL);
                        if (id == 0 || id > fake.njobs) {
                                ipc_pack_error_response(pk, m->msgid, IPC_NOT_FOUND, "no job %lu",
                                                        (unsigned long)id);
                                return;
                        }
                        if (state_is(&fake.jobs[id], "running")) {
                                ipc_pack_error_response(pk, m->msgid, IPC_FAILED_PRECONDITION,
                                                        "job %lu is running, not final",
                                                        (unsigned long)id);
                                return;
                        }
                        ids[n++] = id;
                }
        } else {
                ipc_pack_error_response(pk, m->msgid, IPC_INVALID_ARGUMENT,
                                        "expected [ids] or [{\"all\": true}]");
                return;
        }
        ipc_pack_response_begin(pk, m->msgid);
        msgpack_pack_map(pk, 1);
        ipc_pack_cstr(pk, key);
        msgpack_pack_array(pk, n);
        for (unsigned i = 0; i < n; i++)
                msgpack_pack_uint64(pk, ids[i]);
}

static void fake_pause(msgpack_packer *pk, const IpcMessage *m, bool paused)
{
        char kind[16] = "", name[64] = "";

        ipc_read_str(ipc_array_at(&m->params, 0), "kind", kind, sizeof(kind), NULL);
        ipc_read_str(ipc_array_at(&m->params, 1), "name", name, sizeof(name), NULL);
        if (strcmp(kind, "class") != 0 && strcmp(kind, "plugin") != 0) {
                ipc_pack_error_response(pk, m->msgid, IPC_INVALID_ARGUMENT,
                                        "kind must be class or plugin");
                return;
        }
        ipc_pack_response_begin(pk, m->msgid);
        msgpack_pack_map(pk, 4);
        ipc_pack_kv_cstr(pk, "kind", kind);
        ipc_pack_kv_cstr(pk, "name", name);
        ipc_pack_kv_bool(pk, "paused", paused);
        ipc_pack_kv_uint(pk, "queued", 2);
}

/* A schedule as the protocol shows it, from its schedule.add params. */
static void pack_schedule(msgpack_packer *pk, const FakeSchedule *sc)
{
        msgpack_zone z;
        msgpack_object p;
        size_t off = 0;

        msgpack_zone_init(&z, 1024);
        msgpack_unpack(sc->params.data, sc->params.size, &off, &z, &p);
        const msgpack_object *spec = ipc_array_at(&p, 1);
        const msgpack_object *cron = ipc_map_find(spec, "cron"), *tz = ipc_map_find(spec, "tz");
        const msgpack_object *every = ipc_map_find(spec, "every_ms");
        const msgpack_object *missed = ipc_map_find(spec, "missed");
        msgpack_pack_map(pk, 13);
        ipc_pack_kv_cstr(pk, "name", sc->name);
        ipc_pack_kv_uint(pk, "owner", 1000);
        ipc_pack_cstr(pk, "cron");
        cron ? msgpack_pack_object(pk, *cron) : msgpack_pack_nil(pk);
        ipc_pack_cstr(pk, "tz");
        tz ? msgpack_pack_object(pk, *tz) : cron ? ipc_pack_cstr(pk, "UTC") : msgpack_pack_nil(pk);
        ipc_pack_cstr(pk, "every_ms");
        every ? msgpack_pack_object(pk, *every) : msgpack_pack_nil(pk);
        ipc_pack_cstr(pk, "missed");
        missed ? msgpack_pack_object(pk, *missed) : ipc_pack_cstr(pk, "skip");
        ipc_pack_cstr(pk, "plugin");
        msgpack_pack_object(pk, *ipc_array_at(&p, 2));
        ipc_pack_cstr(pk, "args");
        msgpack_pack_object(pk, *ipc_array_at(&p, 3));
        ipc_pack_cstr(pk, "options");
        msgpack_pack_object(pk, *ipc_array_at(&p, 4));
        ipc_pack_kv_bool(pk, "paused", sc->paused);
        ipc_pack_kv_uint(pk, "next_ms", 1796094000000ULL);
        ipc_pack_kv_nil(pk, "last_ms");
        ipc_pack_kv_nil(pk, "last_job");
        msgpack_zone_destroy(&z);
}

static void fake_schedule(msgpack_packer *pk, const IpcMessage *m)
{
        const char *what = m->method + strlen("schedule.");
        char name[72] = "";
        FakeSchedule *sc = NULL;

        if (strcmp(what, "list") == 0) {
                unsigned n = 0;
                for (int i = 0; i < FAKE_MAX_SCHEDULES; i++)
                        n += fake.schedules[i].used;
                ipc_pack_response_begin(pk, m->msgid);
                msgpack_pack_array(pk, n);
                for (int i = 0; i < FAKE_MAX_SCHEDULES; i++)
                        if (fake.schedules[i].used)
                                pack_schedule(pk, &fake.schedules[i]);
                return;
        }
        ipc_read_str(ipc_array_at(&m->params, 0), "name", name, sizeof(name), NULL);
        for (int i = 0; i < FAKE_MAX_SCHEDULES && !sc; i++)
                if (fake.schedules[i].used && strcmp(fake.schedules[i].name, name) == 0)
                        sc = &fake.schedules[i];
        if (strcmp(what, "add") == 0) {
                if (sc) {
                        ipc_pack_error_response(pk, m->msgid, IPC_ALREADY_EXISTS,
                                                "schedule %s exists", name);
                        return;
                }
                for (int i = 0; i < FAKE_MAX_SCHEDULES && !sc; i++)
                        if (!fake.schedules[i].used)
                                sc = &fake.schedules[i];
                cr_assert_not_null(sc);
                sc->used = true;
                snprintf(sc->name, sizeof(sc->name), "%s", name);
                msgpack_sbuffer_init(&sc->params);
                msgpack_packer spk;
                msgpack_packer_init(&spk, &sc->params, msgpack_sbuffer_write);
                msgpack_pack_object(&spk, m->params);
        } else if (!sc) {
                ipc_pack_error_response(pk, m->msgid, IPC_NOT_FOUND, "no schedule %s of yours",
                                        name);
                return;
        }
        sc->paused = strcmp(what, "pause") == 0 || (sc->paused && strcmp(what, "resume") != 0);
        ipc_pack_response_begin(pk, m->msgid);
        pack_schedule(pk, sc);
        if (strcmp(what, "remove") == 0) {
                msgpack_sbuffer_destroy(&sc->params);
                memset(sc, 0, sizeof(*sc));
        }
}

typedef struct Deferred {
        uint32_t msgid;
        unsigned id;
        bool used;
} Deferred;

/* Answers one request into @pk; a job.wait on a running job goes to @later instead. */
static void fake_answer(msgpack_packer *pk, const IpcMessage *m, Deferred *later)
{
        unsigned id;
        const char *meth = m->method;

        pthread_mutex_lock(&fake.log_lock);
        size_t used = strlen(fake.log);
        snprintf(fake.log + used, sizeof(fake.log) - used, "%s\n", meth);
        used = strlen(fake.params);
        if (used + 2 < sizeof(fake.params)) {
                snprintf(fake.params + used, sizeof(fake.params) - used, "%s ", meth);
                used = strlen(fake.params);
                msgpack_object_print_buffer(fake.params + used, sizeof(fake.params) - used - 1,
                                            m->params);
                used = strlen(fake.params);
                snprintf(fake.params + used, sizeof(fake.params) - used, "\n");
        }
        pthread_mutex_unlock(&fake.log_lock);
        if (strcmp(meth, "ping") == 0) {
                ipc_pack_response_begin(pk, m->msgid);
                msgpack_pack_map(pk, 4);
                ipc_pack_kv_cstr(pk, "version", "fake");
                ipc_pack_kv_uint(pk, "pid", (uint64_t)getpid());
                ipc_pack_kv_uint(pk, "uptime_ms", 1500);
                ipc_pack_cstr(pk, "echo");
                msgpack_pack_object(pk, m->params);
        } else if (strcmp(meth, "plugins.list") == 0) {
                ipc_pack_response_begin(pk, m->msgid);
                msgpack_pack_map(pk, 2);
                ipc_pack_cstr(pk, "plugins");
                msgpack_pack_array(pk, 1);
                msgpack_pack_map(pk, 4);
                ipc_pack_kv_cstr(pk, "name", "echo");
                ipc_pack_kv_cstr(pk, "version", "1.0.0");
                ipc_pack_kv_cstr(pk, "description", "returns its args");
                ipc_pack_kv_cstr(pk, "path", "/x/echo.so");
                ipc_pack_cstr(pk, "refused");
                msgpack_pack_array(pk, 1);
                msgpack_pack_map(pk, 2);
                ipc_pack_kv_cstr(pk, "path", "/x/old.so");
                ipc_pack_kv_cstr(pk, "reason", "ABI version 1, this fiberd needs 2");
        } else if (strcmp(meth, "job.submit") == 0) {
                fake_submit(pk, m);
        } else if (strcmp(meth, "job.run") == 0 && fake.mode != MODE_OLD) {
                if ((id = fake_accept(pk, m))) { /* "slow": the wait ends first, then the job */
                        ipc_pack_response_begin(pk, m->msgid);
                        pack_record(pk, id);
                        if (strcmp(fake.jobs[id].state, "running") == 0)
                                fake.jobs[id].state = "done";
                }
        } else if (strcmp(meth, "job.status") == 0) {
                if ((id = job_param(pk, m))) {
                        ipc_pack_response_begin(pk, m->msgid);
                        pack_record(pk, id);
                }
        } else if (strcmp(meth, "job.wait") == 0) {
                if ((id = job_param(pk, m))) {
                        if (strcmp(fake.jobs[id].state, "running") == 0 && !later->used) {
                                *later = (Deferred){.msgid = m->msgid, .id = id, .used = true};
                                return;
                        }
                        ipc_pack_response_begin(pk, m->msgid);
                        pack_record(pk, id);
                }
        } else if (strcmp(meth, "job.result") == 0) {
                if ((id = job_param(pk, m))) {
                        FakeJob *j = &fake.jobs[id];
                        if (strcmp(j->state, "failed") == 0) {
                                ipc_pack_error_response(pk, m->msgid, IPC_NOT_FOUND,
                                                        "no such file: /nonexistent");
                        } else if (strcmp(j->state, "running") == 0) {
                                ipc_pack_error_response(pk, m->msgid, IPC_FAILED_PRECONDITION,
                                                        "job %u is running; use job.wait", id);
                        } else {
                                msgpack_object o;
                                msgpack_zone z;
                                size_t off = 0;
                                msgpack_zone_init(&z, 1024);
                                msgpack_unpack(j->args.data, j->args.size, &off, &z, &o);
                                ipc_pack_response_begin(pk, m->msgid);
                                msgpack_pack_object(pk, o);
                                msgpack_zone_destroy(&z);
                        }
                }
        } else if (strcmp(meth, "job.cancel") == 0) {
                if ((id = job_param(pk, m))) {
                        if (strcmp(fake.jobs[id].state, "running") == 0)
                                fake.jobs[id].state = "cancelled";
                        ipc_pack_response_begin(pk, m->msgid);
                        pack_record(pk, id);
                }
        } else if (strcmp(meth, "job.list") == 0) {
                char state[16] = "";
                const msgpack_object *f = ipc_array_at(&m->params, 0);
                ipc_read_str(ipc_map_find(f, "state"), "state", state, sizeof(state), NULL);
                unsigned n = 0;
                for (unsigned i = 1; i <= fake.njobs; i++)
                        n += !state[0] || strcmp(state, fake.jobs[i].state) == 0;
                ipc_pack_response_begin(pk, m->msgid);
                msgpack_pack_array(pk, n);
                for (unsigned i = 1; i <= fake.njobs; i++)
                        if (!state[0] || strcmp(state, fake.jobs[i].state) == 0)
                                pack_record(pk, i);
        } else if (strcmp(meth, "stats") == 0) {
                ipc_pack_response_begin(pk, m->msgid);
                msgpack_pack_map(pk, 4);
                ipc_pack_kv_uint(pk, "uptime_ms", 1500);
                ipc_pack_cstr(pk, "jobs");
                msgpack_pack_map(pk, 2);
                ipc_pack_kv_uint(pk, "submitted", 3);
                ipc_pack_kv_uint(pk, "done", 2);
                ipc_pack_cstr(pk, "plugins");
                msgpack_pack_map(pk, 0);
                ipc_pack_cstr(pk, "groups");
                msgpack_pack_array(pk, 1);
                msgpack_pack_map(pk, 2);
                ipc_pack_kv_cstr(pk, "name", "fiberd");
                ipc_pack_kv_uint(pk, "workers", 2);
        } else if (strcmp(meth, "job.retry") == 0 && fake.mode != MODE_OLD) {
                fake_retry_or_discard(pk, m, "retried");
        } else if (strcmp(meth, "job.discard") == 0 && fake.mode != MODE_OLD) {
                fake_retry_or_discard(pk, m, "discarded");
        } else if ((strcmp(meth, "pause") == 0 || strcmp(meth, "resume") == 0) &&
                   fake.mode != MODE_OLD) {
                fake_pause(pk, m, strcmp(meth, "pause") == 0);
        } else if (strncmp(meth, "schedule.", 9) == 0 && fake.mode != MODE_OLD) {
                fake_schedule(pk, m);
        } else {
                ipc_pack_error_response(pk, m->msgid, IPC_METHOD_NOT_FOUND, "no method \"%s\"",
                                        meth);
        }
}

static bool write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                p += w;
                n -= (size_t)w;
        }
        return true;
}

static void fake_serve(int fd)
{
        IpcDecoder *d;
        msgpack_sbuffer out;
        msgpack_packer pk;
        Deferred later = {0};
        char buf[4096];

        cr_assert_eq(ipc_decoder_new(&d, 0), 0);
        msgpack_sbuffer_init(&out);
        msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                ipc_decoder_feed(d, buf, (size_t)n);
                IpcMessage m;
                int r;
                while ((r = ipc_decoder_next(d, &m)) == 1) {
                        if (fake.mode == MODE_NOTICE) {
                                ipc_pack_notification_begin(&pk, "connection.error", 1);
                                ipc_pack_error_map(&pk, IPC_MESSAGE_TOO_LARGE,
                                                   "message of at least 2000000 bytes exceeds "
                                                   "the limit of 1048576 bytes");
                                write_all(fd, out.data, out.size);
                                ipc_message_clear(&m);
                                goto out;
                        }
                        if (fake.mode == MODE_CLOSE) {
                                ipc_message_clear(&m);
                                goto out;
                        }
                        if (fake.mode == MODE_GARBAGE) {
                                write_all(fd, "\xc1\xc1\xc1", 3);
                                ipc_message_clear(&m);
                                continue;
                        }
                        bool had_later = later.used;
                        if (m.type == IPC_REQUEST)
                                fake_answer(&pk, &m, &later);
                        ipc_message_clear(&m);
                        if (had_later && later.used) { /* answered one more: now the wait */
                                fake.jobs[later.id].state = "done";
                                ipc_pack_response_begin(&pk, later.msgid);
                                pack_record(&pk, later.id);
                                later.used = false;
                        }
                        if (!write_all(fd, out.data, out.size))
                                goto out;
                        msgpack_sbuffer_clear(&out);
                }
                if (r < 0)
                        break;
        }
out:
        msgpack_sbuffer_destroy(&out);
        ipc_decoder_free(d);
}

static void *fake_main(void *arg)
{
        for (;;) {
                struct pollfd p[2] = {{.fd = fake.listen_fd, .events = POLLIN},
                                      {.fd = fake.stop_pipe[0], .events = POLLIN}};
                if (poll(p, 2, -1) < 0)
                        continue;
                if (p[1].revents)
                        return NULL;
                int fd = accept(fake.listen_fd, NULL, NULL);
                if (fd < 0)
                        continue;
                fake_serve(fd);
                close(fd);
        }
}

static void fake_start(int mode)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        signal(SIGPIPE, SIG_IGN);
        memset(&fake, 0, sizeof(fake));
        pthread_mutex_init(&fake.log_lock, NULL);
        fake.mode = mode;
        strcpy(fake.dir, "/tmp/fiberctl-test-XXXXXX");
        cr_assert_not_null(mkdtemp(fake.dir));
        snprintf(fake.path, sizeof(fake.path), "%s/fiberd.sock", fake.dir);
        strcpy(sa.sun_path, fake.path);
        fake.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fake.listen_fd, 0);
        cr_assert_eq(bind(fake.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(fake.listen_fd, 16), 0);
        cr_assert_eq(pipe2(fake.stop_pipe, O_CLOEXEC), 0);
        cr_assert_eq(pthread_create(&fake.thread, NULL, fake_main, NULL), 0);
        setenv("FIBERD_SOCKET", fake.path, 1);
}

static void fake_stop(void)
{
        cr_assert_eq(write(fake.stop_pipe[1], "x", 1), 1);
        pthread_join(fake.thread, NULL);
        close(fake.listen_fd);
        close(fake.stop_pipe[0]);
        close(fake.stop_pipe[1]);
        unlink(fake.path);
        rmdir(fake.dir);
}

static void setup_normal(void)
{
        fake_start(MODE_NORMAL);
}

/* ---------------------------------------------------------------- running fiberctl */

typedef struct Run {
        int status; /* exit code */
        char out[16384];
        char err[4096];
} Run;

static void read_file(const char *path, char *buf, size_t size)
{
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = '\0';
        fclose(f);
}

/* Runs fiberctl with @argv (NULL-terminated, without argv[0]) and @input on stdin. */
static void run(Run *r, const char *input, const char *const *args)
{
        char out_path[128], err_path[128], in_path[128];
        const char *argv[32] = {FIBERCTL_PATH};
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int st, i;

        for (i = 0; args[i]; i++)
                argv[i + 1] = args[i];
        argv[i + 1] = NULL;
        snprintf(out_path, sizeof(out_path), "%s/out", fake.dir);
        snprintf(err_path, sizeof(err_path), "%s/err", fake.dir);
        snprintf(in_path, sizeof(in_path), "%s/in", fake.dir);
        FILE *f = fopen(in_path, "w");
        cr_assert_not_null(f);
        fputs(input ? input : "", f);
        fclose(f);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        cr_assert_eq(posix_spawn(&pid, FIBERCTL_PATH, &fa, NULL, (char *const *)argv, environ), 0,
                     "cannot run %s; build it first", FIBERCTL_PATH);
        posix_spawn_file_actions_destroy(&fa);
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st), "fiberctl died with signal %d", WTERMSIG(st));
        r->status = WEXITSTATUS(st);
        read_file(out_path, r->out, sizeof(r->out));
        read_file(err_path, r->err, sizeof(r->err));
        unlink(out_path);
        unlink(err_path);
        unlink(in_path);
}

#define RUN(r, input, ...) run((r), (input), (const char *const[]){__VA_ARGS__, NULL})

static void assert_contains(const char *hay, const char *needle)
{
        cr_assert_not_null(strstr(hay, needle), "expected \"%s\" in:\n%s", needle, hay);
}

/* ---------------------------------------------------------------- client library */

Test(client, pipelined_requests_answered_out_of_order, .init = setup_normal, .fini = fake_stop)
{
        Client *c;
        IpcStatus st;
        IpcMessage m;
        uint32_t submit_id, wait_id, ping_id;
        const msgpack_object *res;
        uint64_t id;

        cr_assert_eq(client_connect(&c, NULL, &st), 0, "%s", st.message);
        cr_assert_str_eq(client_path(c), fake.path);
        msgpack_packer *pk = client_request(c, "job.submit", 3, &submit_id);
        ipc_pack_cstr(pk, "slow");
        msgpack_pack_map(pk, 0);
        msgpack_pack_map(pk, 0);
        cr_assert_eq(client_call_wait(c, submit_id, &m, 5000, &st), 1, "%s", st.message);
        cr_assert_eq(client_result(&m, &res, &st), 0);
        cr_assert_eq(ipc_read_uint(ipc_map_find(res, "id"), "id", &id, NULL), 0);
        ipc_message_clear(&m);

        pk = client_request(c, "job.wait", 1, &wait_id);
        msgpack_pack_uint64(pk, id);
        pk = client_request(c, "ping", 0, &ping_id);
        cr_assert_neq(wait_id, ping_id);
        cr_assert_gt(client_pending_output(c), 0);
        cr_assert_eq(client_flush(c, 5000, &st), 0);
        cr_assert_eq(client_pending_output(c), 0);

        /* the wait is answered after the ping: waiting for it keeps the ping answer */
        cr_assert_eq(client_call_wait(c, wait_id, &m, 5000, &st), 1, "%s", st.message);
        cr_assert_eq(m.msgid, wait_id);
        cr_assert_eq(client_result(&m, &res, &st), 0);
        cr_assert(ipc_object_streq(ipc_map_find(res, "state"), "done"));
        ipc_message_clear(&m);
        cr_assert_eq(client_receive(c, &m, 5000, &st), 1);
        cr_assert_eq(m.msgid, ping_id, "the kept answer comes next");
        ipc_message_clear(&m);
        cr_assert_eq(client_receive(c, &m, 0, &st), -ETIMEDOUT, "nothing else");
        client_free(c);
}

Test(client, server_error_becomes_status, .init = setup_normal, .fini = fake_stop)
{
        Client *c;
        IpcStatus st;
        IpcMessage m;
        uint32_t msgid;
        const msgpack_object *res;

        cr_assert_eq(client_connect(&c, fake.path, &st), 0);
        msgpack_pack_uint64(client_request(c, "job.status", 1, &msgid), 99);
        cr_assert_eq(client_call_wait(c, msgid, &m, 5000, &st), 1);
        cr_assert_eq(client_result(&m, &res, &st), -ENOENT);
        cr_assert_str_eq(st.code, IPC_NOT_FOUND);
        assert_contains(st.message, "no job 99");
        ipc_message_clear(&m);
        client_free(c);
}

/* More requests than the socket buffers hold, answered as they are read: client_flush
 * must read answers while it writes, or both sides block on write. */
Test(client, deep_pipeline_does_not_deadlock, .init = setup_normal, .fini = fake_stop)
{
        Client *c;
        IpcStatus st;
        char pad[256];
        enum { N = 6000 };

        memset(pad, 'p', sizeof(pad));
        cr_assert_eq(client_connect(&c, NULL, &st), 0);
        for (int i = 0; i < N; i++) {
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "ping", 1, &msgid);
                cr_assert_eq(ipc_pack_strn(pk, pad, sizeof(pad)), 0);
        }
        cr_assert_gt(client_pending_output(c), (size_t)N * sizeof(pad));
        cr_assert_eq(client_flush(c, 20000, &st), 0, "%s", st.message);
        for (int i = 0; i < N; i++) {
                IpcMessage m;
                cr_assert_eq(client_receive(c, &m, 20000, &st), 1, "answer %d: %s", i, st.message);
                cr_assert_eq(m.msgid, (uint32_t)i + 1);
                ipc_message_clear(&m);
        }
        client_free(c);
}

Test(client, connect_failure_names_the_fix)
{
        Client *c = NULL;
        IpcStatus st;

        cr_assert_eq(client_connect(&c, "/nonexistent/dir/fiberd.sock", &st), -ENOENT);
        cr_assert_null(c);
        assert_contains(st.message, "cannot connect to /nonexistent/dir/fiberd.sock");
        assert_contains(st.message, "is fiberd running?");
}

Test(client, default_socket_follows_the_environment)
{
        char buf[128];

        setenv("FIBERD_SOCKET", "/tmp/x.sock", 1);
        cr_assert_eq(client_default_socket(buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/tmp/x.sock");
        unsetenv("FIBERD_SOCKET");
        /* the system socket for everyone: a per-user one is asked for (fiberctl --user) */
        setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
        cr_assert_eq(client_default_socket(buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/run/fiberd.sock");
        cr_assert_eq(client_default_socket(buf, 4), -ENAMETOOLONG);
}

/* ---------------------------------------------------------------- fiberctl */

Test(fiberctl, ping_and_plugins, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "ping");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "fiberd fake (pid");
        RUN(&r, NULL, "--json", "ping");
        cr_assert_eq(r.status, 0);
        assert_contains(r.out, "\"version\":\"fake\"");
        RUN(&r, NULL, "plugins");
        cr_assert_eq(r.status, 0);
        assert_contains(r.out, "echo");
        assert_contains(r.out, "/x/old.so: ABI version 1");
}

Test(fiberctl, submit_types_values_and_waits, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "submit", "echo", "n=42", "f=1.5", "b=true", "s=hello", "q='7'", "neg=-3");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, "1\n");
        RUN(&r, NULL, "--json", "result", "1");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "\"n\":42");
        assert_contains(r.out, "\"f\":1.5");
        assert_contains(r.out, "\"b\":true");
        assert_contains(r.out, "\"s\":\"hello\"");
        assert_contains(r.out, "\"q\":\"7\"");
        assert_contains(r.out, "\"neg\":-3");

        RUN(&r, NULL, "--json", "submit", "--wait", "echo", "x=1", "--priority", "-2", "--timeout",
            "10s");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "\"state\":\"done\"");
        RUN(&r, NULL, "submit", "fail", "--wait");
        cr_assert_eq(r.status, 1, "a failed job makes submit --wait exit 1");
        assert_contains(r.out, "NOT_FOUND: no such file");
}

Test(fiberctl, exit_codes_for_server_errors, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "submit", "nope");
        cr_assert_eq(r.status, 66, "%s", r.err);
        assert_contains(r.err, "no plugin named \"nope\"");
        RUN(&r, NULL, "submit", "deny");
        cr_assert_eq(r.status, 77);
        RUN(&r, NULL, "status", "12345");
        cr_assert_eq(r.status, 66);
        assert_contains(r.err, "fiberctl: no job 12345 (finished"); /* said once */
        RUN(&r, NULL, "submit", "slow");
        cr_assert_eq(r.status, 0);
        RUN(&r, NULL, "result", "1");
        cr_assert_eq(r.status, 75, "still running: try again later");
        RUN(&r, NULL, "submit", "fail");
        RUN(&r, NULL, "result", "2");
        cr_assert_eq(r.status, 1, "%s", r.err);
        assert_contains(r.err, "job 2 failed: no such file");
}

Test(fiberctl, exit_status_of_every_error_code_is_the_protocol_tables, .init = setup_normal,
     .fini = fake_stop)
{
        Run r;

        for (size_t i = 0; i < ipc_protocol_nerrors; i++) {
                const IpcErrorSpec *e = &ipc_protocol_errors[i];
                char plugin[32], said[64];

                snprintf(plugin, sizeof(plugin), "code:%s", e->code);
                snprintf(said, sizeof(said), "the fake says %s", e->code);
                RUN(&r, NULL, "submit", plugin);
                cr_assert_eq(r.status, e->exit_status, "%s: fiberctl exited %d, the table says %d",
                             e->code, r.status, e->exit_status);
                assert_contains(r.err, said);
        }
        /* a code this fiberctl does not know exits like INTERNAL */
        RUN(&r, NULL, "submit", "code:FROM_THE_FUTURE");
        cr_assert_eq(r.status, ipc_protocol_exit_status(IPC_INTERNAL), "%s", r.err);
}

Test(fiberctl, version_prints_the_release_and_protocol, .init = setup_normal, .fini = fake_stop)
{
        char want[64];
        Run r;

        snprintf(want, sizeof(want), "fiberctl %s (protocol %d)\n", FIBERD_VERSION,
                 FIBERD_PROTOCOL_VERSION);
        RUN(&r, NULL, "--version");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, want);
}

Test(fiberctl, usage_errors_exit_64, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "frobnicate");
        cr_assert_eq(r.status, 64);
        assert_contains(r.err, "unknown verb 'frobnicate'");
        RUN(&r, NULL, "status");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "status", "x1");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "submit", "echo", "novalue");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "submit", "echo", "--timeout", "soon");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "list", "--state", "sleeping");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "--bogus", "ping");
        cr_assert_eq(r.status, 64);
}

Test(fiberctl, wait_prints_jobs_as_they_finish, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "submit", "slow");
        RUN(&r, NULL, "submit", "echo", "k=v");
        RUN(&r, NULL, "wait", "1", "2");
        cr_assert_eq(r.status, 0, "%s", r.err);
        char *first = strstr(r.out, "2 echo done");
        char *second = strstr(r.out, "1 slow done");
        cr_assert(first && second && first < second, "job 2 is reported first:\n%s", r.out);
        RUN(&r, NULL, "submit", "fail");
        RUN(&r, NULL, "--json", "wait", "2", "3");
        cr_assert_eq(r.status, 1, "job 3 failed");
        assert_contains(r.out, "\"state\":\"failed\"");
}

Test(fiberctl, status_cancel_list_stats, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "submit", "slow");
        RUN(&r, NULL, "status", "1");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "job 1 (slow): running");
        assert_contains(r.out, "progress  4/8 (50%)");
        RUN(&r, NULL, "cancel", "1");
        cr_assert_eq(r.status, 0);
        RUN(&r, NULL, "submit", "echo");
        RUN(&r, NULL, "list", "--state", "cancelled");
        cr_assert_eq(r.status, 0);
        assert_contains(r.out, "slow");
        cr_assert_null(strstr(r.out, "echo"), "%s", r.out);
        RUN(&r, NULL, "--json", "list");
        assert_contains(r.out, "\"plugin\":\"echo\"");
        RUN(&r, NULL, "stats");
        cr_assert_eq(r.status, 0);
        assert_contains(r.out, "uptime 1.5s");
        assert_contains(r.out, "fiberd");
}

Test(fiberctl, batch_submits_and_waits, .init = setup_normal, .fini = fake_stop)
{
        Run r;
        const char *input = "{\"plugin\": \"echo\", \"args\": {\"path\": \"/a\"}}\n"
                            "\n"
                            "{\"plugin\": \"slow\", \"options\": {\"priority\": 1}}\n"
                            "{\"plugin\": \"echo\", \"args\": {\"path\": \"/b\"}}\n";

        RUN(&r, input, "--json", "batch", "--wait", "--window", "2");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "\"path\":\"/a\"");
        assert_contains(r.out, "\"path\":\"/b\"");
        assert_contains(r.out, ",\"line\":3}\n");
        int lines = 0;
        for (char *p = r.out, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
                /* each a JSON record whose line is the one its args came from */
                json_error_t jerr;
                json_t *rec = json_loadb(p, (size_t)(nl - p), 0, &jerr);
                cr_assert_not_null(rec, "not JSON (%s): %.*s", jerr.text, (int)(nl - p), p);
                const char *path =
                        json_string_value(json_object_get(json_object_get(rec, "result"), "path"));
                json_int_t line = json_integer_value(json_object_get(rec, "line"));
                cr_assert_eq(line,
                             !path                 ? 3
                             : !strcmp(path, "/a") ? 1
                                                   : 4,
                             "%.*s", (int)(nl - p), p);
                json_decref(rec);
                lines++;
        }
        cr_assert_eq(lines, 3, "%s", r.out);

        RUN(&r, "{\"plugin\": \"fail\"}\n{\"plugin\": \"nope\"}\n", "batch", "--wait");
        cr_assert_eq(r.status, 1, "%s", r.err);
        assert_contains(r.out, "failed");
        assert_contains(r.out, "line 2: NOT_FOUND");

        RUN(&r, "not json\n{\"plugin\": \"echo\"}\n", "batch");
        cr_assert_eq(r.status, 65, "bad input line");
        assert_contains(r.out, "line 1: INVALID_ARGUMENT: not JSON");
        assert_contains(r.out, "line 2: job");
}

/* How many times @needle occurs in @s. */
static int count_substr(const char *s, const char *needle)
{
        int n = 0;
        for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

static int count_lines(const char *s, const char *line)
{
        int n = 0;
        size_t len = strlen(line);
        for (const char *p = s; (p = strstr(p, line)); p += len)
                if ((p == s || p[-1] == '\n') && p[len] == '\n')
                        n++;
        return n;
}

Test(fiberctl, submit_wait_is_one_job_run, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        fake_methods_clear();
        RUN(&r, NULL, "submit", "--wait", "echo", "x=1");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "job 1 (echo): done");
        assert_contains(r.out, "result    {\"x\":1}");
        cr_assert_str_eq(fake_methods(), "job.run\n", "one round trip, job.run");

        /* a job.run whose wait ends before the job: fiberctl goes on with job.wait */
        fake_methods_clear();
        RUN(&r, NULL, "submit", "--wait", "slow");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "job 2 (slow): done");
        cr_assert_eq(count_lines(fake_methods(), "job.run"), 1, "%s", fake_methods());
        cr_assert_eq(count_lines(fake_methods(), "job.submit"), 0, "%s", fake_methods());

        /* refusals keep submit's wording and exit status */
        RUN(&r, NULL, "submit", "--wait", "nope");
        cr_assert_eq(r.status, 66, "%s", r.err);
        assert_contains(r.err, "fiberctl: submit nope: no plugin named \"nope\"");
}

Test(fiberctl, batch_wait_is_one_job_run_per_line, .init = setup_normal, .fini = fake_stop)
{
        Run r;
        const char *input = "{\"plugin\": \"echo\", \"args\": {\"path\": \"/a\"}}\n"
                            "{\"plugin\": \"slow\"}\n"
                            "{\"plugin\": \"fail\"}\n"
                            "{\"plugin\": \"echo\", \"args\": {\"path\": \"/b\"}}\n";

        fake_methods_clear();
        RUN(&r, input, "batch", "--wait", "--window", "2");
        cr_assert_eq(r.status, 1, "one job failed: %s", r.err);
        assert_contains(r.out, "1 echo done 65ms {\"path\":\"/a\"}");
        assert_contains(r.out, "done 65ms {\"path\":\"/b\"}");
        assert_contains(r.out, "slow done");
        assert_contains(r.out, "fail failed 65ms NOT_FOUND: no such file");
        cr_assert_eq(count_lines(fake_methods(), "job.run"), 4, "%s", fake_methods());
        cr_assert_eq(count_lines(fake_methods(), "job.submit"), 0, "%s", fake_methods());
        cr_assert_eq(count_lines(fake_methods(), "job.wait"), 1, "only for slow: %s",
                     fake_methods());
}

/*
 * 60 lines through a window of 6: echo, slow and fail in turn, so answers come out of
 * order and a slow line's slot sends a job.wait under a new msgid. fiberctl finds each
 * answer's slot by its msgid in a hash table of 16 cells, where some of the 80 msgids
 * collide and their cells are taken out again: every line must end once, each with its
 * own plugin's outcome. A lost answer leaves fiberctl waiting: the test times out.
 */
Test(fiberctl, batch_matches_every_answer_to_its_line, .init = setup_normal, .fini = fake_stop,
     .timeout = 30)
{
        static const char *const plugins[] = {"echo", "slow", "fail"};
        char input[4096];
        size_t len = 0;
        int lines = 0;
        Run r;

        for (int i = 0; i < 60; i++)
                len += (size_t)snprintf(input + len, sizeof(input) - len,
                                        "{\"plugin\": \"%s\", \"args\": {\"n\": %d}}\n",
                                        plugins[i % 3], i);
        RUN(&r, input, "batch", "--wait", "--window", "6");
        cr_assert_eq(r.status, 1, "the fail lines failed: %s", r.err);
        for (char *p = r.out; (p = strchr(p, '\n')); p++)
                lines++;
        cr_assert_eq(lines, 60, "%d output lines for 60 jobs:\n%s", lines, r.out);
        cr_assert_eq(count_substr(r.out, " echo done "), 20, "%s", r.out);
        cr_assert_eq(count_substr(r.out, " slow done"), 20, "%s", r.out);
        cr_assert_eq(count_substr(r.out, " fail failed "), 20, "%s", r.out);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the lines of @text in place. */
static void sort_lines(char *text)
{
        char copy[sizeof(((Run *)0)->out)], *lines[256], *save = NULL;
        size_t n = 0;

        snprintf(copy, sizeof(copy), "%s", text);
        for (char *l = strtok_r(copy, "\n", &save); l && n < 256; l = strtok_r(NULL, "\n", &save))
                lines[n++] = l;
        qsort(lines, n, sizeof(lines[0]), cmp_str);
        text[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                strcat(text, lines[i]);
                strcat(text, "\n");
        }
}

/* The same commands against a fiberd without job.run: the same output, through
 * job.submit + job.wait. */
Test(fiberctl, wait_falls_back_when_job_run_is_unknown, .fini = fake_stop)
{
        const char *input = "{\"plugin\": \"echo\", \"args\": {\"path\": \"/a\"}}\n"
                            "{\"plugin\": \"fail\"}\n"
                            "{\"plugin\": \"echo\", \"args\": {\"path\": \"/b\"}}\n"
                            "{\"plugin\": \"nope\"}\n";
        static Run now[4], old[4];

        for (int mode = 0; mode < 2; mode++) {
                Run *r = mode ? old : now;

                fake_start(mode ? MODE_OLD : MODE_NORMAL);
                RUN(&r[0], NULL, "submit", "--wait", "echo", "x=1", "s=two");
                RUN(&r[1], NULL, "--json", "submit", "--wait", "fail");
                RUN(&r[2], input, "--json", "batch", "--wait", "--window", "1");
                RUN(&r[3], input, "batch", "--wait");
                if (mode) {
                        /* each fiberctl tries job.run once per request in flight before
                         * its first METHOD_NOT_FOUND: 1 + 1 + 1 (window 1) + 4 (window 64) */
                        cr_assert_eq(count_lines(fake_methods(), "job.run"), 7, "%s",
                                     fake_methods());
                        cr_assert_eq(count_lines(fake_methods(), "job.submit"), 2 + 4 + 4);
                        cr_assert_eq(count_lines(fake_methods(), "job.wait"), 2 + 3 + 3);
                } else {
                        cr_assert_eq(count_lines(fake_methods(), "job.submit"), 0);
                }
                fake_stop();
        }
        /* batch prints in completion order, which differs with more than one in flight */
        sort_lines(now[3].out);
        sort_lines(old[3].out);
        for (int i = 0; i < 4; i++) {
                cr_assert_eq(now[i].status, old[i].status, "command %d", i);
                cr_assert_str_eq(now[i].out, old[i].out, "command %d", i);
                cr_assert_str_eq(now[i].err, old[i].err, "command %d", i);
        }
        cr_assert_eq(now[0].status, 0, "%s", now[0].err);
        assert_contains(now[0].out, "result    {\"x\":1,\"s\":\"two\"}");
        cr_assert_eq(now[1].status, 1);
        assert_contains(now[1].out, "\"state\":\"failed\"");
        cr_assert_eq(now[3].status, 1);
        assert_contains(now[3].out, "line 4: NOT_FOUND");
        fake_start(MODE_NORMAL); /* for .fini */
}

Test(fiberctl, unreachable_daemon_exits_69)
{
        Run r;

        strcpy(fake.dir, "/tmp/fiberctl-test-XXXXXX");
        cr_assert_not_null(mkdtemp(fake.dir));
        setenv("FIBERD_SOCKET", "/tmp/fiberctl-test-nonexistent.sock", 1);
        RUN(&r, NULL, "ping");
        rmdir(fake.dir);
        cr_assert_eq(r.status, 69);
        assert_contains(r.err, "cannot connect to /tmp/fiberctl-test-nonexistent.sock");
        assert_contains(r.err, "is fiberd running?");
}

Test(fiberctl, garbage_from_daemon_exits_76, .fini = fake_stop)
{
        Run r;

        fake_start(MODE_GARBAGE);
        RUN(&r, NULL, "ping");
        cr_assert_eq(r.status, 76, "%s", r.err);
        assert_contains(r.err, "cannot read");
}

Test(fiberctl, daemon_closing_exits_69, .fini = fake_stop)
{
        Run r;

        fake_start(MODE_CLOSE);
        RUN(&r, NULL, "stats");
        cr_assert_eq(r.status, 69, "%s", r.err);
        assert_contains(r.err, "fiberd closed the connection");
}

Test(fiberctl, daemon_notice_before_closing_is_reported, .fini = fake_stop)
{
        Run r;

        fake_start(MODE_NOTICE);
        RUN(&r, NULL, "ping");
        cr_assert_eq(r.status, 76, "%s", r.err);
        assert_contains(r.err, "fiberd closed the connection: message of at least 2000000");
        RUN(&r, "{\"plugin\": \"echo\"}\n", "batch");
        cr_assert_eq(r.status, 76, "%s", r.err);
        assert_contains(r.err, "exceeds the limit");
}

/* The daemon gives up on the connection while the client is still writing: the client
 * reports the daemon's reason, not just a broken pipe. */
Test(client, notice_read_after_broken_pipe, .fini = fake_stop)
{
        Client *c;
        IpcStatus st;
        char pad[256];

        fake_start(MODE_NOTICE);
        memset(pad, 'p', sizeof(pad));
        cr_assert_eq(client_connect(&c, NULL, &st), 0);
        for (int i = 0; i < 8000; i++) {
                uint32_t msgid;
                cr_assert_eq(ipc_pack_strn(client_request(c, "ping", 1, &msgid), pad, sizeof(pad)),
                             0);
        }
        int r = client_flush(c, 20000, &st);
        if (r == 0) { /* everything fit in the socket buffers before the close */
                IpcMessage m;
                r = client_receive(c, &m, 20000, &st);
        }
        cr_assert_eq(r, -EMSGSIZE, "%d: %s", r, st.message);
        cr_assert_str_eq(st.code, IPC_MESSAGE_TOO_LARGE);
        assert_contains(st.message, "fiberd closed the connection: message of at least");
        client_free(c);
}

/* ---------------------------------------------------------------- job scheduling */

Test(fiberctl, submit_packs_the_scheduling_options, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        fake_methods_clear();
        RUN(&r, NULL, "submit", "echo", "x=1", "--in", "1h30m", "--retries", "2", "--backoff",
            "500ms", "--backoff-max", "2m", "--after", "3,4", "--after", "5", "--key", "k1",
            "--class", "batch");
        cr_assert_eq(r.status, 0, "%s", r.err);
        const char *p = fake_params();
        assert_contains(p, "job.submit [\"echo\", {\"x\"=>1}, {");
        assert_contains(p, "\"delay_ms\"=>5400000");
        assert_contains(p, "\"max_attempts\"=>3");
        assert_contains(p, "\"backoff_ms\"=>500");
        assert_contains(p, "\"backoff_max_ms\"=>120000");
        assert_contains(p, "\"after\"=>[3, 4, 5]");
        assert_contains(p, "\"key\"=>\"k1\"");
        assert_contains(p, "\"class\"=>\"batch\"");

        fake_methods_clear();
        RUN(&r, NULL, "submit", "echo", "--at", "2026-12-01T03:00:00+02:00", "--retries", "0");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(fake_params(), "\"run_at\"=>1796086800000");
        assert_contains(fake_params(), "\"max_attempts\"=>1");
        fake_methods_clear();
        RUN(&r, NULL, "submit", "echo", "--at", "@1764558000", "--wait");
        /* the fake answers job.run and job.wait at once, with the record still scheduled */
        cr_assert_eq(r.status, 75, "a scheduled job is not final: %s", r.err);
        assert_contains(fake_params(), "job.run [\"echo\", {}, {\"run_at\"=>1764558000000}]");
}

Test(fiberctl, bad_scheduling_values_are_refused_naming_the_option, .init = setup_normal,
     .fini = fake_stop)
{
        static const struct {
                const char *option, *value, *said;
        } bad[] = {
                {"--in", "soon", "--in needs a duration"},
                {"--in", "4000d", "--in: '4000d' is too long"},
                {"--at", "2026-12-01T03:00:00", "no time zone"},
                {"--at", "2026-13-01T03:00:00Z", "--at '2026-13-01T03:00:00Z'"},
                {"--at", "tomorrow", "--at 'tomorrow'"},
                {"--retries", "-1", "--retries needs a whole number from 0 to 99"},
                {"--retries", "100", "--retries needs"},
                {"--retries", "x", "--retries needs"},
                {"--backoff", "1y", "--backoff needs a duration"},
                {"--backoff-max", "", "--backoff-max needs a duration"},
                {"--after", "0", "--after needs job ids"},
                {"--after", "3,,4", "--after needs job ids"},
                {"--after", "a", "--after needs job ids"},
                {"--key", "", "--key needs 1 to 128 bytes"},
        };
        Run r;

        fake_methods_clear();
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                RUN(&r, NULL, "submit", "echo", bad[i].option, bad[i].value);
                cr_assert_eq(r.status, 64, "%s %s: %d", bad[i].option, bad[i].value, r.status);
                assert_contains(r.err, bad[i].said);
        }
        RUN(&r, NULL, "submit", "echo", "--in", "5m", "--at", "@1764558000");
        cr_assert_eq(r.status, 64);
        assert_contains(r.err, "--in and --at both say when the job runs");
        char key[200];
        memset(key, 'k', 129);
        key[129] = '\0';
        RUN(&r, NULL, "submit", "echo", "--key", key);
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "--json", "submit", "echo", "--in", "soon");
        cr_assert_eq(r.status, 64);
        assert_contains(r.err, "{\"error\":{\"code\":\"USAGE\",\"message\":\"--in needs");
        cr_assert_str_eq(fake_methods(), "", "a refused value sent nothing");
}

Test(fiberctl, records_show_attempts_due_times_and_errors, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "submit", "flaky");                                               /* 1 */
        RUN(&r, NULL, "submit", "doomed");                                              /* 2 */
        RUN(&r, NULL, "submit", "echo", "--in", "2h", "--key", "k1", "--after", "1,2"); /* 3 */
        RUN(&r, NULL, "submit", "echo", "n=4");                                         /* 4 */

        RUN(&r, NULL, "status", "1");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "job 1 (flaky): retrying");
        assert_contains(r.out, "  attempt   2 of 3\n");
        assert_contains(r.out, "  next try  ");
        assert_contains(r.out, "(in 1m0");
        assert_contains(r.out, "  errors    attempt 1, ");
        assert_contains(r.out, ": INTERNAL: boom\n");
        RUN(&r, NULL, "status", "2");
        assert_contains(r.out, "job 2 (doomed): dead");
        assert_contains(r.out, "  attempt   3 of 3\n");
        assert_contains(r.out, "            attempt 3, ");
        assert_contains(r.out, "  error     INTERNAL: boom");
        RUN(&r, NULL, "status", "3");
        assert_contains(r.out, "job 3 (echo): scheduled");
        assert_contains(r.out, "  run at    2025-11-22 ");
        assert_contains(r.out, "  after     1, 2\n");
        assert_contains(r.out, "  key       k1\n");
        RUN(&r, NULL, "status", "4");
        cr_assert_null(strstr(r.out, "attempt"), "a plain job reads as before: %s", r.out);
        cr_assert_null(strstr(r.out, "after"), "%s", r.out);
        RUN(&r, NULL, "--json", "status", "1");
        assert_contains(r.out, "\"max_attempts\":3");
        assert_contains(r.out, "\"errors\":[{");

        /* dead is final and unsuccessful: wait exits 1 at once */
        RUN(&r, NULL, "wait", "2", "4");
        cr_assert_eq(r.status, 1, "%s", r.err);
        assert_contains(r.out, "2 doomed dead 65ms attempt=3/3 INTERNAL: boom\n");
        assert_contains(r.out, "4 echo done 65ms {\"n\":4}\n");
        RUN(&r, NULL, "wait", "--timeout", "0", "1", "3");
        cr_assert_eq(r.status, 75, "not final yet");
        assert_contains(r.out, "1 flaky retrying - attempt=2/3 due_in=1m0");
        assert_contains(r.out, "3 echo scheduled - due_in=now after=1,2 key=k1\n");

        RUN(&r, NULL, "list");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "ATTEMPT   DUE ERROR\n");
        RUN(&r, NULL, "list", "--state", "done");
        cr_assert_null(strstr(r.out, "ATTEMPT"), "plain jobs, plain columns: %s", r.out);
        fake_methods_clear();
        RUN(&r, NULL, "dead");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(fake_params(), "job.list [{\"state\"=>\"dead\", \"cursor\"=>nil}]");
        assert_contains(r.out, "doomed");
        assert_contains(r.out, "INTERNAL");
        cr_assert_null(strstr(r.out, "flaky"), "%s", r.out);
        RUN(&r, NULL, "list", "--state", "retrying");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "flaky");
}

Test(fiberctl, retry_discard_pause_resume, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        RUN(&r, NULL, "submit", "doomed");
        RUN(&r, NULL, "submit", "doomed");
        RUN(&r, NULL, "submit", "slow");
        fake_methods_clear();
        RUN(&r, NULL, "retry", "1", "2");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, "retried jobs 1, 2\n");
        assert_contains(fake_params(), "job.retry [[1, 2]]\n");
        RUN(&r, NULL, "retry", "--all");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(fake_params(), "job.retry [{\"all\"=>true}]\n");
        RUN(&r, NULL, "--json", "discard", "2");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, "{\"discarded\":[2]}\n");
        RUN(&r, NULL, "retry", "99");
        cr_assert_eq(r.status, 66, "%s", r.err);
        cr_assert_str_eq(r.err, "fiberctl: retry: no job 99\n");
        RUN(&r, NULL, "retry", "3");
        cr_assert_eq(r.status, 75, "FAILED_PRECONDITION: %s", r.err);
        fake_methods_clear();
        RUN(&r, NULL, "retry");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "discard", "1", "--all");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "retry", "x");
        cr_assert_eq(r.status, 64);
        cr_assert_str_eq(fake_methods(), "");

        RUN(&r, NULL, "pause", "class", "batch");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "paused class batch: its 2 queued jobs wait until 'fiberctl "
                               "resume class batch'");
        assert_contains(fake_params(), "pause [\"class\", \"batch\"]\n");
        RUN(&r, NULL, "resume", "plugin", "sleep");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "resumed plugin sleep: its 2 queued jobs may run");
        RUN(&r, NULL, "--json", "resume", "plugin", "sleep");
        assert_contains(r.out, "\"paused\":false");
        RUN(&r, NULL, "pause", "queue", "x");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "pause", "class");
        cr_assert_eq(r.status, 64);
}

Test(fiberctl, schedule_add_list_pause_remove, .init = setup_normal, .fini = fake_stop)
{
        Run r;

        fake_methods_clear();
        RUN(&r, NULL, "schedule", "add", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin",
            "--missed", "run-once", "sha256", "path=/etc/hostname", "--retries", "2", "--in", "5m");
        cr_assert_eq(r.status, 0, "%s", r.err);
        const char *p = fake_params();
        assert_contains(p, "schedule.add [\"nightly\", {\"cron\"=>\"0 3 * * *\", "
                           "\"tz\"=>\"Europe/Berlin\", \"missed\"=>\"run_once\"}, \"sha256\", "
                           "{\"path\"=>\"/etc/hostname\"}, {");
        assert_contains(p, "\"max_attempts\"=>3");
        assert_contains(p, "\"delay_ms\"=>300000");
        assert_contains(r.out, "schedule nightly (uid 1000): cron 0 3 * * * (Europe/Berlin)\n");
        assert_contains(r.out, "  submits   sha256 {\"path\":\"/etc/hostname\"}\n");
        assert_contains(r.out, "  missed    run_once\n");
        fake_methods_clear();
        RUN(&r, NULL, "schedule", "add", "every5", "--every", "5m", "echo", "n=1");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(fake_params(), "schedule.add [\"every5\", {\"every_ms\"=>300000}, "
                                       "\"echo\", {\"n\"=>1}, {}]\n");
        RUN(&r, NULL, "schedule", "add", "every5", "--every", "5m", "echo");
        cr_assert_eq(r.status, 70, "ALREADY_EXISTS: %s", r.err);

        RUN(&r, NULL, "schedule", "pause", "nightly");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "paused schedule nightly\n");
        RUN(&r, NULL, "schedule", "list");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(r.out, "NAME ");
        assert_contains(r.out, "every 5m");
        assert_contains(r.out, "paused");
        assert_contains(r.out, "active");
        RUN(&r, NULL, "--json", "schedule", "list");
        assert_contains(r.out, "\"name\":\"every5\"");
        fake_methods_clear();
        RUN(&r, NULL, "schedule", "remove", "nightly", "--owner", "1000");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(fake_params(), "schedule.remove [\"nightly\", 1000]\n");
        RUN(&r, NULL, "schedule", "resume", "nightly");
        cr_assert_eq(r.status, 66, "removed: %s", r.err);
        assert_contains(r.err, "no schedule nightly");
}

Test(fiberctl, schedule_add_refuses_what_cannot_repeat, .init = setup_normal, .fini = fake_stop)
{
        static const char *const bad[][8] = {
                {"echo"},
                {"--cron", "@daily", "--every", "5m", "echo"},
                {"--every", "5m", "--tz", "UTC", "echo"},
                {"--every", "500ms", "echo"},
                {"--every", "soon", "echo"},
                {"--every", "5m", "--at", "@1764558000", "echo"},
                {"--every", "5m", "--key", "k", "echo"},
                {"--every", "5m", "--missed", "sometimes", "echo"},
                {"--every", "5m", "echo", "path=@/etc/hostname"},
                {"--every", "5m", "echo", "novalue"},
                {"--every", "5m"},
        };
        Run r;

        fake_methods_clear();
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *argv[16] = {"schedule", "add", "n"};
                int n = 3;
                for (int k = 0; k < 8 && bad[i][k]; k++)
                        argv[n++] = bad[i][k];
                argv[n] = NULL;
                run(&r, NULL, argv);
                cr_assert_eq(r.status, 64, "case %zu: %d %s", i, r.status, r.err);
        }
        RUN(&r, NULL, "schedule", "add", "bad name", "--every", "5m", "echo");
        cr_assert_eq(r.status, 64);
        assert_contains(r.err, "is not a schedule name");
        RUN(&r, NULL, "schedule", "frobnicate");
        cr_assert_eq(r.status, 64);
        RUN(&r, NULL, "schedule", "remove", "n", "--owner", "root");
        cr_assert_eq(r.status, 64);
        cr_assert_str_eq(fake_methods(), "", "nothing sent");
}

Test(fiberctl, new_verbs_against_an_older_fiberd_say_so, .fini = fake_stop)
{
        Run r;

        fake_start(MODE_OLD);
        RUN(&r, NULL, "retry", "1");
        cr_assert_eq(r.status, 76, "%s", r.err);
        assert_contains(r.err, "retry: this fiberd does not know job.retry (it is older than "
                               "fiberctl)");
        RUN(&r, NULL, "schedule", "list");
        cr_assert_eq(r.status, 76, "%s", r.err);
        assert_contains(r.err, "schedule.list");
}

Test(fiberctl, batch_after_names_earlier_lines, .init = setup_normal, .fini = fake_stop)
{
        const char *input = "{\"plugin\": \"echo\", \"args\": {\"n\": 1}}\n" /* 1 */
                            "{\"plugin\": \"echo\", \"after\": [\"#1\"]}\n"  /* 2 */
                            "{\"plugin\": \"echo\", \"options\": {\"after\": [\"#2\", 1], "
                            "\"delay_ms\": 5, \"max_attempts\": 2, \"key\": \"b3\"}}\n" /* 3 */
                            "{\"plugin\": \"echo\", \"after\": [\"#5\"]}\n"             /* 4 */
                            "{\"plugin\": \"nope\"}\n"                                  /* 5 */
                            "{\"plugin\": \"echo\", \"after\": [\"#5\"]}\n"             /* 6 */
                            "{\"plugin\": \"echo\", \"after\": [\"#4\"]}\n"             /* 7 */
                            "{\"plugin\": \"echo\", \"after\": [\"#8\"]}\n";            /* 8 */
        const char *windows[] = {"64", "1", "2"};
        Run r;

        for (size_t w = 0; w < 3; w++) {
                fake_stop();
                fake_start(MODE_NORMAL);
                RUN(&r, input, "batch", "--window", windows[w]);
                cr_assert_eq(r.status, 65, "window %s: bad lines: %s", windows[w], r.err);
                const char *p = fake_params();
                /* line 1 is job 1; line 2 was held until then and is job 2 */
                assert_contains(p, "job.submit [\"echo\", {\"n\"=>1}, nil]\n");
                assert_contains(p, "job.submit [\"echo\", nil, {\"after\"=>[1]}]\n");
                assert_contains(p, "job.submit [\"echo\", nil, {\"after\"=>[2, 1], "
                                   "\"delay_ms\"=>5, \"max_attempts\"=>2, \"key\"=>\"b3\"}]\n");
                cr_assert_eq(count_lines(fake_methods(), "job.submit"), 4, "1, 2, 3 and 5: %s",
                             fake_methods());
                assert_contains(r.out, "line 1: job 1 echo\n");
                assert_contains(r.out, "line 2: job 2 echo\n");
                assert_contains(r.out, "line 3: job 3 echo\n");
                assert_contains(r.out, "line 4: INVALID_ARGUMENT: \"after\": \"#5\" refers to a "
                                       "later line");
                assert_contains(r.out, "line 5: NOT_FOUND: no plugin named \"nope\"");
                assert_contains(r.out, "line 6: FAILED_PRECONDITION: \"after\": the job of line 5 "
                                       "was refused");
                assert_contains(r.out, "line 7: INVALID_ARGUMENT: \"after\": line 4 holds no job");
                assert_contains(r.out, "line 8: INVALID_ARGUMENT: \"after\": \"#8\" refers to "
                                       "this line itself");
        }

        /* with --wait: a line's id comes with its job.run's answer */
        fake_stop();
        fake_start(MODE_NORMAL);
        RUN(&r,
            "{\"plugin\": \"echo\"}\n{\"plugin\": \"echo\", \"after\": [\"#1\"]}\n"
            "{\"plugin\": \"echo\", \"after\": [\"#2\", \"#1\"]}\n",
            "--json", "batch", "--wait");
        cr_assert_eq(r.status, 0, "%s", r.err);
        assert_contains(fake_params(), "job.run [\"echo\", nil, {\"after\"=>[1]}]\n");
        assert_contains(fake_params(), "job.run [\"echo\", nil, {\"after\"=>[2, 1]}]\n");
        assert_contains(r.out, "\"after\":[2,1]");
        RUN(&r, "{\"plugin\": \"echo\", \"after\": [1], \"options\": {\"after\": [2]}}\n", "batch");
        cr_assert_eq(r.status, 65, "%s", r.out);
        assert_contains(r.out, "line 1: INVALID_ARGUMENT: \"after\" is given twice");
}

/* ---------------------------------------------------------------- libfiberd-client */

Test(client_lib, job_options_are_packed_as_the_protocol_names_them, .init = setup_normal,
     .fini = fake_stop)
{
        static const uint64_t after[] = {3, 4};
        FiberdClientJobOptions all = {.has_priority = true,
                                      .priority = -1,
                                      .timeout_ms = 5000,
                                      .job_class = "batch",
                                      .delay_ms = 5400000,
                                      .max_attempts = 3,
                                      .backoff_ms = 500,
                                      .backoff_max_ms = 120000,
                                      .after = after,
                                      .n_after = 2,
                                      .key = "k1"};
        FiberdClientJobOptions at = {.run_at_ms = 1796086800000ULL}, none = {0};
        FiberdClient *c;
        FiberdClientError err;
        FiberdClientReply *rec;
        uint32_t msgid = 0;
        uint64_t id;

        cr_assert_eq(fiberd_client_connect(&c, fake.path, &err), 0, "%s", err.message);
        fake_methods_clear();
        cr_assert_eq(fiberd_client_submit(c, "echo", NULL, 0, &all, 5000, &id, &err), 0, "%s",
                     err.message);
        cr_assert_str_eq(fake_params(),
                         "job.submit [\"echo\", {}, {\"priority\"=>-1, \"timeout_ms\"=>5000, "
                         "\"class\"=>\"batch\", \"delay_ms\"=>5400000, \"max_attempts\"=>3, "
                         "\"backoff_ms\"=>500, \"backoff_max_ms\"=>120000, \"after\"=>[3, 4], "
                         "\"key\"=>\"k1\"}]\n");
        fake_methods_clear();
        cr_assert_eq(fiberd_client_job_run(c, "echo", NULL, 0, &at, -1, 5000, &rec, &err), 0, "%s",
                     err.message);
        fiberd_client_reply_free(rec);
        cr_assert_eq(fiberd_client_submit(c, "echo", NULL, 0, &none, 5000, &id, &err), 0);
        cr_assert_str_eq(fake_params(), "job.run [\"echo\", {}, {\"run_at\"=>1796086800000}, nil]\n"
                                        "job.submit [\"echo\", {}, {}]\n");

        /* an after count without its array is refused, and nothing is queued */
        FiberdClientJobOptions bad = {.n_after = 2};
        cr_assert_eq(fiberd_client_send_submit(c, "echo", NULL, 0, &bad, &msgid), -EINVAL);
        cr_assert_eq(msgid, 0u);
        cr_assert_eq(fiberd_client_pending_output(c), 0u);
        fiberd_client_free(c);
}

Test(client_lib, scheduling_methods_are_packed_as_the_protocol_says, .init = setup_normal,
     .fini = fake_stop)
{
        static const uint64_t ids[] = {1, 2};
        FiberdClientScheduleSpec cron = {
                .cron = "0 3 * * *", .tz = "Europe/Berlin", .missed = "run_once"};
        FiberdClientScheduleSpec every = {.every_ms = 300000}, neither = {0};
        FiberdClientJobOptions twice = {.max_attempts = 2};
        FiberdClient *c;
        FiberdClientError err;
        FiberdClientReply *rep;
        uint32_t msgid = 0;
        Run r;

        RUN(&r, NULL, "submit", "doomed");
        RUN(&r, NULL, "submit", "doomed");
        cr_assert_eq(fiberd_client_connect(&c, fake.path, &err), 0, "%s", err.message);
        fake_methods_clear();
        cr_assert_eq(fiberd_client_job_retry(c, ids, 2, false, 5000, &rep, &err), 0, "%s",
                     err.message);
        const msgpack_object *retried =
                fiberd_client_object_get(fiberd_client_reply_result(rep), "retried");
        cr_assert(retried && retried->type == MSGPACK_OBJECT_ARRAY && retried->via.array.size == 2);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_job_discard(c, NULL, 0, true, 5000, &rep, &err), 0, "%s",
                     err.message);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_job_retry(c, ids, 1, false, 5000, &rep, &err), 0);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_pause(c, "class", "batch", 5000, &rep, &err), 0, "%s",
                     err.message);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_resume(c, "plugin", "sleep", 5000, &rep, &err), 0);
        fiberd_client_reply_free(rep);
        cr_assert_str_eq(fake_params(), "job.retry [[1, 2]]\n"
                                        "job.discard [{\"all\"=>true}]\n"
                                        "job.retry [[1]]\n"
                                        "pause [\"class\", \"batch\"]\n"
                                        "resume [\"plugin\", \"sleep\"]\n");

        fake_methods_clear();
        cr_assert_eq(fiberd_client_schedule_add(c, "nightly", &cron, "echo", NULL, 0, &twice, 5000,
                                                &rep, &err),
                     0, "%s", err.message);
        cr_assert(ipc_object_streq(
                fiberd_client_object_get(fiberd_client_reply_result(rep), "name"), "nightly"));
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_schedule_add(c, "often", &every, "echo", NULL, 0, NULL, 5000,
                                                &rep, &err),
                     0, "%s", err.message);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_schedule_list(c, 5000, &rep, &err), 0);
        cr_assert_eq(fiberd_client_reply_result(rep)->via.array.size, 2u);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_schedule_pause(c, "nightly", -1, 5000, &rep, &err), 0);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_schedule_resume(c, "nightly", -1, 5000, &rep, &err), 0);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_schedule_remove(c, "nightly", 1000, 5000, &rep, &err), 0);
        fiberd_client_reply_free(rep);
        cr_assert_eq(fiberd_client_schedule_remove(c, "nightly", -1, 5000, &rep, &err), -ENOENT);
        cr_assert_eq(err.code, FIBERD_CLIENT_NOT_FOUND);
        cr_assert_str_eq(fake_params(),
                         "schedule.add [\"nightly\", {\"cron\"=>\"0 3 * * *\", "
                         "\"tz\"=>\"Europe/Berlin\", \"missed\"=>\"run_once\"}, \"echo\", {}, "
                         "{\"max_attempts\"=>2}]\n"
                         "schedule.add [\"often\", {\"every_ms\"=>300000}, \"echo\", {}, {}]\n"
                         "schedule.list []\n"
                         "schedule.pause [\"nightly\"]\n"
                         "schedule.resume [\"nightly\"]\n"
                         "schedule.remove [\"nightly\", 1000]\n"
                         "schedule.remove [\"nightly\"]\n");

        /* refused before anything is queued */
        cr_assert_eq(fiberd_client_send_retry(c, NULL, 0, false, &msgid), -EINVAL, "neither");
        cr_assert_eq(fiberd_client_send_retry(c, ids, 2, true, &msgid), -EINVAL, "both");
        cr_assert_eq(fiberd_client_send_discard(c, NULL, 2, false, &msgid), -EINVAL);
        cr_assert_eq(fiberd_client_send_pause(c, NULL, "x", &msgid), -EINVAL);
        cr_assert_eq(
                fiberd_client_send_schedule_add(c, "n", &neither, "echo", NULL, 0, NULL, &msgid),
                -EINVAL);
        cr_assert_eq(fiberd_client_send_schedule_add(c, "n", NULL, "echo", NULL, 0, NULL, &msgid),
                     -EINVAL);
        cr_assert_eq(fiberd_client_send_schedule_remove(c, "n", (int64_t)UINT32_MAX + 1, &msgid),
                     -EINVAL);
        cr_assert_eq(msgid, 0u);
        cr_assert_eq(fiberd_client_pending_output(c), 0u);
        fiberd_client_free(c);
}
