// SPDX-License-Identifier: MIT
/*
 * The membarrier(2) command bits: the one definition in palrt, shared by the C++ API
 * (palrt/pal/membarrier.hpp), the preload shim (C) and the reports. A public header: a host
 * reading membarrier::supported_mask() tests these bits.
 *
 * Values from <linux/membarrier.h>, spelled out so palrt builds against older kernel headers
 * (GET_REGISTRATIONS arrived in 6.3) and compiles the same everywhere.
 */
#ifndef PALRT_CORE_MEMBARRIER_COMMANDS_H
#define PALRT_CORE_MEMBARRIER_COMMANDS_H

#ifdef __cplusplus
extern "C" {
#endif

enum palrt_membarrier_command {
  PALRT_MB_CMD_QUERY = 0,
  PALRT_MB_CMD_GLOBAL = 1 << 0,
  PALRT_MB_CMD_GLOBAL_EXPEDITED = 1 << 1,
  PALRT_MB_CMD_REGISTER_GLOBAL_EXPEDITED = 1 << 2,
  PALRT_MB_CMD_PRIVATE_EXPEDITED = 1 << 3,
  PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED = 1 << 4,
  PALRT_MB_CMD_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 5,
  PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE = 1 << 6,
  PALRT_MB_CMD_PRIVATE_EXPEDITED_RSEQ = 1 << 7,
  PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ = 1 << 8,
  PALRT_MB_CMD_GET_REGISTRATIONS = 1 << 9,
  /* One past the highest bit above: QUERY masks are read up to here. */
  PALRT_MB_CMD_BITS = 10
};

#ifdef __cplusplus
}
#endif

#endif
