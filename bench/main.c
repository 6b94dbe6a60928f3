/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis-bench`: the benchmark as its own program; `trellis bench` runs
 * the same entry point. */
#include "bench_main.h"

int main(int argc, char **argv) {
  char name[] = "bench"; /* messages and help name the command alike */
  argv[0] = name;
  return bench_main(argc, argv);
}
