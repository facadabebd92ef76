/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs_wire.h - the verbs module's SEND messages and connection
 * parameters: defined once, with the kernel client, in wire/rdfs_verbs.h.
 */
#ifndef RDFS_XPORT_VERBS_WIRE_H
#define RDFS_XPORT_VERBS_WIRE_H

#include "frame.h"
#include "../wire/rdfs_verbs.h"

#endif
