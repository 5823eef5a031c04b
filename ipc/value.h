/* SPDX-License-Identifier: MIT */
/*
 * value.h — read typed values out of decoded msgpack objects, with errors a person can act
 * on (ipc/).
 *
 * Method handlers (daemon/), plugins reading their args (through the host table) and the
 * client reading results all do the same thing: find a key in a map or an element of the
 * params array, check its type and range, and complain precisely when it is wrong:
 *
 *     uint64_t id;
 *     int r = ipc_read_uint(ipc_array_at(&msg.params, 0), "job id", &id, &st);
 *     if (r < 0) return r;            // st: INVALID_ARGUMENT "job id: expected an
 *                                     //     unsigned integer, got a string"
 *
 * Every ipc_read_*() takes the object (NULL when absent, as ipc_map_find() / ipc_array_at()
 * return it), @what (the name used in the message: a key, "params[0]", "job id"), an
 * out-parameter written only on success, and an IpcStatus (may be NULL) filled on error.
 * Return: 0; -ENOENT when @o is NULL (status INVALID_ARGUMENT "missing <what>": a missing
 * argument is the caller's mistake, not a missing object); -EINVAL for a wrong type;
 * -ERANGE for a value out of the requested range. Strings come back as views into the
 * message's zone (valid while the message is), or copied into a caller buffer.
 *
 * Numbers: msgpack has separate positive/negative integer and float types; readers accept
 * any integer encoding that holds the value (a uint field given as a non-negative
 * NEGATIVE_INTEGER is fine) and ipc_read_double() also accepts integers. A float is never
 * silently truncated into an integer field.
 *
 * Pure, no allocation, no I/O. Context: any; nothing yields.
 */
#ifndef FIBERD_IPC_VALUE_H
#define FIBERD_IPC_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "ipc/status.h"

/*
 * ipc_map_find - the value stored under the string key @key in @map, or NULL when @map is
 * NULL, not a map, or has no such key (the first match wins if a key repeats).
 */
const msgpack_object *ipc_map_find(const msgpack_object *map, const char *key);

/* ipc_array_at - element @i of @array, or NULL when @array is NULL, not an array, or short. */
const msgpack_object *ipc_array_at(const msgpack_object *array, size_t i);

/* ipc_object_is_nil - true when @o is NULL or a nil object (an optional value left out). */
bool ipc_object_is_nil(const msgpack_object *o);

/*
 * ipc_object_type_name - "nil", "a boolean", "an unsigned integer", "a negative integer",
 * "a float", "a string", "binary data", "an array", "a map", "an extension value";
 * for messages. Never NULL.
 */
const char *ipc_object_type_name(const msgpack_object *o);

/*
 * ipc_object_streq - true when @o is a string equal to the C string @s.
 */
bool ipc_object_streq(const msgpack_object *o, const char *s);

/* A string value as a view: not NUL-terminated, may contain NUL bytes. */
int ipc_read_strv(const msgpack_object *o, const char *what, const char **ret_ptr, size_t *ret_len,
                  IpcStatus *st);

/*
 * ipc_read_str - copy a string value into @buf (@size bytes with the NUL). Refuses
 * (-EINVAL) strings with a NUL byte inside and (-ERANGE) strings that do not fit.
 * @buf is written only on success.
 */
int ipc_read_str(const msgpack_object *o, const char *what, char *buf, size_t size, IpcStatus *st);

int ipc_read_int(const msgpack_object *o, const char *what, int64_t *ret, IpcStatus *st);
int ipc_read_uint(const msgpack_object *o, const char *what, uint64_t *ret, IpcStatus *st);
int ipc_read_bool(const msgpack_object *o, const char *what, bool *ret, IpcStatus *st);
int ipc_read_double(const msgpack_object *o, const char *what, double *ret, IpcStatus *st);

/* ipc_read_int_range - an integer in [@min, @max]; -ERANGE outside. */
int ipc_read_int_range(const msgpack_object *o, const char *what, int64_t min, int64_t max,
                       int64_t *ret, IpcStatus *st);

/* ipc_read_map / ipc_read_array - check the type and hand back the object itself. */
int ipc_read_map(const msgpack_object *o, const char *what, const msgpack_object **ret,
                 IpcStatus *st);
int ipc_read_array(const msgpack_object *o, const char *what, const msgpack_object **ret,
                   IpcStatus *st);

/*
 * ipc_object_fd_index - true when @o is an fd argument (ext IPC_EXT_FD, PROTOCOL.md),
 * with its index in *@ret (written only then). Pure.
 */
bool ipc_object_fd_index(const msgpack_object *o, uint32_t *ret);

/*
 * ipc_object_fds_needed - how many fds a request whose params are @o must carry: one
 * more than the highest fd index anywhere inside @o (0 when none), at most
 * UINT32_MAX. Recursion is bounded by the decoder's nesting limit. Pure.
 */
uint32_t ipc_object_fds_needed(const msgpack_object *o);

/*
 * ipc_read_error - parse a response's error object (a map {"code", "message"}) into @ret.
 * Unknown codes become IPC_INTERNAL (error -EIO) with the original code kept at the front of the
 * message; a malformed error object gives -EPROTO (and @ret describes that).
 * Return: 0 when @err is nil (no error; @ret cleared), 1 when @ret holds the error,
 * -EPROTO. @ret is always written.
 */
int ipc_read_error(const msgpack_object *err, IpcStatus *ret);

#endif /* FIBERD_IPC_VALUE_H */
