/* SPDX-License-Identifier: MIT */
/*
 * frame.h - the fixed header in front of every rdfs message: defined once, for
 * user space and the kernel client alike, in wire/rdfs_frame.h (layout,
 * opcodes, limits, rdfs_frame_hdr_encode/_decode); what only user space has
 * is here.
 */
#ifndef RDFS_FRAME_H
#define RDFS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "../wire/rdfs_frame.h"

/* Short name of an opcode for logs ("lookup"), "unknown" otherwise. */
const char *frame_op_name(unsigned int op);

#endif
