/* SPDX-License-Identifier: MIT */
/*
 * kshim: the few kernel headers client-lkm/codec.c includes, for building
 * that file unchanged in user space (tests/fuzz). Only what it uses.
 */
#ifndef KSHIM_LINUX_TYPES_H
#define KSHIM_LINUX_TYPES_H
#include_next <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;
#endif
