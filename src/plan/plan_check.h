/* SPDX-License-Identifier: Apache-2.0 */
/* Telling a live plan from a destroyed one (plan.c). Every plan carries a
 * magic number from create until destroy, which overwrites it with a
 * poison value before the memory goes; query, prepare, run and destroy
 * check it. A destroyed plan whose memory was freed and reused cannot be
 * told apart reliably, so the memory of the last TRL_PLAN_KEPT destroyed
 * plans is kept (a ring: each destroy frees the oldest) in builds without
 * NDEBUG, where the check then always holds; tests turn the same on in
 * any build. */
#ifndef TRL_PLAN_CHECK_H
#define TRL_PLAN_CHECK_H

#ifdef __cplusplus
extern "C" {
#endif

#define TRL_PLAN_KEPT 64

/* Keep destroyed plans' memory (1) or free it at destroy (0); returns the
 * previous setting. The default is 1 without NDEBUG, else 0. */
int trl_plan_keep_destroyed(int keep);

#ifdef __cplusplus
}
#endif

#endif
