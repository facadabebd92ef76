/* SPDX-License-Identifier: MIT */
/* kshim (see linux/types.h): the kernel's errno names are the user-space ones. */
#include_next <linux/errno.h>
