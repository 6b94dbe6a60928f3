/* SPDX-License-Identifier: Apache-2.0 */
/* A program built against an installed libtrellis (tests/install_test.sh):
 * trellis.h comes first, so it must compile on its own. Checks the library
 * matches the header, decodes one known tile on the CPU and gets a readable
 * error for a bad call. */
#include <trellis.h>

#include <stdio.h>
#include <string.h>

/* The fp16 bit patterns of the tile below, K4 MCG, summed. */
#define CONSUMER_TILE_SUM 7992364ul

int main(void) {
  if (strcmp(trellis_version_string(), TRELLIS_VERSION_STRING) != 0) {
    fprintf(stderr, "consumer: library %s, header %s\n",
            trellis_version_string(), TRELLIS_VERSION_STRING);
    return 1;
  }
  int16_t tile[16 * 4];
  for (unsigned i = 0; i < 16 * 4; i++)
    tile[i] = (int16_t)(uint16_t)((i * 40503u + 12345u) & 0xFFFFu);
  uint16_t out[256];
  trellis_status st = trellis_decode_tile(tile, 4, TRELLIS_CB_MCG, out);
  if (st != TRELLIS_OK) {
    fprintf(stderr, "consumer: decode: %s\n", trellis_last_error());
    return 1;
  }
  unsigned long sum = 0;
  for (int i = 0; i < 256; i++)
    sum += out[i];
  if (sum != CONSUMER_TILE_SUM) {
    fprintf(stderr, "consumer: decoded tile sum %lu, want %lu\n", sum,
            CONSUMER_TILE_SUM);
    return 1;
  }
  if (trellis_decode_tile(NULL, 4, TRELLIS_CB_MCG, out) !=
          TRELLIS_ERR_INVALID_ARGUMENT ||
      trellis_last_error()[0] == '\0') {
    fprintf(stderr, "consumer: a NULL tile was not refused with a message\n");
    return 1;
  }
  printf("consumer: libtrellis %s (CUDA %s), tile sum %lu\n",
         trellis_version_string(), trellis_cuda_built() ? "built" : "not built",
         sum);
  return 0;
}
