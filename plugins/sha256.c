/* SPDX-License-Identifier: MIT */
/*
 * sha256.c — the bundled "sha256" plugin: the SHA-256 digest of one file.
 *
 * Args {"path": FILE} → result {"path": FILE, "sha256": 64 hex digits, "bytes": size}.
 * FILE is a path, opened with host->open() as the job's submitter (so a user gets
 * PERMISSION_DENIED for /etc/shadow even when fiberd runs as root, and INVALID_ARGUMENT
 * for a FIFO instead of a worker blocked in open(2)), or a file the client passed
 * (host->arg_fd(): `fiberctl submit sha256 path=@FILE`); then "path" in the result is
 * "(passed fd)". Either way only a regular file is hashed, and the whole of it: a passed
 * fd is read with pread() from offset 0, whatever its offset (the client may have read
 * from it; the dup fiberd hands over shares that offset), and never moved. A passed fd
 * not open for reading (O_PATH, O_WRONLY) is refused at job.submit with
 * INVALID_ARGUMENT naming the problem, as is a path that loops (ELOOP: a symbolic link
 * loop, or a magic link such as /proc/self/fd/N, which host->open() does not follow).
 *
 * The file is read in 64 KiB chunks (a heap buffer: a fiber's stack is small) until a
 * read returns nothing or a short read reaches the size fstat() gave, and fed to
 * OpenSSL's EVP digest (its SHA-NI or AVX2 code where the CPU has them), with progress
 * (bytes read of that size) reported and host->maybe_yield() called after each chunk
 * (host->yield() on a daemon without it), so a hash job yields once it has used the
 * daemon's task quota rather than after every chunk, many hash jobs share the workers
 * fairly, and a cancelled job stops within one chunk. Reading a regular file blocks the
 * worker for the one read(2); page-cache hits make that short, and there is no readiness
 * to wait on for regular files anyway.
 *
 * The SHA-256 implementation is fetched once in init() (EVP_MD_fetch, OpenSSL 3) and
 * released in fini(); an EVP_MD is immutable and safe to share between threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "plugins/fiberd/plugin.h"

#define SHA256_CHUNK (64 * 1024)

static EVP_MD *sha256_md;

static int sha256_init(const FiberdHost *host, char *why, size_t why_size)
{
        sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
        if (!sha256_md) {
                snprintf(why, why_size, "OpenSSL provides no SHA256 digest");
                return -ENOSYS;
        }
        return 0;
}

static void sha256_fini(const FiberdHost *host)
{
        EVP_MD_free(sha256_md);
        sha256_md = NULL;
}

/* Whether the passed file @fd can be read: 0, or -EINVAL with the reason in @why. */
static int passed_fd_readable(int fd, char *why, size_t why_size)
{
        int fl = fcntl(fd, F_GETFL);

        if (fl < 0)
                return 0; /* fstat() and read() will say */
        if (fl & O_PATH) {
                snprintf(why, why_size,
                         "path: the file passed is not open for reading (it was opened with "
                         "O_PATH); open it O_RDONLY");
                return -EINVAL;
        }
        if ((fl & O_ACCMODE) == O_WRONLY) {
                snprintf(why, why_size,
                         "path: the file passed is not open for reading (it was opened "
                         "O_WRONLY); open it O_RDONLY");
                return -EINVAL;
        }
        return 0;
}

static int sha256_run(FiberdJob *job, const FiberdHost *host)
{
        static const char hex[] = "0123456789abcdef";
        unsigned char digest[EVP_MAX_MD_SIZE];
        char digest_hex[2 * EVP_MAX_MD_SIZE + 1];
        char path[PATH_MAX];
        unsigned digest_len = 0;
        EVP_MD_CTX *ctx = NULL;
        unsigned char *buf = NULL;
        uint64_t bytes = 0;
        struct stat st;
        bool preemptible = FIBERD_HOST_HAS(host, maybe_yield) && host->maybe_yield;
        int fd, r;

        fd = FIBERD_HOST_HAS(host, arg_fd) ? host->arg_fd(job, "path") : -EINVAL;
        if (fd >= 0) {
                char why[160];
                snprintf(path, sizeof(path), "(passed fd)");
                r = passed_fd_readable(fd, why, sizeof(why));
                if (r < 0) {
                        r = host->fail(job, r, "%s", why);
                        goto out_close;
                }
        } else if (fd != -EINVAL && fd != -ENOENT) {
                return fd;
        } else { /* a path, or nothing: arg_str() says which */
                r = host->arg_str(job, "path", path, sizeof(path));
                if (r < 0)
                        return r;
                if (!FIBERD_HOST_HAS(host, open))
                        return host->fail(job, -ENOSYS,
                                          "this fiberd cannot open files as the "
                                          "job's submitter; upgrade it");
                fd = host->open(job, path, O_RDONLY);
                if (fd == -ECANCELED)
                        return fd;
                if (fd == -EINVAL)
                        return host->fail(job, fd, "%s is not a regular file", path);
                if (fd == -ELOOP)
                        return host->fail(job, fd,
                                          "cannot open %s: too many levels of symbolic links "
                                          "(a loop, or a magic link such as /proc/self/fd/N, "
                                          "which jobs do not follow)",
                                          path);
                if (fd < 0)
                        return host->fail(job, fd, "cannot open %s: %s", path, strerror(-fd));
        }
        if (fstat(fd, &st) < 0) {
                int e = errno;
                r = host->fail(job, -e, "cannot stat %s: %s", path, strerror(e));
                goto out_close;
        }
        if (!S_ISREG(st.st_mode)) {
                r = host->fail(job, -EINVAL, "%s is not a regular file", path);
                goto out_close;
        }

        buf = malloc(SHA256_CHUNK);
        ctx = EVP_MD_CTX_new();
        if (!buf || !ctx) {
                r = -ENOMEM;
                goto out_free;
        }
        if (!EVP_DigestInit_ex2(ctx, sha256_md, NULL)) {
                r = host->fail(job, -EIO, "OpenSSL could not start a SHA256 digest");
                goto out_free;
        }

        host->progress(job, 0, (uint64_t)st.st_size);
        for (;;) {
                ssize_t n = pread(fd, buf, SHA256_CHUNK, (off_t)bytes);
                if (n < 0) {
                        int e = errno;
                        if (e == EINTR)
                                continue;
                        r = host->fail(job, -e, "cannot read %s: %s", path, strerror(e));
                        goto out_free;
                }
                if (n == 0)
                        break;
                if (!EVP_DigestUpdate(ctx, buf, (size_t)n)) {
                        r = host->fail(job, -EIO, "OpenSSL failed to hash %s", path);
                        goto out_free;
                }
                bytes += (uint64_t)n;
                host->progress(job, bytes, (uint64_t)st.st_size);
                /* a short read at the size fstat() gave is the end: no pread() to hear it
                 * again (most files are one chunk: a system call saved in two) */
                if (n < SHA256_CHUNK && bytes >= (uint64_t)st.st_size)
                        break;
                r = preemptible ? host->maybe_yield(job) : host->yield(job);
                if (r < 0)
                        goto out_free; /* cancelled */
        }
        if (!EVP_DigestFinal_ex(ctx, digest, &digest_len)) {
                r = host->fail(job, -EIO, "OpenSSL failed to finish the digest of %s", path);
                goto out_free;
        }
        for (unsigned i = 0; i < digest_len; i++) {
                digest_hex[2 * i] = hex[digest[i] >> 4];
                digest_hex[2 * i + 1] = hex[digest[i] & 15];
        }
        digest_hex[2 * digest_len] = '\0';

        r = host->result_str(job, "path", path);
        if (r >= 0)
                r = host->result_str(job, "sha256", digest_hex);
        if (r >= 0)
                r = host->result_uint(job, "bytes", bytes);

out_free:
        EVP_MD_CTX_free(ctx);
        free(buf);
out_close:
        close(fd);
        return r < 0 ? r : 0;
}

/*
 * "path" must be a string or a passed file, checked at job.submit: a missing
 * or mistyped path answers INVALID_ARGUMENT and no job is made. Whether the file opens is
 * run()'s business: as the submitter, at run time.
 */
static int sha256_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        char path[PATH_MAX];
        int fd = FIBERD_HOST_HAS(host, arg_fd) ? host->arg_fd(args, "path") : -EINVAL;

        if (fd >= 0) {
                int r = passed_fd_readable(fd, why, why_size);
                close(fd);
                return r;
        }
        if (fd != -EINVAL && fd != -ENOENT)
                return fd;
        return host->arg_str(args, "path", path, sizeof(path));
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "sha256",
        .version = "1.0",
        .description = "SHA-256 of a file: {\"path\"} -> {\"path\", \"sha256\", \"bytes\"}",
        .run = sha256_run,
        .init = sha256_init,
        .fini = sha256_fini,
        .check_args = sha256_check,
};
