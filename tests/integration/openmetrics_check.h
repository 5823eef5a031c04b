/* SPDX-License-Identifier: MIT */
/*
 * openmetrics_check.h — a strict checker of the OpenMetrics 1.0 text format, for the
 * tests of fiberd's `metrics` (tests/integration/daemon_metrics.c). Debian 12's
 * promtool (package prometheus) is not installed on every build machine, so the test
 * runs this always and promtool too when it is on PATH.
 *
 * What it enforces, beyond the grammar (metric and label names, quoted and escaped
 * label values, a float value): every family is declared once with # TYPE before its
 * samples, and its lines are contiguous; # HELP and # UNIT name the current family; a
 * unit is the family name's suffix; sample names fit the type (counter: _total or
 * _created; gauge: the name; histogram: _bucket with an le label, _count, _sum,
 * _created); no sample (name and labels) twice; counter, _count, _sum and bucket values
 * not negative; a histogram's buckets, per label set, have increasing le, cumulative
 * counts, end at le="+Inf", and _count equals that bucket; the text ends with "# EOF\n".
 */
#ifndef FIBERD_TESTS_OPENMETRICS_CHECK_H
#define FIBERD_TESTS_OPENMETRICS_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* om_check - true when @text is valid; otherwise false and the first fault, with its
 * line number, in @err (@size bytes). */
bool om_check(const char *text, char *err, size_t size);

#endif
