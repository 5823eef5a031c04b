/* SPDX-License-Identifier: MIT */
/*
 * daemon_creds.c — jobs act with their submitter's rights: fiberd runs
 * as root (the test runs as root), a client connects as uid 65534 ("nobody": a forked
 * child that drops every group and id before it connects), and the bundled sha256
 * plugin, which opens paths through host->open, must
 *  - answer PERMISSION_DENIED for /etc/shadow (root-only) and the right digest for the
 *    user's own 0600 file;
 *  - hash a file the client opened itself and passed as an fd (SCM_RIGHTS);
 *  - answer INVALID_ARGUMENT for a FIFO, without blocking the one job worker: a job
 *    submitted after two FIFO jobs still finishes;
 *  - hash a passed fd whole whatever its offset, refuse one not open for reading
 *    (O_PATH, O_WRONLY) at submit, and fail a symlink loop INVALID_ARGUMENT;
 *  - answer PERMISSION_DENIED for fiberd's own /proc entries (/proc/self,
 *    /proc/thread-self, /proc/<fiberd's pid>) to a user, and the user's own process.
 * Root's own jobs open a cached path on the root mount in their worker, not on an opener
 * thread, where the root file system allows it (stats.opens); a file on another mount
 * still goes to an opener, and a FIFO is still refused.
 * Access tiers (item 2): every user reads its own jobs and submits by default; another
 * user's job id answers NOT_FOUND worded as for an id that never existed; a negative
 * priority, and other users' jobs, need the admin tier; [access] submit_group and
 * admin_group move users between tiers; PERMISSION_DENIED names the tier.
 * The child reports through its exit status (0 = every check held; else it printed the
 * failed check), which the test asserts; every wait is a bounded job.wait.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534
#define WAIT_MS 20000

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_creds, .fini = teardown, .timeout = 60);

static void sha256_hex_of(const char *path, char out[65])
{
        unsigned char md[EVP_MAX_MD_SIZE], buf[4096];
        unsigned len = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        FILE *f = fopen(path, "rb");
        size_t n;

        cr_assert(ctx && f);
        EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                EVP_DigestUpdate(ctx, buf, n);
        EVP_DigestFinal_ex(ctx, md, &len);
        for (unsigned i = 0; i < len; i++)
                sprintf(out + 2 * i, "%02x", md[i]);
        fclose(f);
        EVP_MD_CTX_free(ctx);
}

typedef struct Files {
        char own[192];  /* 0600, owned by NOBODY */
        char fifo[192]; /* 0666 */
        char digest[65];
} Files;

/* A temporary directory others may enter (the socket lives there), with the files. */
static void setup_files(Files *f)
{
        int fd;

        cr_assert(chmod(fd_.dir, 0755) == 0);
        snprintf(f->own, sizeof(f->own), "%s/own", fd_.dir);
        snprintf(f->fifo, sizeof(f->fifo), "%s/fifo", fd_.dir);
        fd = open(f->own, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert(fd >= 0);
        cr_assert(write(fd, "nobody's own data\n", 18) == 18);
        close(fd);
        cr_assert(chown(f->own, NOBODY, NOBODY) == 0);
        cr_assert(mkfifo(f->fifo, 0666) == 0);
        cr_assert(chmod(f->fifo, 0666) == 0);
        sha256_hex_of(f->own, f->digest);
}

/* The final record of job @id: its state, and the error code when it has one. */
static void job_final(Client *c, uint64_t id, char state[16], char code[32])
{
        Reply rp;
        const msgpack_object *err;

        rpc_job_wait(c, id, WAIT_MS, &rp);
        CHECK(rp.r == 0, "job.wait %llu: %s", (unsigned long long)id, rp.st.message);
        snprintf(state, 16, "%s", map_str(rp.result, "state"));
        err = map_get(rp.result, "error");
        snprintf(code, 32, "%s",
                 err && err->type == MSGPACK_OBJECT_MAP ? map_str(err, "code") : "");
        reply_clear(&rp);
}

static uint64_t submit_path(Client *c, const char *path)
{
        IpcStatus st = {0};
        uint64_t id = rpc_submit(c, "sha256", (Arg[]){ARG_S("path", path)}, 1, 0, 0, &st);

        CHECK(id != 0, "submit sha256 %s: %s", path, st.message);
        return id;
}

static void nobody_checks(const void *arg)
{
        const Files *f = arg;
        Client *c = fiberd_connect(&fd_);
        char state[16], code[32];
        uint64_t fifo1, fifo2, after;
        Reply rp;

        /* root's file: refused as the user, although fiberd is root */
        job_final(c, submit_path(c, "/etc/shadow"), state, code);
        CHECK(strcmp(state, "failed") == 0 && strcmp(code, "PERMISSION_DENIED") == 0,
              "/etc/shadow: %s %s", state, code);

        /* the user's own 0600 file: the right digest */
        {
                uint64_t id = submit_path(c, f->own);
                rpc_job_wait(c, id, WAIT_MS, &rp);
                CHECK(rp.r == 0, "%s", rp.st.message);
                CHECK(strcmp(map_str(rp.result, "state"), "done") == 0, "own file: %s",
                      map_str(rp.result, "state"));
                CHECK(strcmp(map_str(map_get(rp.result, "result"), "sha256"), f->digest) == 0,
                      "digest %s, want %s", map_str(map_get(rp.result, "result"), "sha256"),
                      f->digest);
                reply_clear(&rp);
        }

        /* the same file opened by the client and passed as an fd */
        {
                static const char fd0[4] = {0, 0, 0, 0};
                int fd = open(f->own, O_RDONLY | O_CLOEXEC);
                uint32_t msgid;
                msgpack_packer *pk;
                uint64_t id;

                CHECK(fd >= 0, "open %s: %s", f->own, strerror(errno));
                CHECK(client_request_fds(c, &fd, 1) == 0, "client_request_fds");
                pk = client_request(c, "job.submit", 3, &msgid);
                ipc_pack_cstr(pk, "sha256");
                msgpack_pack_map(pk, 1);
                ipc_pack_cstr(pk, "path");
                msgpack_pack_ext(pk, 4, IPC_EXT_FD);
                msgpack_pack_ext_body(pk, fd0, 4);
                msgpack_pack_nil(pk);
                rpc_wait_reply(c, msgid, &rp);
                close(fd);
                CHECK(rp.r == 0, "submit with an fd: %s", rp.st.message);
                id = map_uint(rp.result, "id");
                reply_clear(&rp);
                rpc_job_wait(c, id, WAIT_MS, &rp);
                CHECK(rp.r == 0, "%s", rp.st.message);
                CHECK(strcmp(map_str(map_get(rp.result, "result"), "sha256"), f->digest) == 0,
                      "passed fd: state %s digest %s", map_str(rp.result, "state"),
                      map_str(map_get(rp.result, "result"), "sha256"));
                reply_clear(&rp);
        }

        /* an fd argument with no fd sent: refused, and the connection still answers */
        {
                static const char fd0[4] = {0, 0, 0, 0};
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "job.submit", 3, &msgid);

                ipc_pack_cstr(pk, "sha256");
                msgpack_pack_map(pk, 1);
                ipc_pack_cstr(pk, "path");
                msgpack_pack_ext(pk, 4, IPC_EXT_FD);
                msgpack_pack_ext_body(pk, fd0, 4);
                msgpack_pack_nil(pk);
                rpc_wait_reply(c, msgid, &rp);
                CHECK(rp.r < 0 && strcmp(rp.st.code, "INVALID_ARGUMENT") == 0,
                      "fd argument without an fd: %d %s", rp.r, rp.st.message);
                reply_clear(&rp);
        }

        /* two FIFO jobs on the one worker, then one more job: all end, none blocks */
        fifo1 = submit_path(c, f->fifo);
        fifo2 = submit_path(c, f->fifo);
        after = submit_path(c, f->own);
        job_final(c, fifo1, state, code);
        CHECK(strcmp(code, "INVALID_ARGUMENT") == 0, "FIFO: %s %s", state, code);
        job_final(c, fifo2, state, code);
        CHECK(strcmp(code, "INVALID_ARGUMENT") == 0, "FIFO: %s %s", state, code);
        job_final(c, after, state, code);
        CHECK(strcmp(state, "done") == 0, "the job after the FIFOs: %s %s", state, code);
        client_free(c);
}

Test(daemon_creds, a_user_reads_only_what_the_user_may)
{
        Files f;

        cr_assert(geteuid() == 0, "this test needs root: fiberd must run as root");
        fiberd_start(&fd_, &(FiberdOpts){.plugins = "sha256 echo", .workers = 1});
        setup_files(&f);
        fiberd_run_as(NOBODY, NOBODY, nobody_checks, &f);
        /* and root still reads root's file */
        {
                Client *c = fiberd_connect(&fd_);
                char state[16], code[32];
                job_final(c, submit_path(c, "/etc/shadow"), state, code);
                cr_assert_str_eq(state, "done", "root's /etc/shadow: %s %s", state, code);
                client_free(c);
        }
}

/* job.submit sha256 {"path": <the passed @fd>}: the reply into @rp (the caller clears). */
static void submit_passed_fd(Client *c, int fd, Reply *rp)
{
        static const char fd0[4] = {0, 0, 0, 0};
        uint32_t msgid;
        msgpack_packer *pk;

        CHECK(client_request_fds(c, &fd, 1) == 0, "client_request_fds");
        pk = client_request(c, "job.submit", 3, &msgid);
        ipc_pack_cstr(pk, "sha256");
        msgpack_pack_map(pk, 1);
        ipc_pack_cstr(pk, "path");
        msgpack_pack_ext(pk, 4, IPC_EXT_FD);
        msgpack_pack_ext_body(pk, fd0, 4);
        msgpack_pack_nil(pk);
        rpc_wait_reply(c, msgid, rp);
}

/*
 * A passed fd is hashed whole, whatever its offset (and its offset stays); one not open
 * for reading (O_PATH, O_WRONLY) is refused at submit with INVALID_ARGUMENT naming the
 * problem; a path that loops fails INVALID_ARGUMENT, not INTERNAL.
 */
Test(daemon_creds, sha256_reads_a_passed_fd_whole_and_names_what_it_cannot_read)
{
        char path[256], loop_a[256], loop_b[256], digest[65], state[16], code[32];
        Client *c;
        Reply rp;
        int fd;

        fiberd_start(&fd_, &(FiberdOpts){.plugins = "sha256 echo"});
        snprintf(path, sizeof(path), "%s/data", fd_.dir);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        cr_assert(fd >= 0);
        cr_assert(write(fd, "the whole file, not its tail\n", 29) == 29);
        close(fd);
        sha256_hex_of(path, digest);
        c = fiberd_connect(&fd_);

        /* read 10 bytes first: the fd's offset is 10 */
        {
                char head[10];
                uint64_t id;

                fd = open(path, O_RDONLY | O_CLOEXEC);
                cr_assert(fd >= 0 && read(fd, head, sizeof(head)) == 10);
                submit_passed_fd(c, fd, &rp);
                cr_assert(rp.r == 0, "submit: %s", rp.st.message);
                id = map_uint(rp.result, "id");
                reply_clear(&rp);
                rpc_job_wait(c, id, WAIT_MS, &rp);
                cr_assert(rp.r == 0, "%s", rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                cr_assert_str_eq(map_str(map_get(rp.result, "result"), "sha256"), digest,
                                 "the digest of the tail");
                cr_assert_eq(map_uint(map_get(rp.result, "result"), "bytes"), 29);
                reply_clear(&rp);
                cr_assert_eq(lseek(fd, 0, SEEK_CUR), 10, "the client's offset moved");
                close(fd);
        }

        /* O_PATH and O_WRONLY: refused at submit, naming the problem */
        {
                static const int modes[] = {O_PATH, O_WRONLY};
                static const char *const names[] = {"O_PATH", "O_WRONLY"};

                for (int i = 0; i < 2; i++) {
                        fd = open(path, modes[i] | O_CLOEXEC);
                        cr_assert(fd >= 0);
                        submit_passed_fd(c, fd, &rp);
                        close(fd);
                        cr_assert(rp.r < 0, "%s: accepted", names[i]);
                        cr_assert_str_eq(rp.st.code, "INVALID_ARGUMENT", "%s: %s", names[i],
                                         rp.st.message);
                        cr_assert(strstr(rp.st.message, "not open for reading") &&
                                          strstr(rp.st.message, names[i]),
                                  "%s: %s", names[i], rp.st.message);
                        reply_clear(&rp);
                }
        }

        /* a symbolic link loop */
        snprintf(loop_a, sizeof(loop_a), "%s/loop-a", fd_.dir);
        snprintf(loop_b, sizeof(loop_b), "%s/loop-b", fd_.dir);
        cr_assert(symlink(loop_b, loop_a) == 0 && symlink(loop_a, loop_b) == 0);
        {
                uint64_t id = submit_path(c, loop_a);
                const msgpack_object *err;

                rpc_job_wait(c, id, WAIT_MS, &rp);
                cr_assert(rp.r == 0, "%s", rp.st.message);
                snprintf(state, sizeof(state), "%s", map_str(rp.result, "state"));
                err = map_get(rp.result, "error");
                cr_assert(err && err->type == MSGPACK_OBJECT_MAP, "no error: %s", state);
                snprintf(code, sizeof(code), "%s", map_str(err, "code"));
                cr_assert_str_eq(code, "INVALID_ARGUMENT", "a loop: %s %s", state,
                                 map_str(err, "message"));
                cr_assert(strstr(map_str(err, "message"), "too many levels of symbolic links"),
                          "%s", map_str(err, "message"));
                reply_clear(&rp);
        }
        client_free(c);
}

/* What nobody's sha256 jobs get for /proc paths: fiberd's own process is refused under
 * each of its names; the user's own process (the child's pid) is the user's. */
static void proc_checks(const void *arg)
{
        const pid_t *fiberd_pid = arg;
        Client *c = fiberd_connect(&fd_);
        char paths[5][64], own[64], state[16], code[32];

        snprintf(paths[0], sizeof(paths[0]), "/proc/self/status");
        snprintf(paths[1], sizeof(paths[1]), "/proc/self/maps");
        snprintf(paths[2], sizeof(paths[2]), "/proc/thread-self/status");
        snprintf(paths[3], sizeof(paths[3]), "/proc/%d/maps", (int)*fiberd_pid);
        snprintf(paths[4], sizeof(paths[4]), "/proc/%d/environ", (int)*fiberd_pid);
        for (int i = 0; i < 5; i++) {
                job_final(c, submit_path(c, paths[i]), state, code);
                CHECK(strcmp(state, "failed") == 0 && strcmp(code, "PERMISSION_DENIED") == 0,
                      "%s: %s %s", paths[i], state, code);
        }
        snprintf(own, sizeof(own), "/proc/%d/status", (int)getpid());
        job_final(c, submit_path(c, own), state, code);
        CHECK(strcmp(state, "done") == 0, "the user's own %s: %s %s", own, state, code);
        client_free(c);
}

/* Whether fiberd should open inline here, worked out as opener.h says: the root mount's
 * file system opens without asking a server, and the kernel knows RESOLVE_CACHED. */
static bool inline_expected(void)
{
        static const long local[] = {EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, BTRFS_SUPER_MAGIC,
                                     F2FS_SUPER_MAGIC, TMPFS_MAGIC};
        struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                               .resolve = RESOLVE_CACHED | RESOLVE_NO_XDEV};
        struct statfs sfs;
        bool known = false;
        int fd;

        cr_assert(statfs("/", &sfs) == 0);
        for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
                known |= (long)sfs.f_type == local[i];
        if (!known)
                return false;
        fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        if (fd < 0)
                return errno == EAGAIN;
        close(fd);
        return true;
}

/* The mount @path's file is on (statx's mount id), 0 when it cannot be told. */
static uint64_t mount_of(const char *path)
{
        struct statx stx;

        if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
                return 0;
        return stx.stx_mnt_id;
}

typedef struct Opens {
        bool enabled;
        uint64_t in_worker, by_opener;
} Opens;

static Opens opens_now(Client *c)
{
        const msgpack_object *o, *e;
        Opens v;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "stats: %s", rp.st.message);
        o = map_get(rp.result, "opens");
        e = map_get(o, "inline_enabled");
        cr_assert(e && e->type == MSGPACK_OBJECT_BOOLEAN, "stats has no opens.inline_enabled");
        v = (Opens){e->via.boolean, map_uint(o, "inline"), map_uint(o, "opener")};
        reply_clear(&rp);
        return v;
}

/* sha256 of @path as the test's client (root); its final state and error code. */
static void hash_as_root(Client *c, const char *path, char state[16], char code[32],
                         char digest[65])
{
        Reply rp;
        const msgpack_object *err;

        rpc_job_wait(c, submit_path(c, path), WAIT_MS, &rp);
        cr_assert_eq(rp.r, 0, "job.wait: %s", rp.st.message);
        snprintf(state, 16, "%s", map_str(rp.result, "state"));
        err = map_get(rp.result, "error");
        snprintf(code, 32, "%s",
                 err && err->type == MSGPACK_OBJECT_MAP ? map_str(err, "code") : "");
        snprintf(digest, 65, "%s", map_str(map_get(rp.result, "result"), "sha256"));
        reply_clear(&rp);
}

/*
 * Root's jobs on a root fiberd have fiberd's own identity, so a read-only open of a cached
 * path on the root mount is done in the job's worker (opener.h, "Inline opens"), where the
 * root mount's file system allows it; a file on another mount goes to an opener thread;
 * a FIFO is refused either way, without blocking the one job worker.
 */
Test(daemon_creds, root_opens_inline_where_nothing_can_wait)
{
        /* regular files, not symlinks (/etc/os-release is one), whose targets a cached
         * lookup may not be able to follow */
        static const char *const candidates[] = {"/etc/passwd", "/etc/group", "/usr/lib/os-release",
                                                 "/etc/hostname"};
        bool want = inline_expected();
        uint64_t root = mount_of("/");
        const char *file = NULL;
        static const char *const elsewhere[] = {"/dev/shm", "/run", "/tmp"};
        char state[16], code[32], digest[65], local[65], dir[] = "/var/tmp/fiberd-fifo-XXXXXX";
        char other[96] = "";
        struct stat st;
        Opens a, b;
        Client *c;

        cr_assert(geteuid() == 0, "this test needs root: fiberd must run as root");
        cr_assert(root != 0, "statx cannot tell the root mount");
        for (size_t i = 0; !file && i < sizeof(candidates) / sizeof(candidates[0]); i++)
                if (lstat(candidates[i], &st) == 0 && S_ISREG(st.st_mode) &&
                    access(candidates[i], R_OK) == 0 && mount_of(candidates[i]) == root)
                        file = candidates[i];
        cr_assert_not_null(file, "no file of the root mount to hash");
        fiberd_start(&fd_, &(FiberdOpts){.plugins = "sha256", .workers = 1});
        c = fiberd_connect(&fd_);
        sha256_hex_of(file, local); /* also brings its path into the dentry cache */

        a = opens_now(c);
        cr_assert_eq(a.enabled, want, "inline opens %s here, want %s (root file system)",
                     a.enabled ? "on" : "off", want ? "on" : "off");
        for (int i = 0; i < 3; i++) {
                hash_as_root(c, file, state, code, digest);
                cr_assert_str_eq(state, "done", "%s: %s %s", file, state, code);
                cr_assert_str_eq(digest, local, "%s", file);
        }
        b = opens_now(c);
        cr_log_info("%s: %llu inline, %llu by an opener", file,
                    (unsigned long long)(b.in_worker - a.in_worker),
                    (unsigned long long)(b.by_opener - a.by_opener));
        /* a lookup the dentry cache cannot finish without blocking (EAGAIN) may still
         * go to an opener, so not all three need be inline */
        cr_assert_eq(b.in_worker - a.in_worker + b.by_opener - a.by_opener, 3, "opens counted");
        if (want)
                cr_assert_geq(b.in_worker - a.in_worker, 1, "no open in the job's worker");
        else
                cr_assert_eq(b.in_worker, a.in_worker, "opened inline where it may not");

        /* another mount (tmpfs, whose lookups are cached): the path leaves the root
         * mount, so an opener thread opens it, every time */
        for (size_t i = 0; i < sizeof(elsewhere) / sizeof(elsewhere[0]); i++) {
                int fd;

                if (mount_of(elsewhere[i]) == root || mount_of(elsewhere[i]) == 0)
                        continue;
                snprintf(other, sizeof(other), "%s/fiberd-creds-%d", elsewhere[i], (int)getpid());
                fd = open(other, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0) {
                        other[0] = '\0';
                        continue;
                }
                cr_assert(write(fd, "elsewhere\n", 10) == 10);
                close(fd);
                break;
        }
        cr_assert(other[0], "no directory on a mount other than the root's to write in");
        sha256_hex_of(other, local);
        for (int i = 0; i < 2; i++) {
                hash_as_root(c, other, state, code, digest);
                cr_assert_str_eq(state, "done", "%s: %s %s", other, state, code);
                cr_assert_str_eq(digest, local, "%s", other);
        }
        unlink(other);
        a = opens_now(c);
        cr_assert_eq(a.in_worker, b.in_worker, "%s, on another mount, was opened inline", other);
        cr_assert_eq(a.by_opener, b.by_opener + 2, "%s did not reach an opener", other);

        /* a relative path: never inline (it starts at the working directory, whose mount
         * is not checked), whatever becomes of it */
        hash_as_root(c, file + 1, state, code, digest);
        b = opens_now(c);
        cr_assert_eq(b.in_worker, a.in_worker, "a relative path was opened inline");
        cr_assert_eq(b.by_opener, a.by_opener + 1, "a relative path did not reach an opener");
        a = b;

        /* FIFOs, on the root mount when /var/tmp is on it: refused, the worker not held */
        cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
        char fifo[64];
        snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
        cr_assert(mkfifo(fifo, 0600) == 0);
        for (int i = 0; i < 2; i++) {
                hash_as_root(c, fifo, state, code, digest);
                cr_assert_str_eq(code, "INVALID_ARGUMENT", "FIFO: %s %s", state, code);
        }
        hash_as_root(c, file, state, code, digest);
        cr_assert_str_eq(state, "done", "the job after the FIFOs: %s %s", state, code);
        b = opens_now(c);
        cr_log_info("FIFOs and one file: %llu inline, %llu by an opener",
                    (unsigned long long)(b.in_worker - a.in_worker),
                    (unsigned long long)(b.by_opener - a.by_opener));
        cr_assert_eq(b.in_worker - a.in_worker + b.by_opener - a.by_opener, 3, "opens counted");
        unlink(fifo);
        rmdir(dir);
        client_free(c);
}

Test(daemon_creds, proc_self_is_fiberd_and_refused_to_users)
{
        pid_t pid;

        cr_assert(geteuid() == 0, "this test needs root: fiberd must run as root");
        fiberd_start(&fd_, &(FiberdOpts){.plugins = "sha256 echo"});
        cr_assert(chmod(fd_.dir, 0755) == 0);
        pid = fd_.pid;
        fiberd_run_as(NOBODY, NOBODY, proc_checks, &pid);
        /* root may read fiberd's /proc: it could anyway */
        {
                Client *c = fiberd_connect(&fd_);
                char state[16], code[32];
                job_final(c, submit_path(c, "/proc/self/status"), state, code);
                cr_assert_str_eq(state, "done", "root's /proc/self/status: %s %s", state, code);
                client_free(c);
        }
}

/* ------------------------------------------------------------------ access tiers --- */

typedef struct TierCase {
        uint64_t roots_job; /* a job of root's, still running */
        bool may_submit;
        bool admin;
} TierCase;

static void tier_checks(const void *arg)
{
        const TierCase *tc = arg;
        Client *c = fiberd_connect(&fd_);
        IpcStatus st = {0};
        uint64_t id, never = tc->roots_job + 1000;
        char not_yours[256];
        Reply rp;

        /* read: ping and plugins.list always */
        rpc_simple(c, "ping", 0, NULL, &rp);
        CHECK(rp.r == 0, "ping: %s", rp.st.message);
        reply_clear(&rp);
        rpc_simple(c, "plugins.list", 0, NULL, &rp);
        CHECK(rp.r == 0, "plugins.list: %s", rp.st.message);
        reply_clear(&rp);

        /* submit */
        id = rpc_submit(c, "echo", (Arg[]){ARG_S("x", "y")}, 1, 0, 0, &st);
        if (tc->may_submit) {
                CHECK(id != 0, "submit: %s", st.message);
                rpc_simple(c, "job.status", 1, &id, &rp);
                CHECK(rp.r == 0, "own job.status: %s", rp.st.message);
                reply_clear(&rp);
        } else {
                CHECK(id == 0 && strcmp(st.code, "PERMISSION_DENIED") == 0 &&
                              strstr(st.message, "submit tier"),
                      "submit without the tier: %s %s", st.code, st.message);
        }

        /* a negative priority */
        id = rpc_submit(c, "echo", NULL, 0, -5, 0, &st);
        if (tc->admin)
                CHECK(id != 0, "admin, priority -5: %s", st.message);
        else
                CHECK(id == 0 && strcmp(st.code, "PERMISSION_DENIED") == 0 &&
                              strstr(st.message, tc->may_submit ? "admin tier" : "tier"),
                      "priority -5: %s %s", st.code, st.message);

        /* root's job: an admin sees and may cancel it; for others it does not exist */
        rpc_simple(c, "job.status", 1, &never, &rp);
        CHECK(rp.r < 0 && strcmp(rp.st.code, "NOT_FOUND") == 0, "never: %s", rp.st.code);
        snprintf(not_yours, sizeof(not_yours), "%s", rp.st.message);
        reply_clear(&rp);
        rpc_simple(c, "job.status", 1, &tc->roots_job, &rp);
        if (tc->admin) {
                CHECK(rp.r == 0, "admin, root's job: %s", rp.st.message);
        } else {
                char want[256];
                CHECK(rp.r < 0 && strcmp(rp.st.code, "NOT_FOUND") == 0, "root's job: %s %s",
                      rp.st.code, rp.st.message);
                /* worded as for an id that never existed, but for the number */
                snprintf(want, sizeof(want), "no job %llu ", (unsigned long long)tc->roots_job);
                CHECK(strncmp(rp.st.message, want, strlen(want)) == 0 &&
                              strcmp(strchr(rp.st.message + 7, ' '), strchr(not_yours + 7, ' ')) ==
                                      0,
                      "'%s' vs '%s'", rp.st.message, not_yours);
        }
        reply_clear(&rp);
        rpc_simple(c, "job.cancel", 1, &tc->roots_job, &rp);
        CHECK(tc->admin ? rp.r == 0 : strcmp(rp.st.code, "NOT_FOUND") == 0, "cancel: %d %s", rp.r,
              rp.st.message);
        reply_clear(&rp);
        client_free(c);
}

/* Runs tier_checks as nobody against a fiberd started with @config; true when every
 * check passed (a failed one fails the test at once). */
static bool tiers_with(const char *config, bool may_submit, bool admin)
{
        TierCase tc = {.may_submit = may_submit, .admin = admin};
        Client *c;

        cr_assert(geteuid() == 0, "this test needs root to act as another uid");
        fiberd_start(&fd_, &(FiberdOpts){.config = config, .plugins = "echo sleep"});
        cr_assert(chmod(fd_.dir, 0755) == 0);
        c = fiberd_connect(&fd_);
        tc.roots_job = rpc_submit_long(c, "sleep");
        bool ok = fiberd_run_as(NOBODY, NOBODY, tier_checks, &tc);
        client_free(c);
        return ok;
}

Test(daemon_creds, by_default_everyone_submits_and_only_root_is_admin)
{
        cr_assert(tiers_with(NULL, true, false));
}

Test(daemon_creds, submit_group_limits_who_submits)
{
        /* nobody (gid 65534, no other group) is not in group root */
        cr_assert(tiers_with("[access]\nsubmit_group = root\n", false, false));
}

Test(daemon_creds, admin_group_members_are_admins)
{
        /* nobody's primary group 65534 is the admin group */
        cr_assert(tiers_with("[access]\nadmin_group = 65534\n", true, true));
}

Test(daemon_creds, a_submit_group_that_does_not_exist_stops_fiberd)
{
        Fiberd d = {0};
        char conf[128];
        FILE *f;
        int status;
        pid_t pid;

        snprintf(d.dir, sizeof(d.dir), "/tmp/fiberd-access-XXXXXX");
        cr_assert(mkdtemp(d.dir));
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", d.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs("[access]\nsubmit_group = no-such-group-here\n", f);
        fclose(f);
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                char sock[160];
                snprintf(sock, sizeof(sock), "%s/s.sock", d.dir);
                execl(FIBERD_BIN, FIBERD_BIN, "--config", conf, "--socket", sock, NULL);
                _exit(127);
        }
        cr_assert(waitpid(pid, &status, 0) == pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 127,
                  "status 0x%x", status);
        unlink(conf);
        rmdir(d.dir);
}

/* ------------------------------------------------------------------ quotas ---------- */

#define USER_A NOBODY
#define USER_B 65533 /* any uid will do: fiberd needs no passwd entry */

/* As the child: submit what @arg says ("L" = a long sleep, "E" = an echo), in order. */
static void submit_jobs(const void *arg)
{
        Client *c = fiberd_connect(&fd_);

        for (const char *p = arg; *p; p++) {
                IpcStatus st = {0};
                uint64_t id = *p == 'L' ? rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 600000)}, 1, 0,
                                                     0, &st)
                                        : rpc_submit(c, "echo", NULL, 0, 0, 0, &st);
                CHECK(id != 0, "submit %c: %s", *p, st.message);
        }
        client_free(c);
}

/* As root: job @id's state after waiting for it at most WAIT_MS. */
static const char *state_after_wait(Client *c, uint64_t id)
{
        static char state[16];
        Reply rp;

        rpc_job_wait(c, id, WAIT_MS, &rp);
        cr_assert_eq(rp.r, 0, "job.wait %llu: %s", (unsigned long long)id, rp.st.message);
        snprintf(state, sizeof(state), "%s", map_str(rp.result, "state"));
        reply_clear(&rp);
        return state;
}

static void start_as_root(const char *config)
{
        cr_assert(geteuid() == 0, "this test needs root to act as other uids");
        fiberd_start(&fd_, &(FiberdOpts){.config = config, .plugins = "echo sleep"});
        cr_assert(chmod(fd_.dir, 0755) == 0);
}

Test(daemon_creds, a_flooding_user_does_not_starve_another)
{
        Client *c;
        uint64_t first = 1, b_job = 7;

        /* one slot, no per-user cap: only the choice of the next job is tested */
        start_as_root("[jobs]\nmax_running = 1\nmax_running_per_user = 0\n");
        fiberd_run_as(USER_A, USER_A, submit_jobs, "LLLLLL"); /* jobs 1..6: 1 runs, 5 wait */
        fiberd_run_as(USER_B, USER_B, submit_jobs, "E");      /* job 7 */
        c = fiberd_connect(&fd_);
        /* the slot frees once: the next job must be B's, not A's second sleep */
        {
                Reply rp;
                rpc_simple(c, "job.cancel", 1, &first, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                reply_clear(&rp);
        }
        cr_assert_str_eq(state_after_wait(c, b_job), "done",
                         "B's job waited behind A's queue (not round robin)");
        client_free(c);
}

Test(daemon_creds, a_user_at_its_running_cap_leaves_the_slots_to_others)
{
        Client *c;

        start_as_root("[jobs]\nmax_running = 2\nmax_running_per_user = 1\n");
        fiberd_run_as(USER_A, USER_A, submit_jobs, "LLL"); /* 1 runs, 2 wait at the cap */
        fiberd_run_as(USER_B, USER_B, submit_jobs, "E");   /* job 4: takes the free slot */
        c = fiberd_connect(&fd_);
        cr_assert_str_eq(state_after_wait(c, 4), "done");
        {
                uint64_t a2 = 2; /* A's second: still waiting at the cap */
                Reply rp;
                rpc_simple(c, "job.status", 1, &a2, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "queued");
                reply_clear(&rp);
        }
        client_free(c);
}

static void over_queued_limit(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        IpcStatus st = {0};

        for (int i = 0; i < 3; i++) /* 1 runs (max_running 1), 2 wait */
                CHECK(rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 600000)}, 1, 0, 0, &st) != 0,
                      "submit %d: %s", i, st.message);
        CHECK(rpc_submit(c, "echo", NULL, 0, 0, 0, &st) == 0 &&
                      strcmp(st.code, "OVERLOADED") == 0 &&
                      strstr(st.message, "max_queued_per_user"),
              "the third queued job: %s %s", st.code, st.message);
        client_free(c);
}

Test(daemon_creds, max_queued_per_user_answers_overloaded)
{
        start_as_root("[jobs]\nmax_running = 1\nmax_queued_per_user = 2\n");
        cr_assert(fiberd_run_as(USER_A, USER_A, over_queued_limit, NULL));
        cr_assert(fiberd_run_as(USER_B, USER_B, submit_jobs, "E")); /* another user still may */
        {
                Client *c = fiberd_connect(&fd_); /* root is not limited */
                for (int i = 0; i < 3; i++)
                        rpc_submit_long(c, "sleep");
                client_free(c);
        }
}

static void over_rate_limit(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        IpcStatus st = {0};
        int refused = 0;

        /* a burst of 5 at 1 a second: of 8 quick submissions at least one is refused */
        for (int i = 0; i < 8; i++)
                if (rpc_submit(c, "echo", NULL, 0, 0, 0, &st) == 0) {
                        CHECK(strcmp(st.code, "OVERLOADED") == 0 &&
                                      strstr(st.message, "submit_rate_per_user"),
                              "%s %s", st.code, st.message);
                        refused++;
                }
        CHECK(refused > 0, "8 submissions in a burst of 5 at 1/s all passed");
        client_free(c);
}

Test(daemon_creds, submit_rate_per_user_answers_overloaded)
{
        start_as_root("[jobs]\nsubmit_rate_per_user = 1\nsubmit_burst_per_user = 5\n");
        cr_assert(fiberd_run_as(USER_A, USER_A, over_rate_limit, NULL));
        cr_assert(fiberd_run_as(USER_B, USER_B, submit_jobs, "E")); /* its own bucket */
}

/* ------------------------------------------------------------------ admin_only classes */

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

/* `fiberctl submit echo --class vip` on the test's fiberd: its exit status, and its
 * stderr in @err. */
static int submit_to_class(const char *cls, char *err, size_t size)
{
        char cmd[512];
        FILE *f;
        size_t n;

        snprintf(cmd, sizeof(cmd), "%s -s %s submit echo --class %s 2>&1 >/dev/null", FIBERCTL_BIN,
                 fd_.sock, cls);
        f = popen(cmd, "r");
        if (!f)
                return -1;
        n = fread(err, 1, size - 1, f);
        err[n] = '\0';
        return pclose(f);
}

static void vip_refused(const void *arg)
{
        char err[512];
        int status = submit_to_class("vip", err, sizeof(err));

        (void)arg;
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0, "nobody submitted to vip: %s", err);
        CHECK(strstr(err, "admin tier") && strstr(err, "class vip"), "the refusal: %s", err);
        status = submit_to_class("open", err, sizeof(err));
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nobody, class open: %s", err);
}

Test(daemon_creds, a_class_reserved_to_admins_refuses_other_users)
{
        char err[512];
        int status;

        cr_assert(geteuid() == 0, "this test needs root to act as another uid");
        fiberd_start(&fd_, &(FiberdOpts){.config = "[class.vip]\nshares = 500\nadmin_only = true\n"
                                                   "[class.open]\nshares = 50\n",
                                         .plugins = "echo"});
        cr_assert(chmod(fd_.dir, 0755) == 0);
        fiberd_run_as(NOBODY, NOBODY, vip_refused, NULL);
        status = submit_to_class("vip", err, sizeof(err));
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "root, class vip: %s", err);
}
