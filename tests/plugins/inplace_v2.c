/* SPDX-License-Identifier: MIT */
/* inplace_v2.c — version 2 of the test plugin "inplace" (inplace.h). */
#define INPLACE_VERSION "2"
#include "inplace.h"
