/* SPDX-License-Identifier: MIT */
/*
 * pb_strings.h - reject protobuf string fields that hold a NUL byte.
 *
 * protobuf-c hands a string field to C as a NUL-terminated copy, so a name sent
 * as "x\0evil" would silently become "x". Servers check the raw body against
 * the message's descriptor first and refuse such a request (-EINVAL), as a
 * local file system refuses a path it cannot represent. Stateless, thread-safe.
 */
#ifndef RDFS_PB_STRINGS_H
#define RDFS_PB_STRINGS_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/*
 * 0 when no string field of @buf (a message of type @desc, nested messages
 * included) contains a NUL byte; -EINVAL when one does; -EBADMSG when @buf is
 * not a well-formed protobuf encoding (unpacking would refuse it too).
 */
int pb_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len);

#endif
