/* SPDX-License-Identifier: MIT */
/*
 * daemon_lifecycle.c — fiberd as systemd sees it: READY=1, STATUS= and STOPPING=1 arrive
 * on a NOTIFY_SOCKET the test listens on; SIGTERM with jobs running and queued ends with
 * exit status 0, every job in a final state, and clients blocked in job.wait answered
 * with those final states; the socket file is gone afterwards.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
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
        FiberdOpts o = {.config = "[jobs]\nmax_running = 4\n", .notify = true};
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
