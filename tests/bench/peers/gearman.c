/* SPDX-License-Identifier: MIT */
/*
 * gearman.c — the gearmand peer of the product rows, its own binary
 * (fiberd-bench-gearman) because it links libgearman (Debian `libgearman-dev`); built
 * only where that is installed. The same loads as fiberd's generator (product.h)
 * through gearmand 1.1 (Debian `gearman-job-server`) started with `-t 1` on a free
 * 127.0.0.1 port with its built-in in-memory queue (no persistence).
 *
 *  fiberd-bench-gearman product-gearman tput N C W | rate N RATE
 *
 * The shape of a job, end to end: a client SUBMIT_JOBs "echo" with a small workload
 * ("CONN SEQ"); a worker of this process (libgearman's worker API; each worker its own
 * thread and connection, as many as product.h's PRODUCT_PEER_WORKERS_* say) GRAB_JOBs
 * it and answers WORK_COMPLETE with the workload; the client's completion callback sees
 * the result come back through gearmand and checks it. So the result crosses the server
 * as in fiberd's job.run.
 *
 * tput: one thread per connection with libgearman's task API: W tasks added, then
 * gearman_client_run_tasks(); each completion callback adds the next task, so W stay
 * outstanding. rate: one job per slot of a fixed schedule; libgearman's client blocks
 * while it waits, so 4 client threads take the slots in turn (i mod 4), each sending
 * its job at its time with gearman_client_do() and timing it from that time.
 */
#include <errno.h>
#include <libgearman/gearman.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/bench/bench.h"
#include "tests/bench/product.h"

#define GM_RATE_THREADS 4
#define GM_FUNCTION "echo"

typedef struct GmClient {
        pthread_t thread;
        gearman_client_st *client;
        unsigned index;
        uint64_t jobs, sent, done;
} GmClient;

typedef struct GmWorker {
        pthread_t thread;
        gearman_worker_st *worker;
} GmWorker;

static ProductLoad gm_load;
static unsigned gm_port;
static uint64_t *gm_lat;
static uint64_t gm_start_ns, gm_period_ns;
static volatile int gm_stopping;

static void *gm_echo(gearman_job_st *job, void *context, size_t *result_size,
                     gearman_return_t *ret_ptr)
{
        size_t n = gearman_job_workload_size(job);
        void *out = malloc(n ? n : 1);

        if (!out) {
                *ret_ptr = GEARMAN_WORK_FAIL;
                return NULL;
        }
        memcpy(out, gearman_job_workload(job), n);
        *result_size = n;
        *ret_ptr = GEARMAN_SUCCESS;
        return out;
}

static void *gm_worker_loop(void *arg)
{
        GmWorker *w = arg;

        while (!gm_stopping) {
                gearman_return_t r = gearman_worker_work(w->worker);
                if (r == GEARMAN_SUCCESS || r == GEARMAN_TIMEOUT || r == GEARMAN_NO_JOBS ||
                    r == GEARMAN_IO_WAIT || gm_stopping)
                        continue;
                bench_die("gearman worker: %s", gearman_worker_error(w->worker));
        }
        return NULL;
}

static gearman_client_st *gm_client_new(void)
{
        gearman_client_st *c = gearman_client_create(NULL);

        if (!c || gearman_client_add_server(c, "127.0.0.1", (in_port_t)gm_port) != GEARMAN_SUCCESS)
                bench_die("gearman client: cannot add server");
        return c;
}

static void gm_add_task(GmClient *k)
{
        char work[48];
        int len = snprintf(work, sizeof(work), "%u %llu", k->index, (unsigned long long)k->sent);
        gearman_return_t r;

        gearman_client_add_task(k->client, NULL, k, GM_FUNCTION, NULL, work, (size_t)len, &r);
        if (r != GEARMAN_SUCCESS)
                bench_die("gearman add_task: %s", gearman_client_error(k->client));
        k->sent++;
}

static gearman_return_t gm_complete(gearman_task_st *task)
{
        GmClient *k = gearman_task_context(task);

        if (gearman_task_return(task) != GEARMAN_SUCCESS || gearman_task_data_size(task) == 0)
                bench_die("gearman: a job did not complete with its echo");
        k->done++;
        if (k->sent < k->jobs)
                gm_add_task(k);
        return GEARMAN_SUCCESS;
}

/* tput: W tasks outstanding; the completion callback adds the next one. If a
 * run_tasks() returns with tasks still to send, the loop tops the window up again. */
static void *gm_client_closed_loop(void *arg)
{
        GmClient *k = arg;

        gearman_client_set_complete_fn(k->client, gm_complete);
        while (k->done < k->jobs) {
                gearman_return_t r;
                while (k->sent - k->done < gm_load.window && k->sent < k->jobs)
                        gm_add_task(k);
                r = gearman_client_run_tasks(k->client);
                if (r != GEARMAN_SUCCESS)
                        bench_die("gearman run_tasks: %s", gearman_client_error(k->client));
        }
        return NULL;
}

/* rate: this thread's slots are i = index, index + 4, ... */
static void *gm_client_open_loop(void *arg)
{
        GmClient *k = arg;

        for (uint64_t i = k->index; i < gm_load.jobs; i += GM_RATE_THREADS) {
                uint64_t due = gm_start_ns + i * gm_period_ns;
                char work[48];
                int len = snprintf(work, sizeof(work), "%u %llu", k->index, (unsigned long long)i);
                gearman_return_t r;
                size_t size = 0;
                void *res;
                product_wait_until(due);
                res = gearman_client_do(k->client, GM_FUNCTION, NULL, work, (size_t)len, &size, &r);
                if (r != GEARMAN_SUCCESS || size != (size_t)len)
                        bench_die("gearman do: %s", gearman_client_error(k->client));
                gm_lat[i] = bench_now_ns() - due;
                free(res);
        }
        return NULL;
}

int main(int argc, char **argv)
{
        ProductServer srv = {0};
        unsigned nclients, nworkers;
        GmClient *clients;
        GmWorker *workers;
        uint64_t t0, t1, cpu0, cpu1;

        if (argc < 2 || strcmp(argv[1], "product-gearman"))
                bench_die("usage: fiberd-bench-gearman product-gearman tput N C W | rate N RATE");
        product_parse(&gm_load, argc - 1, argv + 1, false);
        nclients = gm_load.mode == PRODUCT_RATE ? GM_RATE_THREADS : gm_load.conns;
        nworkers = gm_load.workers;
        clients = calloc(nclients, sizeof(*clients));
        workers = calloc(nworkers, sizeof(*workers));
        if (!clients || !workers)
                bench_die("out of memory");
        if (gm_load.mode == PRODUCT_RATE) {
                if (!(gm_lat = calloc(gm_load.jobs, sizeof(*gm_lat))))
                        bench_die("out of memory");
                gm_period_ns = NSEC_PER_SEC / gm_load.rate;
        }
        product_start_gearmand(&srv);
        gm_port = srv.port;
        for (unsigned i = 0; i < nworkers; i++) {
                gearman_worker_st *w = gearman_worker_create(NULL);
                if (!w || gearman_worker_add_server(w, "127.0.0.1", (in_port_t)gm_port) != 0 ||
                    gearman_worker_add_function(w, GM_FUNCTION, 0, gm_echo, NULL) != 0)
                        bench_die("gearman worker: cannot register " GM_FUNCTION);
                gearman_worker_set_timeout(w, 100);
                workers[i].worker = w;
                if (pthread_create(&workers[i].thread, NULL, gm_worker_loop, &workers[i]))
                        bench_die("pthread_create failed");
        }
        for (unsigned i = 0; i < nclients; i++) {
                clients[i].client = gm_client_new();
                clients[i].index = i;
                clients[i].jobs = gm_load.jobs / nclients + (i < gm_load.jobs % nclients);
                gearman_client_add_options(clients[i].client, GEARMAN_CLIENT_FREE_TASKS);
        }

        cpu0 = product_cpu_ns(srv.pid);
        t0 = bench_now_ns();
        gm_start_ns = t0 + NSEC_PER_MSEC;
        for (unsigned i = 0; i < nclients; i++)
                if (pthread_create(&clients[i].thread, NULL,
                                   gm_load.mode == PRODUCT_RATE ? gm_client_open_loop
                                                                : gm_client_closed_loop,
                                   &clients[i]))
                        bench_die("pthread_create failed");
        for (unsigned i = 0; i < nclients; i++)
                pthread_join(clients[i].thread, NULL);
        t1 = bench_now_ns();
        cpu1 = product_cpu_ns(srv.pid);

        gm_stopping = 1;
        for (unsigned i = 0; i < nworkers; i++) {
                pthread_join(workers[i].thread, NULL);
                gearman_worker_free(workers[i].worker);
        }
        for (unsigned i = 0; i < nclients; i++)
                gearman_client_free(clients[i].client);
        product_stop(&srv);
        product_report(&gm_load, t1 - t0, cpu1 - cpu0, gm_lat);
        free(gm_lat);
        free(workers);
        free(clients);
        return 0;
}
