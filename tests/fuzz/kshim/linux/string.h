/* SPDX-License-Identifier: MIT */
/* kshim (see linux/types.h). */
#include <string.h>
