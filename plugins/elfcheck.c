/* SPDX-License-Identifier: MIT */
/*
 * elfcheck.c — the ELF checks the loader makes before dlopen() (elfcheck.h says why).
 *
 * Only <elf.h> and <link.h> (ElfW(): the ELF types of this process's own class): the
 * header and the program header table are read with pread() into memory and checked
 * with overflow-safe arithmetic (every size is compared as "a <= size - b", never as
 * "a + b <= size"), so a header that lies cannot make the check itself read or compute
 * out of range.
 */
#include "plugins/elfcheck.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* This process's class, byte order and machine: what a plugin must have been built for. */
#if __SIZEOF_POINTER__ == 8
#define ELFCHECK_CLASS ELFCLASS64
#define ELFCHECK_BITS 64
#else
#define ELFCHECK_CLASS ELFCLASS32
#define ELFCHECK_BITS 32
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ELFCHECK_DATA ELFDATA2LSB
#else
#define ELFCHECK_DATA ELFDATA2MSB
#endif

#if defined(__x86_64__)
#define ELFCHECK_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ELFCHECK_MACHINE EM_AARCH64
#elif defined(__i386__)
#define ELFCHECK_MACHINE EM_386
#elif defined(__arm__)
#define ELFCHECK_MACHINE EM_ARM
#elif defined(__riscv)
#define ELFCHECK_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define ELFCHECK_MACHINE EM_PPC64
#elif defined(__powerpc__)
#define ELFCHECK_MACHINE EM_PPC
#elif defined(__s390__)
#define ELFCHECK_MACHINE EM_S390
#endif
/* elsewhere the machine is left to dlopen(), which checks it (without a fault) */

static const char *machine_name(unsigned m)
{
        switch (m) {
        case EM_X86_64:
                return "x86-64";
        case EM_AARCH64:
                return "AArch64";
        case EM_386:
                return "i386";
        case EM_ARM:
                return "ARM";
        case EM_RISCV:
                return "RISC-V";
        case EM_PPC64:
                return "PowerPC64";
        case EM_PPC:
                return "PowerPC";
        case EM_S390:
                return "S/390";
        default:
                return NULL;
        }
}

static const char *segment_type_name(uint32_t type)
{
        switch (type) {
        case PT_LOAD:
                return "PT_LOAD";
        case PT_DYNAMIC:
                return "PT_DYNAMIC";
        case PT_INTERP:
                return "PT_INTERP";
        case PT_NOTE:
                return "PT_NOTE";
        case PT_PHDR:
                return "PT_PHDR";
        case PT_TLS:
                return "PT_TLS";
        case PT_GNU_EH_FRAME:
                return "PT_GNU_EH_FRAME";
        case PT_GNU_STACK:
                return "PT_GNU_STACK";
        case PT_GNU_RELRO:
                return "PT_GNU_RELRO";
        case PT_GNU_PROPERTY:
                return "PT_GNU_PROPERTY";
        default:
                return NULL;
        }
}

/* Reads @len bytes at @off into @buf; the count read (short at the end of the file), or
 * -errno. */
static ssize_t read_at(int fd, void *buf, size_t len, uint64_t off)
{
        size_t done = 0;

        while (done < len) {
                ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        return (ssize_t)done;
}

/* The header's identity: magic, class, byte order, version, type, machine. */
static int check_ident(const ElfW(Ehdr) * eh, size_t n, uint64_t size, char *why, size_t why_size)
{
        if (n < SELFMAG || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
                snprintf(why, why_size, "not an ELF file (it does not begin with \\177ELF)");
                return -ENOEXEC;
        }
        if (n < EI_NIDENT)
                goto out_short;
        if (eh->e_ident[EI_CLASS] != ELFCHECK_CLASS) {
                unsigned c = eh->e_ident[EI_CLASS];
                snprintf(why, why_size, "an ELF file of class %u (%s), fiberd is %d-bit", c,
                         c == ELFCLASS32   ? "32-bit"
                         : c == ELFCLASS64 ? "64-bit"
                                           : "unknown",
                         ELFCHECK_BITS);
                return -ENOEXEC;
        }
        if (eh->e_ident[EI_DATA] != ELFCHECK_DATA) {
                snprintf(why, why_size, "an ELF file of the other byte order (%s-endian)",
                         eh->e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little or unknown");
                return -ENOEXEC;
        }
        if (eh->e_ident[EI_VERSION] != EV_CURRENT) {
                snprintf(why, why_size, "ELF version %u, not %u", eh->e_ident[EI_VERSION],
                         EV_CURRENT);
                return -ENOEXEC;
        }
        if (n < sizeof(*eh))
                goto out_short;
        if (eh->e_type != ET_DYN) {
                snprintf(why, why_size, "not a shared object but %s (link it with -shared)",
                         eh->e_type == ET_EXEC   ? "an executable"
                         : eh->e_type == ET_REL  ? "a relocatable object (.o)"
                         : eh->e_type == ET_CORE ? "a core dump"
                                                 : "an ELF file of an unknown type");
                return -ENOEXEC;
        }
#ifdef ELFCHECK_MACHINE
        if (eh->e_machine != ELFCHECK_MACHINE) {
                const char *m = machine_name(eh->e_machine);
                char num[32];

                snprintf(num, sizeof(num), "machine %u", (unsigned)eh->e_machine);
                snprintf(why, why_size, "built for %s, this host is %s", m ? m : num,
                         machine_name(ELFCHECK_MACHINE));
                return -ENOEXEC;
        }
#endif
        return 0;

out_short:
        snprintf(why, why_size, "the file ends inside the ELF header (%" PRIu64 " of %zu bytes)",
                 size, sizeof(*eh));
        return -ENOEXEC;
}

/* The program header table: its place, and every segment's bytes, inside the file. */
static int check_segments(int fd, const ElfW(Ehdr) * eh, uint64_t size, char *why, size_t why_size)
{
        uint64_t table, n_load = 0;
        ElfW(Phdr) * ph;
        ssize_t n;
        int r = 0;

        if (eh->e_phentsize != sizeof(ElfW(Phdr))) {
                snprintf(why, why_size, "program header entries of %u bytes, not %zu",
                         (unsigned)eh->e_phentsize, sizeof(ElfW(Phdr)));
                return -ENOEXEC;
        }
        if (eh->e_phnum == 0 || eh->e_phnum == PN_XNUM) {
                snprintf(why, why_size, "%s",
                         eh->e_phnum ? "more than 65534 program headers" : "no program headers");
                return -ENOEXEC;
        }
        table = (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr));
        if ((uint64_t)eh->e_phoff > size || table > size - (uint64_t)eh->e_phoff) {
                snprintf(why, why_size,
                         "the program headers end past the end of the file (%" PRIu64 " > %" PRIu64
                         " bytes)",
                         (uint64_t)eh->e_phoff > UINT64_MAX - table ? UINT64_MAX
                                                                    : eh->e_phoff + table,
                         size);
                return -ENOEXEC;
        }
        ph = malloc(table);
        if (!ph)
                return -ENOMEM;
        n = read_at(fd, ph, table, eh->e_phoff);
        if (n < 0 || (uint64_t)n < table) {
                r = n < 0 ? (int)n : -EIO;
                snprintf(why, why_size, "cannot read the program headers: %s", strerror(-r));
                goto out_free;
        }
        for (unsigned i = 0; i < eh->e_phnum; i++) {
                const char *type = segment_type_name(ph[i].p_type);
                uint64_t off = ph[i].p_offset, len = ph[i].p_filesz;
                char tname[32];

                if (!type) {
                        snprintf(tname, sizeof(tname), "type 0x%" PRIx32, (uint32_t)ph[i].p_type);
                        type = tname;
                }
                if (len && (off > size || len > size - off)) {
                        snprintf(why, why_size,
                                 "segment %u (%s) ends past the end of the file (%" PRIu64
                                 " > %" PRIu64 " bytes)",
                                 i, type, off > UINT64_MAX - len ? UINT64_MAX : off + len, size);
                        r = -ENOEXEC;
                        goto out_free;
                }
                if (ph[i].p_type != PT_LOAD)
                        continue;
                if (ph[i].p_filesz > ph[i].p_memsz) {
                        snprintf(why, why_size,
                                 "segment %u (PT_LOAD) has more bytes in the file than in memory "
                                 "(%" PRIu64 " > %" PRIu64 ")",
                                 i, (uint64_t)ph[i].p_filesz, (uint64_t)ph[i].p_memsz);
                        r = -ENOEXEC;
                        goto out_free;
                }
                n_load++;
        }
        if (!n_load) {
                snprintf(why, why_size, "no loadable (PT_LOAD) segment");
                r = -ENOEXEC;
        }
out_free:
        free(ph);
        return r;
}

int elfcheck_fd(int fd, char *why, size_t why_size)
{
        ElfW(Ehdr) eh;
        struct stat st;
        ssize_t n;
        int r;

        if (fstat(fd, &st) < 0) {
                r = -errno;
                snprintf(why, why_size, "cannot stat: %s", strerror(-r));
                return r;
        }
        memset(&eh, 0, sizeof(eh));
        n = read_at(fd, &eh, sizeof(eh), 0);
        if (n < 0) {
                snprintf(why, why_size, "cannot read the ELF header: %s", strerror((int)-n));
                return (int)n;
        }
        r = check_ident(&eh, (size_t)n, (uint64_t)st.st_size, why, why_size);
        if (r < 0)
                return r;
        return check_segments(fd, &eh, (uint64_t)st.st_size, why, why_size);
}
