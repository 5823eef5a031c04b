/* SPDX-License-Identifier: MIT */
/*
 * elfcheck.h — can this process map a file as a shared object, before dlopen() does?
 *
 * glibc's dlopen() reads the ELF header and the program headers with read(2), checks
 * the header (magic, class, byte order, type, machine), then mmap()s every PT_LOAD
 * segment from the file and touches its pages (relocations, the zeroed tail of .bss).
 * It does not check that a segment lies inside the file: a .so cut short (a copy
 * interrupted, a full disk, a half-written download) maps without complaint, and the
 * first touch of a page past the end of the file raises SIGBUS inside dlopen() — a
 * crash of fiberd, not a refusal. elfcheck_fd() reads the same headers with pread()
 * and answers what dlopen() would fault on, so the loader refuses such a file with a
 * reason and never maps it.
 *
 * Checked: the ELF magic; the class and byte order of this process (ELFCLASS64 and
 * little-endian on x86-64); EV_CURRENT; e_type ET_DYN; e_machine this host's (when the
 * build knows it); e_phentsize, e_phnum (1 to 65534) and e_phoff, with the program
 * header table inside the file; every segment's file bytes (p_offset + p_filesz)
 * inside the file; a PT_LOAD's p_filesz no larger than its p_memsz; at least one
 * PT_LOAD. What is left to dlopen() fails there with dlerror()'s message, without a
 * fault (a missing dynamic section, an unresolved symbol).
 *
 * Daemon-internal: linked into fiberd with the loader (plugins/build.mk, LOADER_OBJS).
 */
#ifndef FIBERD_PLUGINS_ELFCHECK_H
#define FIBERD_PLUGINS_ELFCHECK_H

#include <stddef.h>

/*
 * elfcheck_fd - check the file open as @fd (read with pread(): its offset does not
 * move) as a shared object this process can map.
 * @why: on -ENOEXEC, one sentence saying what is wrong, without a prefix, e.g.
 *       "segment 2 (PT_LOAD) ends past the end of the file (12288 > 8000 bytes)";
 *       @why_size bytes, NUL-terminated, truncated to fit.
 * Return: 0 (mappable); -ENOEXEC (not a loadable shared object: @why says why);
 * -errno of fstat()/pread() (@why says which); -ENOMEM.
 * Context: any thread, not a signal handler; does not yield (a few small reads).
 */
int elfcheck_fd(int fd, char *why, size_t why_size);

#endif
