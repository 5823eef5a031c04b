/* SPDX-License-Identifier: MIT */
/*
 * daemon_load.c — 100 concurrent clients, each on its own connection and thread,
 * pipelining 100 sha256 jobs and then 100 job.wait calls; every job must end "done"
 * with the digest libcrypto computes for its file. Threads report failures as text;
 * the test thread asserts (criterion's asserts belong to the test's thread).
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CLIENTS 100
#define JOBS 100
#define FILES 4

static Fiberd fd_;
static char paths[FILES][128];
static char digests[FILES][65];

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_load, .fini = teardown, .timeout = 120);

typedef struct Worker {
        pthread_t thread;
        int index;
        char error[320]; /* "" = every job correct */
} Worker;

static void *worker_main(void *arg)
{
        Worker *w = arg;
        uint32_t msgids[JOBS];
        uint64_t ids[JOBS];
        IpcStatus st = {0};
        Client *c;

        if (client_connect(&c, fd_.sock, &st) < 0) {
                snprintf(w->error, sizeof(w->error), "connect: %s", st.message);
                return NULL;
        }
        for (int i = 0; i < JOBS; i++) {
                int f = (w->index + i) % FILES;
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "job.submit", 3, &msgid);

                ipc_pack_cstr(pk, "sha256");
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_cstr(pk, "path", paths[f]);
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_int(pk, "priority", i % 3);
                msgids[i] = msgid;
        }
        for (int i = 0; i < JOBS && !w->error[0]; i++) {
                IpcMessage m;
                const msgpack_object *res;

                if (client_call_wait(c, msgids[i], &m, 30000, &st) != 1) {
                        snprintf(w->error, sizeof(w->error), "submit %d: %s", i, st.message);
                        break;
                }
                if (client_result(&m, &res, &st) < 0)
                        snprintf(w->error, sizeof(w->error), "submit %d: %s", i, st.message);
                else
                        ids[i] = map_uint(res, "id");
                ipc_message_clear(&m);
        }
        for (int i = 0; i < JOBS && !w->error[0]; i++) {
                msgpack_packer *pk = client_request(c, "job.wait", 2, &msgids[i]);
                msgpack_pack_uint64(pk, ids[i]);
                msgpack_pack_uint64(pk, 60000);
        }
        for (int i = 0; i < JOBS && !w->error[0]; i++) {
                int f = (w->index + i) % FILES;
                const msgpack_object *rec;
                IpcMessage m;
                char state[32];

                if (client_call_wait(c, msgids[i], &m, 60000, &st) != 1) {
                        snprintf(w->error, sizeof(w->error), "wait %d: %s", i, st.message);
                        break;
                }
                if (client_result(&m, &rec, &st) < 0) {
                        snprintf(w->error, sizeof(w->error), "wait %d: %s", i, st.message);
                } else {
                        snprintf(state, sizeof(state), "%s", map_str(rec, "state"));
                        if (strcmp(state, "done") != 0)
                                snprintf(w->error, sizeof(w->error), "job %lu is %s",
                                         (unsigned long)ids[i], state);
                        else if (strcmp(map_str(map_get(rec, "result"), "sha256"), digests[f]) != 0)
                                snprintf(w->error, sizeof(w->error), "job %lu: wrong digest",
                                         (unsigned long)ids[i]);
                }
                ipc_message_clear(&m);
        }
        client_free(c);
        return NULL;
}

Test(daemon_load, hundred_clients_hundred_jobs)
{
        static Worker workers[CLIENTS];
        const msgpack_object *jobs;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, NULL);
        for (int f = 0; f < FILES; f++) {
                unsigned char data[4096], md[32];
                unsigned int len;
                size_t n = 1000 * (size_t)f + 7;
                FILE *fp;

                for (size_t i = 0; i < n; i++)
                        data[i] = (unsigned char)(i * 31 + f);
                snprintf(paths[f], sizeof(paths[f]), "%s/file%d", fd_.dir, f);
                fp = fopen(paths[f], "w");
                cr_assert(fp && fwrite(data, 1, n, fp) == n);
                fclose(fp);
                cr_assert(EVP_Digest(data, n, md, &len, EVP_sha256(), NULL));
                for (int i = 0; i < 32; i++)
                        sprintf(digests[f] + 2 * i, "%02x", md[i]);
        }
        for (int i = 0; i < CLIENTS; i++) {
                workers[i].index = i;
                cr_assert(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0);
        }
        for (int i = 0; i < CLIENTS; i++)
                pthread_join(workers[i].thread, NULL);
        for (int i = 0; i < CLIENTS; i++)
                cr_assert_str_eq(workers[i].error, "", "client %d: %s", i, workers[i].error);

        c = fiberd_connect(&fd_);
        rpc_simple(c, "stats", 0, NULL, &rp);
        jobs = map_get(rp.result, "jobs");
        cr_assert_eq(map_uint(jobs, "submitted"), CLIENTS * JOBS);
        cr_assert_eq(map_uint(jobs, "done"), CLIENTS * JOBS);
        reply_clear(&rp);
        client_free(c);
}
