/* SPDX-License-Identifier: Apache-2.0 */
/* Hooks the GPU tests and the sanitizer runs set before they create plans:
 * not part of the API, not thread-safe. */
#ifndef TRL_PLAN_TEST_HOOKS_H
#define TRL_PLAN_TEST_HOOKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Clusters of the register-direct decode-GEMM in plans created from now
 * on: at most max_cluster CTAs (0: its own limit), exactly force_cluster
 * where that fits (0: the rule's choice). Lets the tests run every
 * cluster size. */
void trl_direct_test_clusters(int max_cluster, int force_cluster);
/* k-splits across clusters of the register-direct decode-GEMM on the
 * generic path in plans created from now on: at most max_splits (1: none;
 * 0: its own limit). */
void trl_direct_test_splits(int max_splits);
/* The register-direct kernel's parked form in plans created from now on:
 * where it fits (1), never (0) or as the build says (-1, the default:
 * TRL_DIRECT_PARK, on). Lets the tests run both kernels on the same
 * shapes. */
void trl_direct_test_park(int park);

#ifdef __cplusplus
}
#endif

#endif
