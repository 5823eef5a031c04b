/* SPDX-License-Identifier: MIT */
/*
 * bench-hash.c — row 27: fiberd's main job, hashing a tree (`make demo`,
 * daemon/demo.sh), against the command a user would type instead.
 *
 *  hash-tree DIR [MAXFILES]        the demo's path: a fresh fiberd (this tree's, bundled
 *                                  plugins, default settings but for log_jobs (off, as
 *                                  the demo has it; log level warning here): the sqlite
 *                                  job store), one sha256 job per regular file through
 *                                  `fiberctl --json batch --wait --window 1024`, results
 *                                  to a file
 *  hash-tree-xargs DIR [MAXFILES]  xargs -0 -P<online CPUs> -n 500 sha256sum, the list on
 *                                  its stdin, the digests to a file
 *
 * Both print "MB_per_s seconds cpu_seconds": the bytes of the files (their st_size) over
 * the wall time of the timed pass, that time, and the CPU time (user + system) it took:
 * fiberctl's and fiberd's, or xargs' and its sha256sum children's. On a shared machine
 * the CPU time moves much less than the wall time. Before it, each side makes one untimed pass over the same files, so
 * both hash a warm page cache, and the file list is made before the clock starts (an
 * nftw() walk without following symbolic links, like `find DIR -type f`; the first
 * MAXFILES files when given: the smoke run takes 500), so neither side times the walk.
 * A pass that does not answer one "done" record (fiberd) or one digest line (xargs) per
 * file fails the figure: a fast wrong answer is not a measurement.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/bench/bench.h"
#include "tests/bench/product.h"

#define HASH_WINDOW "1024" /* demo.sh's DEMO_WINDOW */

/* The walk's state: nftw() has no user pointer. */
static FILE *hash_jobs, *hash_list;
static uint64_t hash_files, hash_bytes, hash_max_files;

static int hash_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (flag != FTW_F || !S_ISREG(st->st_mode))
                return 0;
        if (hash_max_files && hash_files >= hash_max_files)
                return 1; /* stops the walk */
        /* the demo's JSON Lines spec: {"plugin": "sha256", "args": {"path": "..."}} */
        fputs("{\"plugin\": \"sha256\", \"args\": {\"path\": \"", hash_jobs);
        for (const char *p = path; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fputc('\\', hash_jobs);
                if ((unsigned char)*p < 0x20)
                        fprintf(hash_jobs, "\\u%04x", (unsigned)(unsigned char)*p);
                else
                        fputc(*p, hash_jobs);
        }
        fputs("\"}}\n", hash_jobs);
        fwrite(path, 1, strlen(path) + 1, hash_list);
        hash_files++;
        hash_bytes += (uint64_t)st->st_size;
        return 0;
}

/* Writes @dir/jobs.jsonl and @dir/files0 (NUL-separated paths) for the tree @root. */
static void hash_list_files(const char *dir, const char *root)
{
        char jobs[128], list[128];

        snprintf(jobs, sizeof(jobs), "%s/jobs.jsonl", dir);
        snprintf(list, sizeof(list), "%s/files0", dir);
        hash_jobs = fopen(jobs, "we");
        hash_list = fopen(list, "we");
        if (!hash_jobs || !hash_list)
                bench_die("cannot write the file lists in %s: %s", dir, strerror(errno));
        if (nftw(root, hash_visit, 64, FTW_PHYS) < 0)
                bench_die("cannot walk %s: %s", root, strerror(errno));
        if (fclose(hash_jobs) != 0 || fclose(hash_list) != 0)
                bench_die("cannot write the file lists in %s", dir);
        if (!hash_files)
                bench_die("no regular files under %s", root);
}

static uint64_t timeval_ns(struct timeval tv)
{
        return (uint64_t)tv.tv_sec * NSEC_PER_SEC + (uint64_t)tv.tv_usec * NSEC_PER_USEC;
}

/* Runs @argv (execvp) with stdin from @in and stdout to @out; dies unless it exits 0.
 * Return: the CPU time (user + system, ns) of it and of the children it waited for. */
static uint64_t hash_run(char *const argv[], const char *in, const char *out)
{
        struct rusage ru;
        int status;
        pid_t pid;

        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0)
                bench_die("fork: %s", strerror(errno));
        if (pid == 0) {
                int i = open(in, O_RDONLY | O_CLOEXEC);
                int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (i < 0 || o < 0 || dup2(i, STDIN_FILENO) < 0 || dup2(o, STDOUT_FILENO) < 0)
                        _exit(126);
                execvp(argv[0], argv);
                fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        while (wait4(pid, &status, 0, &ru) < 0)
                if (errno != EINTR)
                        bench_die("wait4: %s", strerror(errno));
        if (!WIFEXITED(status) || WEXITSTATUS(status))
                bench_die("%s exited with status 0x%x", argv[0], status);
        return timeval_ns(ru.ru_utime) + timeval_ns(ru.ru_stime);
}

/* The lines of @path that contain @needle (NULL: every line). */
static uint64_t hash_count_lines(const char *path, const char *needle)
{
        FILE *f = fopen(path, "re");
        char *line = NULL;
        size_t cap = 0;
        uint64_t n = 0;

        if (!f)
                bench_die("cannot read %s: %s", path, strerror(errno));
        while (getline(&line, &cap, f) > 0)
                n += !needle || strstr(line, needle);
        free(line);
        fclose(f);
        return n;
}

/* Two passes of @argv (the first untimed), each checked to answer one line holding
 * @needle per file; prints the figure. @server: a process whose CPU time counts too (the
 * fiberd), 0 for none. */
static void hash_measure(char *const argv[], const char *in, const char *out, const char *needle,
                         pid_t server)
{
        uint64_t t0 = 0, t1 = 0, cpu = 0;

        for (int pass = 0; pass < 2; pass++) {
                uint64_t got, server0 = server ? product_cpu_ns(server) : 0;
                t0 = bench_now_ns();
                cpu = hash_run(argv, in, out);
                t1 = bench_now_ns();
                cpu += server ? product_cpu_ns(server) - server0 : 0;
                got = hash_count_lines(out, needle);
                if (got != hash_files)
                        bench_die("%s answered %llu of %llu files", argv[0],
                                  (unsigned long long)got, (unsigned long long)hash_files);
        }
        double s = (double)(t1 - t0) / (double)NSEC_PER_SEC;
        fprintf(stderr, "fiberd-bench: %llu files, %.1f MB in %.3f s, %.3f s of CPU\n",
                (unsigned long long)hash_files, (double)hash_bytes / 1e6, s,
                (double)cpu / (double)NSEC_PER_SEC);
        printf("%.1f %.3f %.3f\n", (double)hash_bytes / 1e6 / s, s,
               (double)cpu / (double)NSEC_PER_SEC);
}

static const char *hash_args(int argc, char **argv)
{
        if (argc < 2)
                bench_die("usage: %s DIR [MAXFILES]", argv[0]);
        hash_max_files = argc > 2 ? bench_parse_count(argv[2], 0) : 0;
        return argv[1];
}

int bench_hash_tree(int argc, char **argv)
{
        const char *root = hash_args(argc, argv);
        ProductServer srv = {0};
        char in[128], out[128];
        char *ctl[] = {(char *)product_fiberctl_path(),
                       "--json",
                       "batch",
                       "--wait",
                       "--window",
                       HASH_WINDOW,
                       NULL};

        unsetenv("FIBERD_BENCH_STORE"); /* the demo's fiberd: default settings */
        product_start_fiberd(&srv);
        hash_list_files(srv.dir, root);
        snprintf(in, sizeof(in), "%s/jobs.jsonl", srv.dir);
        snprintf(out, sizeof(out), "%s/results.jsonl", srv.dir);
        setenv("FIBERD_SOCKET", srv.socket, 1);
        hash_measure(ctl, in, out, "\"state\":\"done\"", srv.pid);
        product_stop(&srv);
        return 0;
}

int bench_hash_tree_xargs(int argc, char **argv)
{
        const char *root = hash_args(argc, argv);
        ProductServer tmp = {0};
        char in[128], out[128], procs[24];
        char *xargs[] = {"xargs", "-0", "-P", procs, "-n", "500", "sha256sum", NULL};

        snprintf(procs, sizeof(procs), "%ld", sysconf(_SC_NPROCESSORS_ONLN));
        product_tmpdir(&tmp);
        hash_list_files(tmp.dir, root);
        snprintf(in, sizeof(in), "%s/files0", tmp.dir);
        snprintf(out, sizeof(out), "%s/sums", tmp.dir);
        hash_measure(xargs, in, out, NULL, 0);
        product_stop(&tmp);
        return 0;
}
