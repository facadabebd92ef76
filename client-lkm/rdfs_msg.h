/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdfs_msg.h - the prefix of every kernel log line of rdfs: the module's name
 * and a stable message id, as user space's (lib/log.h):
 *
 *	pr_warn(RDFS_MSG(1500003) "connection to I/O server %u failed: %d\n", ...);
 *
 * prints "rdfs: RDFS1500003: connection to ...". The id is unique in the tree
 * and never reused (docs/HACKING.md, "Logs"; tests/check-log-ids checks it).
 */
#ifndef RDFS_MSG_H
#define RDFS_MSG_H

#define RDFS_MSG(id)	"rdfs: RDFS" #id ": "

#endif
