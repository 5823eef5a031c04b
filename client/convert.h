/* SPDX-License-Identifier: MIT */
/*
 * convert.h — fiberctl's conversions between what people type and what goes on the wire
 * (client/): JSON <-> msgpack (jansson on one side, msgpack-c on the other), typed
 * KEY=VALUE arguments, durations like "1h30m" and times like "2026-12-01T03:00:00Z".
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
 * {"ext": type, "hex": data} object; a string (or key) that is not UTF-8, which JSON
 * cannot carry, gets U+FFFD in place of each byte that does not begin a valid sequence.
 * Return: the value, NULL on out of memory.
 */
json_t *convert_msgpack_to_json(const msgpack_object *o);

/*
 * convert_msgpack_to_json_text - append @o to @out as compact JSON text, byte for byte
 * what json_dumpb(convert_msgpack_to_json(@o), JSON_COMPACT | JSON_ENCODE_ANY) writes,
 * without building the tree: no allocation but @out's growth. For the values a job
 * record holds: nil, booleans, integers, UTF-8 strings, arrays, and maps of distinct
 * UTF-8 string keys without NUL bytes (at most 64 keys a map). Anything else (floats,
 * integers above INT64_MAX, bin, ext, other keys, a repeated key, a string that is not
 * UTF-8) is -EDOM, with @out as it was, for the caller to take the tree path, whose
 * rendering has rules for those (U+FFFD for bytes that are not UTF-8). Source: jansson 2.14's dump.c for the escapes (the
 * short forms \" \\ \b \f \n \r \t, other control characters as \u00XX in upper-case
 * hex, '/' and non-ASCII as they are) and its utf.c for what counts as UTF-8.
 * Context: any thread. Return: 0; -EDOM as above; -ENOMEM (@out could not grow); on
 * failure @out is as it was.
 */
int convert_msgpack_to_json_text(msgpack_sbuffer *out, const msgpack_object *o);

/*
 * convert_kv_value - the JSON value a command-line VALUE stands for: "true"/"false",
 * "null", a decimal integer (with optional sign), a float ("1.5", "1e3"), else the string
 * itself. A value written inside double or single quotes ("'123'") is always a string,
 * without the quotes. Return: new reference, NULL on out of memory.
 */
json_t *convert_kv_value(const char *value);

/*
 * convert_duration_ms - parse a duration: one or more non-negative numbers (decimals
 * allowed), each followed by a unit: ms, s, m (or min), h, d, the units largest first
 * and each once (as daemon/cron/duration.c reads them; "30m1h" is refused); a lone
 * number without a unit means seconds. "500ms", "10s", "2m", "1.5h", "1d", "1h30m",
 * "2m30s500ms".
 * @ret: out, milliseconds (the sum, rounded down), written only on success.
 * Return: 0; -EINVAL for anything else; -ERANGE above UINT32_MAX ms (~49 days).
 */
int convert_duration_ms(const char *s, uint64_t *ret);

/* convert_duration_ms_max - convert_duration_ms() with @max_ms instead of UINT32_MAX
 * (`--in` takes up to IPC_RUN_AT_MAX_AHEAD_MS, 10 years). */
int convert_duration_ms_max(const char *s, uint64_t max_ms, uint64_t *ret);

/*
 * convert_time_ms - parse a point in time, as `fiberctl submit --at` takes it:
 *  - RFC 3339 / ISO 8601 with a zone: "2026-12-01T03:00:00Z", "2026-12-01T03:00:00+02:00",
 *    "2026-12-01 03:00Z" (seconds and a fraction of them optional; T, t or a space
 *    between date and time; the zone Z, z, +HH:MM, +HHMM or +HH, or the same with -);
 *  - "@EPOCH": seconds since 1970-01-01 UTC, as date(1) takes them ("@1764558000",
 *    "@1764558000.250").
 * A time without a zone is refused: which zone was meant cannot be known (the daemon
 * runs in UTC, the caller's shell in its own).
 * @ret: out, milliseconds since the epoch (UTC; a fraction beyond ms rounded down),
 * written only on success. @why: on failure, set to a phrase saying what was wrong
 * ("no time zone: add Z for UTC or an offset such as +02:00"); may be NULL.
 * Return: 0; -EINVAL (not such a time, or no zone); -ERANGE (before 1970, or an @EPOCH
 * whose milliseconds do not fit in 64 bits).
 */
int convert_time_ms(const char *s, uint64_t *ret, const char **why);

#endif /* FIBERD_CLIENT_CONVERT_H */
