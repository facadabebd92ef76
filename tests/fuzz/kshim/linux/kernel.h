/* SPDX-License-Identifier: MIT */
/* kshim (see linux/types.h): nothing codec.c needs beyond types. */
#include "types.h"
