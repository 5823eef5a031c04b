/* SPDX-License-Identifier: MIT */
/* inplace_v1.c — version 1 of the test plugin "inplace" (inplace.h). */
#define INPLACE_VERSION "1"
#include "inplace.h"
