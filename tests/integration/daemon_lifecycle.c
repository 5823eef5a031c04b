/* SPDX-License-Identifier: MIT */
/*
 * daemon_lifecycle.c — fiberd as systemd sees it: READY=1, STATUS= and STOPPING=1 arrive
 * on a NOTIFY_SOCKET the test listens on; SIGTERM with jobs running and queued ends with
 * exit status 0, every job in a final state, and clients blocked in job.wait answered
 * with those final states; the socket file is gone afterwards.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_lifecycle, .fini = teardown, .timeout = 60);

Test(daemon_lifecycle, notify_ready_status_stopping)
{
        FiberdOpts o = {.notify = true};
        int status;

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000), "no READY=1");
        cr_assert(fiberd_notify_wait(&fd_, "STATUS=", 10000), "no STATUS=");
        cr_assert(fiberd_notify_wait(&fd_, "running", 10000), "STATUS= without a summary");
        kill(fd_.pid, SIGTERM);
        cr_assert(fiberd_notify_wait(&fd_, "STOPPING=1", 10000), "no STOPPING=1");
        status = fiberd_signal_and_wait(&fd_, 0, 15000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
}

#define RUNNING 4
#define QUEUED 6

Test(daemon_lifecycle, sigterm_with_jobs_running)
{
        /* the memory store: every job ends at SIGTERM (daemon_store.c has the durable
         * store, where queued jobs stay queued) */
        FiberdOpts o = {.config = "[jobs]\nmax_running = 4\n[store]\nbackend = memory\n",
                        .notify = true};
        uint64_t ids[RUNNING + QUEUED];
        uint32_t waits[RUNNING + QUEUED];
        IpcStatus st;
        struct stat sb;
        Client *c;
        int status;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < RUNNING + QUEUED; i++) {
                const char *plugin = i % 2 ? "spin" : "sleep";
                ids[i] = rpc_submit(c, plugin, (Arg[]){ARG_I("ms", 600000)}, 1, 0, 0, &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        /* every job has a job.wait in flight (no timeout) when the signal comes */
        for (int i = 0; i < RUNNING + QUEUED; i++) {
                msgpack_packer *pk = client_request(c, "job.wait", 2, &waits[i]);
                msgpack_pack_uint64(pk, ids[i]);
                msgpack_pack_nil(pk);
        }
        cr_assert_eq(client_flush(c, 10000, &st), 0);
        /* wait until the first RUNNING are running (bounded), then stop fiberd */
        for (int tries = 0;; tries++) {
                Client *probe = fiberd_connect(&fd_);
                Reply rp;
                uint64_t running;

                rpc_simple(probe, "stats", 0, NULL, &rp);
                running = map_uint(map_get(rp.result, "jobs"), "running");
                reply_clear(&rp);
                client_free(probe);
                if (running == RUNNING)
                        break;
                cr_assert(tries < 1000, "jobs did not start");
                usleep(10000);
        }
        kill(fd_.pid, SIGTERM);
        cr_assert(fiberd_notify_wait(&fd_, "STOPPING=1", 10000));
        for (int i = 0; i < RUNNING + QUEUED; i++) {
                Reply rp;
                rpc_wait_reply(c, waits[i], &rp);
                cr_assert_eq(rp.r, 0, "job.wait %d: %s", i, rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "cancelled", "job %lu",
                                 (unsigned long)ids[i]);
                reply_clear(&rp);
        }
        status = fiberd_signal_and_wait(&fd_, 0, 15000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        cr_assert(stat(fd_.sock, &sb) < 0, "the socket file is left behind");
        cr_assert(fiberd_log_contains(&fd_, "fiberd stopped"));
        /* every job ended within the grace period, so the plugins' fini() ran */
        cr_assert(!fiberd_log_contains(&fd_, "without calling the plugins' fini()"));
        client_free(c);
}

Test(daemon_lifecycle, second_instance_refused)
{
        char cmd[512];
        int status;

        fiberd_start(&fd_, NULL);
        snprintf(cmd, sizeof(cmd), "FIBERD_SOCKET=%s %s --plugin-dir %s 2>/dev/null", fd_.sock,
                 FIBERD_BIN, fd_.plugin_dir);
        status = system(cmd);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0,
                  "a second fiberd on a live socket must refuse to start");
}

/* A config error names the file and line and exits with EX_CONFIG (78). */
Test(daemon_lifecycle, bad_config_exits_78)
{
        char dir[] = "/tmp/fiberd-conf-XXXXXX", conf[64], cmd[512], out[1024] = "";
        FILE *f;
        int status;

        cr_assert(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/bad.conf", dir);
        f = fopen(conf, "w");
        fputs("[jobs]\nmax_running = 4\nmax_runing = 5\n", f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "%s --config %s --socket %s/s 2>&1", FIBERD_BIN, conf, dir);
        f = popen(cmd, "r");
        cr_assert(f);
        fread(out, 1, sizeof(out) - 1, f);
        status = pclose(f);
        unlink(conf);
        rmdir(dir);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 78, "status 0x%x: %s", status, out);
        cr_assert(strstr(out, "bad.conf:3") && strstr(out, "max_runing"), "%s", out);
        cr_assert_eq(out[0], '<', "log lines carry a <N> priority prefix: %s", out);
}

/* The command line wins over the config file; the log shows it. */
Test(daemon_lifecycle, flags_win_over_config)
{
        FiberdOpts o = {.config = "[fiberd]\nworkers = 3\n", .workers = 1};
        Client *c;
        Reply rp;
        const msgpack_object *groups;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        rpc_simple(c, "stats", 0, NULL, &rp);
        groups = map_get(rp.result, "groups");
        cr_assert_eq(groups->via.array.size, 2, "one job group for one worker");
        cr_assert_str_eq(map_str(&groups->via.array.ptr[1], "name"), "jobs-0");
        cr_assert_eq(map_uint(&groups->via.array.ptr[1], "workers"), 1);
        reply_clear(&rp);
        client_free(c);
        cr_assert(fiberd_log_contains(&fd_, "<6>fiberd "), "no <6> info line at start");
}

/* Socket activation: systemd-socket-activate passes a listening socket (LISTEN_FDS). */
Test(daemon_lifecycle, socket_activation)
{
        char dir[] = "/tmp/fiberd-act-XXXXXX", sock[64], env[96],
             plugins[] = FIBERD_PLUGIN_BUILD_DIR;
        IpcStatus st = {0};
        Client *c = NULL;
        Reply rp;
        pid_t pid;
        int status;

        if (access("/usr/bin/systemd-socket-activate", X_OK) != 0)
                cr_skip_test("systemd-socket-activate is not installed");
        cr_assert(mkdtemp(dir));
        snprintf(sock, sizeof(sock), "%s/act.sock", dir);
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY);
                dup2(fd, 2);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                unsetenv("NOTIFY_SOCKET");
                /* its job store: not /var/lib/fiberd (systemd-socket-activate passes
                 * only the environment it is told to) */
                snprintf(env, sizeof(env), "STATE_DIRECTORY=%s", dir);
                /* fiberd must not bind: a bogus --socket proves it used the passed fd */
                execl("/usr/bin/systemd-socket-activate", "systemd-socket-activate", "-l", sock,
                      "-E", env, FIBERD_BIN, "--socket", "/nonexistent/dir/x.sock", "--plugin-dir",
                      plugins, (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 1000 && !c; i++) {
                if (client_connect(&c, sock, &st) < 0) {
                        c = NULL;
                        usleep(10000);
                }
        }
        cr_assert(c, "cannot connect to %s: %s", sock, st.message);
        rpc_simple(c, "ping", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "ping through the activated socket: %s", rp.st.message);
        reply_clear(&rp);
        client_free(c);
        kill(pid, SIGTERM);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        unlink(sock);
        snprintf(sock, sizeof(sock), "%s/jobs.db", dir);
        unlink(sock);
        rmdir(dir);
}
