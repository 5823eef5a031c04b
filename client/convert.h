/* SPDX-License-Identifier: MIT */
/*
 * convert.h — fiberctl's conversions between what people type and what goes on the wire
 * (client/): JSON <-> msgpack (jansson on one side, msgpack-c on the other), typed
 * KEY=VALUE arguments, and durations like "500ms".
 *
 * Pure functions, no I/O. Context: any thread.
 */
#ifndef FIBERD_CLIENT_CONVERT_H
#define FIBERD_CLIENT_CONVERT_H

#include <stdint.h>

#include <jansson.h>
#include <msgpack.h>

/*
 * convert_json_to_msgpack - pack @j: objects become maps (string keys), arrays arrays,
 * integers integers (non-negative ones as unsigned), reals float64, true/false/null;
 * an object of exactly {"ext": type, "hex": data} (how convert_msgpack_to_json() shows
 * an ext value; data at most 256 bytes) becomes that ext value again.
 * Return: 0; -ENOMEM (packer write failed); -EINVAL for a JSON type it does not know.
 */
int convert_json_to_msgpack(msgpack_packer *pk, const json_t *j);

/*
 * convert_msgpack_to_json - a new JSON value for @o (caller owns, json_decref()).
 * Maps with non-string keys get their keys rendered as JSON text; unsigned integers above
 * INT64_MAX become reals (JSON has no unsigned 64-bit); bin becomes a hex string; ext a
 * {"ext": type, "hex": data} object. Return: the value, NULL on out of memory.
 */
json_t *convert_msgpack_to_json(const msgpack_object *o);

/*
 * convert_kv_value - the JSON value a command-line VALUE stands for: "true"/"false",
 * "null", a decimal integer (with optional sign), a float ("1.5", "1e3"), else the string
 * itself. A value written inside double or single quotes ("'123'") is always a string,
 * without the quotes. Return: new reference, NULL on out of memory.
 */
json_t *convert_kv_value(const char *value);

/*
 * convert_duration_ms - parse a duration: a non-negative number (decimals allowed)
 * followed by a unit: ms, s, m, h; no unit means seconds. "500ms", "10s", "2m", "1.5h".
 * @ret: out, milliseconds (rounded down), written only on success.
 * Return: 0; -EINVAL for anything else; -ERANGE above UINT32_MAX ms (~49 days).
 */
int convert_duration_ms(const char *s, uint64_t *ret);

#endif /* FIBERD_CLIENT_CONVERT_H */
