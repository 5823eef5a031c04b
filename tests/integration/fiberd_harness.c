/* SPDX-License-Identifier: MIT */
/*
 * fiberd_harness.c — see fiberd_harness.h. The daemon runs as a child process with
 * PR_SET_PDEATHSIG, so a test that dies (or times out) never leaves a fiberd behind.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t fiberd_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void copy_file(const char *src, const char *dst)
{
        char buf[65536];
        int in = open(src, O_RDONLY | O_CLOEXEC);
        int out;
        ssize_t n;

        cr_assert(in >= 0, "cannot open %s: %s (is it built?)", src, strerror(errno));
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        cr_assert(out >= 0, "cannot create %s: %s", dst, strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert(write(out, buf, (size_t)n) == n);
        close(in);
        close(out);
}

void fiberd_copy_plugin(const Fiberd *d, const char *src, const char *name)
{
        char tmp[512], dst[512];

        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", d->plugin_dir, name);
        snprintf(dst, sizeof(dst), "%s/%s", d->plugin_dir, name);
        copy_file(src, tmp);
        cr_assert(rename(tmp, dst) == 0, "rename %s: %s", dst, strerror(errno));
}

static bool try_connect(const char *path)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok;

        snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
        ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        return ok;
}

static void dump_log(const Fiberd *d)
{
        char buf[4096];
        FILE *f = fopen(d->log, "r");

        if (!f)
                return;
        fprintf(stderr, "---- %s ----\n", d->log);
        while (fgets(buf, sizeof(buf), f))
                fputs(buf, stderr);
        fclose(f);
}

static void fiberd_spawn(Fiberd *d);
static void fiberd_wait_ready(Fiberd *d);

void fiberd_start(Fiberd *d, const FiberdOpts *o)
{
        static const FiberdOpts defaults = {0};
        char conf[256] = "", names[1024], *save, *name;

        if (!o)
                o = &defaults;
        memset(d, 0, sizeof(*d));
        d->notify_fd = -1;
        snprintf(d->dir, sizeof(d->dir), "/tmp/fiberd-test-XXXXXX");
        cr_assert(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
        snprintf(d->sock, sizeof(d->sock), "%s/fiberd.sock", d->dir);
        snprintf(d->plugin_dir, sizeof(d->plugin_dir), "%s/plugins", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/fiberd.log", d->dir);
        cr_assert(mkdir(d->plugin_dir, 0755) == 0);

        snprintf(names, sizeof(names), "%s",
                 o->plugins ? o->plugins : "echo sha256 sleep spin skynet");
        for (name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
                char src[512], dst[512];
                snprintf(src, sizeof(src), "%s/%s.so", FIBERD_PLUGIN_BUILD_DIR, name);
                snprintf(dst, sizeof(dst), "%s/%s.so", d->plugin_dir, name);
                copy_file(src, dst);
        }
        snprintf(names, sizeof(names), "%s", o->extra ? o->extra : "");
        for (name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
                char dst[512];
                snprintf(dst, sizeof(dst), "%s/%s", d->plugin_dir, strrchr(name, '/') + 1);
                copy_file(name, dst);
        }
        if (o->config) {
                FILE *f;
                snprintf(conf, sizeof(conf), "%s/fiberd.conf", d->dir);
                f = fopen(conf, "w");
                cr_assert(f);
                fputs(o->config, f);
                fclose(f);
        }
        if (o->notify) {
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                snprintf(d->notify, sizeof(d->notify), "%s/notify.sock", d->dir);
                snprintf(a.sun_path, sizeof(a.sun_path), "%s", d->notify);
                d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                cr_assert(d->notify_fd >= 0);
                cr_assert(bind(d->notify_fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        }

        d->restarts = 0;
        d->workers = o->workers;
        fiberd_spawn(d);
        fiberd_wait_ready(d);
}

/* Forks and execs fiberd in @d's directory (its config file when there is one). */
static void fiberd_spawn(Fiberd *d)
{
        char conf[256] = "", workers[16] = "";
        struct stat st;

        snprintf(conf, sizeof(conf), "%s/fiberd.conf", d->dir);
        if (stat(conf, &st) < 0)
                conf[0] = '\0';
        if (d->workers)
                snprintf(workers, sizeof(workers), "%u", d->workers);
        d->pid = fork();
        cr_assert(d->pid >= 0);
        if (d->pid == 0) {
                const char *argv[12], *bin = FIBERD_BIN;
                int argc = 0, fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (fd >= 0) {
                        dup2(fd, STDERR_FILENO);
                        dup2(fd, STDOUT_FILENO);
                }
                setenv("FIBERD_SOCKET", d->sock, 1);
                /* the job store's default place (daemon/store/store.h): this test's directory */
                setenv("STATE_DIRECTORY", d->dir, 1);
                if (d->notify_fd >= 0)
                        setenv("NOTIFY_SOCKET", d->notify, 1);
                else
                        unsetenv("NOTIFY_SOCKET");
                unsetenv("LISTEN_FDS");
                unsetenv("LISTEN_PID");
                /* make check-daemon-sanitizers runs the same tests against a
                 * sanitized build of fiberd */
                if (getenv("FIBERD_TEST_BIN") && *getenv("FIBERD_TEST_BIN"))
                        bin = getenv("FIBERD_TEST_BIN");
                argv[argc++] = bin;
                argv[argc++] = "--plugin-dir";
                argv[argc++] = d->plugin_dir;
                argv[argc++] = "--log-level";
                argv[argc++] = "debug";
                if (*conf) {
                        argv[argc++] = "--config";
                        argv[argc++] = conf;
                }
                if (*workers) {
                        argv[argc++] = "--workers";
                        argv[argc++] = workers;
                }
                argv[argc] = NULL;
                execv(bin, (char *const *)argv);
                _exit(127);
        }
}

/* Waits until @d accepts and has logged its ready line (asserts). */
static void fiberd_wait_ready(Fiberd *d)
{
        uint64_t deadline;

        /* Started means accepting and past its start-up log: the server answers as soon as
         * it listens, a moment before main() writes the ready line. */
        deadline = fiberd_now_ms() + 15000;
        while (!try_connect(d->sock) || !fiberd_log_contains(d, " ready on ")) {
                int status;
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = 0;
                        dump_log(d);
                        cr_assert_fail("fiberd exited during start-up (status 0x%x)", status);
                }
                if (fiberd_now_ms() > deadline) {
                        dump_log(d);
                        cr_assert_fail("fiberd did not accept on %s and log its ready line "
                                       "within 15 s",
                                       d->sock);
                }
                usleep(5000);
        }
}

/* The log of earlier runs moves aside (fiberd.log.N), so " ready on " is this run's. */
static void fiberd_rotate_log(Fiberd *d)
{
        char old[224];

        d->restarts++;
        snprintf(old, sizeof(old), "%s.%u", d->log, d->restarts);
        rename(d->log, old);
}

void fiberd_restart(Fiberd *d)
{
        cr_assert(d->pid == 0, "fiberd_restart: fiberd still runs");
        fiberd_rotate_log(d);
        fiberd_spawn(d);
        fiberd_wait_ready(d);
}

void fiberd_restart_begin(Fiberd *d)
{
        cr_assert(d->pid == 0, "fiberd_restart_begin: fiberd still runs");
        fiberd_rotate_log(d);
        fiberd_spawn(d);
}

bool fiberd_running(Fiberd *d)
{
        int status;

        if (d->pid <= 0)
                return false;
        if (waitpid(d->pid, &status, WNOHANG) != d->pid)
                return true;
        dump_log(d);
        d->pid = 0;
        return false;
}

void fiberd_wait_started(Fiberd *d)
{
        fiberd_wait_ready(d);
}

int fiberd_restart_fails(Fiberd *d, int timeout_ms)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;
        int status;

        cr_assert(d->pid == 0, "fiberd_restart_fails: fiberd still runs");
        fiberd_rotate_log(d);
        fiberd_spawn(d);
        for (;;) {
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return status;
                }
                if (fiberd_now_ms() > deadline) {
                        kill(d->pid, SIGKILL);
                        waitpid(d->pid, NULL, 0);
                        d->pid = 0;
                        return -1;
                }
                usleep(5000);
        }
}

int fiberd_signal_and_wait(Fiberd *d, int sig, int timeout_ms)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;
        int status = -1;

        if (d->pid <= 0)
                return -1;
        kill(d->pid, sig);
        for (;;) {
                pid_t p = waitpid(d->pid, &status, WNOHANG);
                if (p == d->pid) {
                        d->pid = 0;
                        return status;
                }
                if (fiberd_now_ms() > deadline)
                        return -1;
                usleep(2000);
        }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        remove(path);
        return 0;
}

/* Every fiberd a test starts by other means (system(), popen()) finds its job store in
 * a directory of this process's own, not /var/lib/fiberd: the harness's own fiberds get
 * theirs in fiberd_start(). Made when the test binary (or criterion's worker) starts,
 * removed when that process ends. */
static char state_dir[64];
static pid_t state_dir_owner;

static void state_dir_remove(void)
{
        if (state_dir[0] && getpid() == state_dir_owner)
                nftw(state_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

__attribute__((constructor)) static void state_dir_make(void)
{
        if (getenv("STATE_DIRECTORY"))
                return;
        snprintf(state_dir, sizeof(state_dir), "/tmp/fiberd-test-state-XXXXXX");
        if (!mkdtemp(state_dir)) {
                state_dir[0] = '\0';
                return;
        }
        state_dir_owner = getpid();
        setenv("STATE_DIRECTORY", state_dir, 1);
        atexit(state_dir_remove);
}

void fiberd_stop(Fiberd *d)
{
        if (d->pid > 0 && fiberd_signal_and_wait(d, SIGTERM, 15000) == -1) {
                kill(d->pid, SIGKILL);
                waitpid(d->pid, NULL, 0);
                d->pid = 0;
        }
        if (d->notify_fd >= 0) {
                close(d->notify_fd);
                d->notify_fd = -1;
        }
        if (d->dir[0] && !getenv("FIBERD_TEST_KEEP"))
                nftw(d->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        d->dir[0] = '\0';
}

bool fiberd_log_contains(const Fiberd *d, const char *needle)
{
        char line[4096];
        bool found = false;
        FILE *f = fopen(d->log, "r");

        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, needle) != NULL;
        fclose(f);
        return found;
}

bool fiberd_notify_wait(Fiberd *d, const char *needle, int timeout_ms)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;

        cr_assert(d->notify_fd >= 0);
        for (;;) {
                char buf[4096];
                struct pollfd p = {.fd = d->notify_fd, .events = POLLIN};
                uint64_t now = fiberd_now_ms();
                ssize_t n;

                if (now >= deadline)
                        return false;
                if (poll(&p, 1, (int)(deadline - now)) <= 0)
                        continue;
                n = recv(d->notify_fd, buf, sizeof(buf) - 1, 0);
                if (n <= 0)
                        continue;
                buf[n] = '\0';
                if (strstr(buf, needle))
                        return true;
        }
}

void rpc_wait_progress(Client *c, uint64_t id, int64_t timeout_ms)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;

        for (;;) {
                const msgpack_object *p;
                bool runs;
                Reply rp;

                rpc_simple(c, "job.status", 1, &id, &rp);
                cr_assert_eq(rp.r, 0, "job.status %lu: %s", (unsigned long)id, rp.st.message);
                p = map_get(rp.result, "progress");
                runs = p && p->type == MSGPACK_OBJECT_MAP;
                reply_clear(&rp);
                if (runs)
                        return;
                cr_assert_lt(fiberd_now_ms(), deadline, "job %lu never started its code",
                             (unsigned long)id);
                usleep(2000);
        }
}

unsigned fiberd_thread_count(const Fiberd *d)
{
        char path[64];
        struct dirent *e;
        unsigned n = 0;
        DIR *dir;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)d->pid);
        dir = opendir(path);
        cr_assert(dir, "cannot open %s", path);
        while ((e = readdir(dir)))
                n += e->d_name[0] != '.';
        closedir(dir);
        return n;
}

Client *fiberd_connect(const Fiberd *d)
{
        Client *c;
        IpcStatus st = {0};
        int r = client_connect(&c, d->sock, &st);

        cr_assert(r == 0, "connect: %s", st.message);
        return c;
}

/* ---------------------------------------------------------------- RPC ------------ */

void reply_clear(Reply *rp)
{
        ipc_message_clear(&rp->msg);
        memset(rp, 0, sizeof(*rp));
}

void rpc_wait_reply(Client *c, uint32_t msgid, Reply *rp)
{
        IpcStatus st = {0};
        int r;

        memset(rp, 0, sizeof(*rp));
        r = client_call_wait(c, msgid, &rp->msg, 30000, &st);
        cr_assert(r == 1, "no response to msgid %u: %s", msgid, st.message);
        rp->r = client_result(&rp->msg, &rp->result, &rp->st);
        if (rp->r < 0)
                rp->result = NULL;
}

void rpc_simple(Client *c, const char *method, size_t n, const uint64_t *params, Reply *rp)
{
        uint32_t id;
        msgpack_packer *pk = client_request(c, method, (uint32_t)n, &id);

        cr_assert(pk);
        for (size_t i = 0; i < n; i++)
                msgpack_pack_uint64(pk, params[i]);
        rpc_wait_reply(c, id, rp);
}

bool rpc_running_becomes(Client *c, uint64_t want)
{
        for (int i = 0; i < 1000; i++) {
                Reply rp;
                uint64_t running;

                rpc_simple(c, "stats", 0, NULL, &rp);
                running = map_uint(map_get(rp.result, "jobs"), "running");
                reply_clear(&rp);
                if (running == want)
                        return true;
                usleep(10000);
        }
        return false;
}

uint32_t rpc_submit_send(Client *c, const char *plugin, const Arg *args, size_t nargs, int priority,
                         uint64_t timeout_ms)
{
        uint32_t id;
        msgpack_packer *pk = client_request(c, "job.submit", 3, &id);

        cr_assert(pk);
        ipc_pack_cstr(pk, plugin);
        msgpack_pack_map(pk, (uint32_t)nargs);
        for (size_t i = 0; i < nargs; i++) {
                ipc_pack_cstr(pk, args[i].key);
                if (args[i].s)
                        ipc_pack_cstr(pk, args[i].s);
                else
                        msgpack_pack_int64(pk, args[i].i);
        }
        msgpack_pack_map(pk, (priority ? 1 : 0) + (timeout_ms ? 1 : 0));
        if (priority)
                ipc_pack_kv_int(pk, "priority", priority);
        if (timeout_ms)
                ipc_pack_kv_uint(pk, "timeout_ms", timeout_ms);
        return id;
}

uint64_t rpc_submit(Client *c, const char *plugin, const Arg *args, size_t nargs, int priority,
                    uint64_t timeout_ms, IpcStatus *st)
{
        Reply rp;
        uint64_t id = 0;

        rpc_wait_reply(c, rpc_submit_send(c, plugin, args, nargs, priority, timeout_ms), &rp);
        if (rp.r == 0)
                id = map_uint(rp.result, "id");
        if (st)
                *st = rp.st;
        reply_clear(&rp);
        return id;
}

void rpc_job_wait(Client *c, uint64_t id, int64_t timeout_ms, Reply *rp)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.wait", 2, &msgid);

        cr_assert(pk);
        msgpack_pack_uint64(pk, id);
        if (timeout_ms < 0)
                msgpack_pack_nil(pk);
        else
                msgpack_pack_uint64(pk, (uint64_t)timeout_ms);
        rpc_wait_reply(c, msgid, rp);
}

/* ---------------------------------------------------------------- objects -------- */

const msgpack_object *map_get(const msgpack_object *map, const char *key)
{
        return ipc_map_find(map, key);
}

const char *map_str(const msgpack_object *map, const char *key)
{
        static __thread char buf[1024];
        const msgpack_object *o = ipc_map_find(map, key);

        buf[0] = '\0';
        if (o && o->type == MSGPACK_OBJECT_STR)
                snprintf(buf, sizeof(buf), "%.*s", (int)o->via.str.size, o->via.str.ptr);
        return buf;
}

uint64_t map_uint(const msgpack_object *map, const char *key)
{
        const msgpack_object *o = ipc_map_find(map, key);

        return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : UINT64_MAX;
}

int fiberd_sh(const char *cmd, char *out, size_t size)
{
        FILE *p = popen(cmd, "r");
        size_t n = 0;
        int status;

        cr_assert(p, "popen %s", cmd);
        while (n + 1 < size) {
                size_t got = fread(out + n, 1, size - 1 - n, p);
                if (got == 0)
                        break;
                n += got;
        }
        out[n] = '\0';
        status = pclose(p);
        cr_assert(WIFEXITED(status), "%s: not exited", cmd);
        return WEXITSTATUS(status);
}

uint64_t rpc_stats_jobs(Client *c, const char *key)
{
        const msgpack_object *jobs;
        uint64_t v;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "stats: %s", rp.st.message);
        jobs = map_get(rp.result, "jobs");
        cr_assert(jobs && jobs->type == MSGPACK_OBJECT_MAP, "stats has no jobs map");
        v = map_uint(jobs, key);
        reply_clear(&rp);
        return v;
}

uint64_t rpc_submit_long(Client *c, const char *plugin)
{
        IpcStatus st = {0};
        uint64_t id = rpc_submit(c, plugin, (Arg[]){ARG_I("ms", 600000)}, 1, 0, 0, &st);
        cr_assert_neq(id, 0, "submit %s: %s", plugin, st.message);
        return id;
}

void fiberd_first_log_line(const Fiberd *d, char *buf, size_t size)
{
        FILE *f = fopen(d->log, "r");

        buf[0] = '\0';
        cr_assert(f, "cannot open %s", d->log);
        if (!fgets(buf, (int)size, f))
                buf[0] = '\0';
        fclose(f);
}

void rpc_plugin_listed(Client *c, const char *name, bool *loaded, const char *needle, bool *refused)
{
        const msgpack_object *v;
        Reply rp;

        rpc_simple(c, "plugins.list", 0, NULL, &rp);
        cr_assert(rp.r == 0, "plugins.list: %s", rp.st.message);
        *loaded = *refused = false;
        v = map_get(rp.result, "plugins");
        for (uint32_t i = 0; v && i < v->via.array.size; i++)
                *loaded |= strcmp(map_str(&v->via.array.ptr[i], "name"), name) == 0;
        v = map_get(rp.result, "refused");
        for (uint32_t i = 0; v && i < v->via.array.size; i++)
                *refused |= strstr(map_str(&v->via.array.ptr[i], "reason"), needle) != NULL;
        reply_clear(&rp);
}

void rpc_plugin_hold(Client *c, const char *method, const char *name)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, method, 2, &msgid);
        Reply rp;

        cr_assert(pk, "%s: cannot queue the request", method);
        ipc_pack_cstr(pk, "plugin");
        ipc_pack_cstr(pk, name);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s plugin %s: %s", method, name, rp.st.message);
        reply_clear(&rp);
}

bool fiberd_run_as(uid_t uid, gid_t gid, void (*fn)(const void *arg), const void *arg)
{
        int status;
        pid_t pid = fork();

        cr_assert(pid >= 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
                        perror("dropping privileges");
                        _exit(2);
                }
                if (getuid() != uid || geteuid() != uid || setuid(0) == 0) {
                        fprintf(stderr, "still privileged\n");
                        _exit(2);
                }
                fn(arg);
                _exit(0);
        }
        cr_assert(waitpid(pid, &status, 0) == pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child running as uid %u failed (status 0x%x); see its stderr", (unsigned)uid,
                  status);
        return true;
}
