/* SPDX-License-Identifier: Apache-2.0 */
/* SQG codebooks (FORMAT.md §9.2-§9.4): the T12 and D3L tables, their
 * SHA-256 checks and the per-K state -> value tables of the CPU decoders. */
#include "format/sqg.h"

#include "core/internal.h"
#include "core/sha256.h"
#include "format/codebook.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#define STATES 65536
/* One table per K of the codebook's range (format/codebooks.h). */
#define E4M3_MIN_BITS TRL_CB_MIN_BITS_SQG_E4M3
#define E4M3_TABLES (TRL_CB_MAX_BITS_SQG_E4M3 - E4M3_MIN_BITS + 1)
#define FP16_MIN_BITS TRL_CB_MIN_BITS_SQG_FP16
#define FP16_TABLES (TRL_CB_MAX_BITS_SQG_FP16 - FP16_MIN_BITS + 1)

/* §9.3: the 77 positive-half offsets where the E4M3 magnitude code steps up
 * (frozen constants of the format; the count of entries <= off is the
 * code). */
static const uint16_t staircase[77] = {
    17,    51,    85,    119,   153,   187,   221,   255,   289,   323,
    357,   391,   426,   460,   494,   528,   579,   647,   715,   783,
    851,   919,   987,   1055,  1157,  1293,  1429,  1565,  1701,  1837,
    1973,  2108,  2312,  2583,  2854,  3124,  3395,  3665,  3934,  4203,
    4606,  5141,  5674,  6205,  6732,  7258,  7779,  8298,  9070,  10085,
    11084, 12065, 13026, 13967, 14885, 15781, 17081, 18725, 20265, 21696,
    23017, 24229, 25332, 26330, 27637, 29054, 30143, 30957, 31548, 31967,
    32255, 32447, 32617, 32717, 32753, 32764, 32767};

/* §9.4: fp16 bits (base, slope) of the 104 D3L segments. */
static const uint16_t d3l_table[TRL_SQG_D3L_COUNT][2] = {
    {0x467D, 0x0000}, {0x461D, 0x0000}, {0x45EF, 0x0000}, {0x45D0, 0x0000},
    {0x45B8, 0x0000}, {0x45A5, 0x0000}, {0x4595, 0x0000}, {0x4587, 0x0000},
    {0x457B, 0x0000}, {0x4570, 0x0000}, {0x4566, 0x0000}, {0x455D, 0x0000},
    {0x4554, 0x0000}, {0x454C, 0x0000}, {0x4545, 0x0000}, {0x453E, 0x0000},
    {0x4532, 0x2600}, {0x4527, 0x2500}, {0x451C, 0x2500}, {0x4513, 0x2500},
    {0x450A, 0x2500}, {0x4502, 0x2400}, {0x44FB, 0x2400}, {0x44F4, 0x2200},
    {0x44E7, 0x2200}, {0x44DB, 0x2200}, {0x44D1, 0x20CD}, {0x44C7, 0x20CD},
    {0x44BE, 0x209A}, {0x44B5, 0x209A}, {0x44AE, 0x1E66}, {0x44A6, 0x2000},
    {0x4499, 0x1E92}, {0x448C, 0x1E55}, {0x4481, 0x1DAB}, {0x4477, 0x1D25},
    {0x446E, 0x1C92}, {0x4465, 0x1C00}, {0x445C, 0x1C92}, {0x4455, 0x1ADB},
    {0x4446, 0x1B4B}, {0x4439, 0x1A85}, {0x442D, 0x19DF}, {0x4422, 0x19A3},
    {0x4418, 0x192A}, {0x440F, 0x18D6}, {0x4406, 0x185D}, {0x43FB, 0x1848},
    {0x43DD, 0x178D}, {0x43C1, 0x16F0}, {0x43A7, 0x1650}, {0x4390, 0x15CD},
    {0x437A, 0x1571}, {0x4366, 0x1513}, {0x4353, 0x14BF}, {0x4341, 0x1472},
    {0x431F, 0x1424}, {0x4301, 0x1380}, {0x42E6, 0x12E0}, {0x42CD, 0x125A},
    {0x42B5, 0x11EE}, {0x429F, 0x1187}, {0x428A, 0x112B}, {0x4276, 0x10E7},
    {0x4252, 0x108B}, {0x4231, 0x1022}, {0x4212, 0x0F93}, {0x41F6, 0x0F05},
    {0x41DC, 0x0E8F}, {0x41C4, 0x0E23}, {0x41AC, 0x0DC7}, {0x4197, 0x0D74},
    {0x416E, 0x0D13}, {0x4149, 0x0CA1}, {0x4127, 0x0C44}, {0x4107, 0x0BEE},
    {0x40E9, 0x0B68}, {0x40CD, 0x0AF9}, {0x40B3, 0x0A98}, {0x409A, 0x0A40},
    {0x406B, 0x09D2}, {0x4041, 0x0957}, {0x4019, 0x08F4}, {0x3FE8, 0x08A0},
    {0x3FA3, 0x0859}, {0x3F61, 0x081C}, {0x3F22, 0x07D0}, {0x3EE7, 0x0774},
    {0x3E76, 0x06FD}, {0x3E0F, 0x067B}, {0x3DAE, 0x0611}, {0x3D52, 0x05B9},
    {0x3CFB, 0x056F}, {0x3CA8, 0x0531}, {0x3C59, 0x04FC}, {0x3C0C, 0x04CD},
    {0x3AF2, 0x0493}, {0x39DD, 0x0456}, {0x38D3, 0x0427}, {0x37A5, 0x0403},
    {0x35B1, 0x03E9}, {0x338C, 0x03D6}, {0x2F86, 0x03C9}, {0x004C, 0x03C3},
};

static uint8_t t12_codes[TRL_SQG_T12_SIZE];
static uint16_t t12_f16[TRL_SQG_T12_SIZE];
static uint16_t e4m3_f16[E4M3_TABLES][STATES];
static float e4m3_f32[E4M3_TABLES][STATES];
static uint16_t fp16_f16[FP16_TABLES][STATES];
static float fp16_f32[FP16_TABLES][STATES];
static const char *tables_error; /* NULL once every check passed */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

uint16_t trl_e4m3_to_f16(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  /* m * 2^-9 (subnormal) or (1 + m/8) * 2^(e-7): both exact in fp16 */
  const float mag =
      e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
  const uint16_t bits = trellis_f32_to_f16(mag);
  return (code & 0x80u) ? (uint16_t)(bits | 0x8000u) : bits;
}

/* §9.3: the exact labels of all ranks, E4M3 codes (zero has no sign). The
 * magnitude code of an offset is the count of staircase entries <= it. */
static void staircase_labels(uint8_t labels[STATES]) {
  static uint8_t mag[STATES / 2];
  size_t steps = 0;
  for (uint32_t off = 0; off < STATES / 2; off++) {
    while (steps < sizeof staircase / sizeof *staircase &&
           staircase[steps] <= off)
      steps++;
    mag[off] = (uint8_t)steps;
  }
  for (uint32_t rank = 0; rank < STATES; rank++) {
    const int negative = rank < 0x8000u;
    const uint8_t m =
        mag[negative ? (rank & 0x7FFFu) ^ 0x7FFFu : rank & 0x7FFFu];
    labels[rank] = (uint8_t)(m | (negative && m != 0 ? 0x80u : 0u));
  }
}

/* The tables are hashed as stored in memory: little-endian, as the format
 * and every supported host are. */
static int hash_is(const void *data, size_t len, const char *want) {
  char hex[65];
  trl_sha256_hex(data, len, hex);
  return strcmp(hex, want) == 0;
}

/* §9.3: T12[t] = the most frequent label of ranks 16t..16t+15, ties to the
 * smaller byte value. */
static void build_t12(const uint8_t *labels) {
  for (uint32_t t = 0; t < TRL_SQG_T12_SIZE; t++) {
    const uint8_t *group = labels + 16u * t;
    int best_count = 0;
    uint8_t best = 0;
    for (int i = 0; i < 16; i++) {
      int count = 0;
      for (int j = 0; j < 16; j++)
        count += group[j] == group[i];
      if (count > best_count || (count == best_count && group[i] < best)) {
        best_count = count;
        best = group[i];
      }
    }
    t12_codes[t] = best;
    t12_f16[t] = trl_e4m3_to_f16(best);
  }
}

/* §9.4: slope * x is exact in fp32 (<= 22 significant bits); adding base in
 * fp32 and rounding once to fp16 gives the single-rounded FMA of the format
 * for every rank (the table hashes in the tests check all of them). */
static uint16_t d3l_value(uint32_t rank) {
  uint32_t x, negative;
  const uint32_t idx = trl_sqg_d3l_index(rank, &x, &negative);
  const float base = trellis_f16_to_f32(d3l_table[idx][0]);
  const float slope = trellis_f16_to_f32(d3l_table[idx][1]);
  const float product = slope * (float)x;
  const uint16_t mag = trellis_f32_to_f16(product + base);
  return negative ? (uint16_t)(mag ^ 0x8000u) : mag;
}

static void build_tables(void) {
  static uint8_t labels[STATES];
  staircase_labels(labels);
  if (!hash_is(labels, sizeof labels, TRL_SQG_LABELS_SHA256)) {
    tables_error = "the staircase labels do not match their SHA-256";
    return;
  }
  build_t12(labels);
  if (!hash_is(t12_codes, sizeof t12_codes, TRL_SQG_T12_SHA256)) {
    tables_error = "the T12 table does not match its SHA-256";
    return;
  }
  if (!hash_is(d3l_table, sizeof d3l_table, TRL_SQG_D3L_SHA256)) {
    tables_error = "the D3L descriptor table does not match its SHA-256";
    return;
  }
  for (int b = 0; b < E4M3_TABLES; b++)
    for (uint32_t s = 0; s < STATES; s++) {
      const uint32_t rank = trl_sqg_rank(s, E4M3_MIN_BITS + b);
      e4m3_f16[b][s] = t12_f16[rank >> 4];
      e4m3_f32[b][s] = trellis_f16_to_f32(e4m3_f16[b][s]);
    }
  for (int b = 0; b < FP16_TABLES; b++)
    for (uint32_t s = 0; s < STATES; s++) {
      fp16_f16[b][s] = d3l_value(trl_sqg_rank(s, FP16_MIN_BITS + b));
      fp16_f32[b][s] = trellis_f16_to_f32(fp16_f16[b][s]);
    }
}

static int tables_ready(void) {
  pthread_once(&tables_once, build_tables);
  return tables_error == NULL;
}

trellis_status trl_sqg_tables_status(void) {
  if (tables_ready())
    return TRELLIS_OK;
  return trl_fail(TRELLIS_ERR_INTERNAL, "sqg tables: %s", tables_error);
}

const uint8_t *trl_sqg_t12(void) { return tables_ready() ? t12_codes : NULL; }

const uint16_t *trl_sqg_t12_f16(void) {
  return tables_ready() ? t12_f16 : NULL;
}

const uint16_t *trl_sqg_d3l(void) {
  return tables_ready() ? &d3l_table[0][0] : NULL;
}

/* The state table of a valid SQG (cb, bits), or NULL. */
static int table_slot(trellis_codebook cb, int bits) {
  if (bits < trl_codebook_min_bits(cb) || bits > trl_codebook_max_bits(cb) ||
      !trl_codebook_is_sqg(cb) || !tables_ready())
    return -1;
  return cb == TRELLIS_CB_SQG_E4M3 ? bits - E4M3_MIN_BITS
                                   : bits - FP16_MIN_BITS;
}

const uint16_t *trl_sqg_state_table(trellis_codebook cb, int bits) {
  const int slot = table_slot(cb, bits);
  if (slot < 0)
    return NULL;
  return cb == TRELLIS_CB_SQG_E4M3 ? e4m3_f16[slot] : fp16_f16[slot];
}

size_t trl_sqg_kernel_table(trellis_codebook cb, int bits, void *out) {
  if (table_slot(cb, bits) < 0)
    return 0;
  if (cb == TRELLIS_CB_SQG_FP16) {
    if (out)
      memcpy(out, trl_sqg_state_table(cb, bits), 65536 * sizeof(uint16_t));
    return 65536 * sizeof(uint16_t);
  }
  if (out) {
    const uint8_t *t12 = trl_sqg_t12();
    for (uint32_t s = 0; s < 65536; s++)
      ((uint8_t *)out)[s] = t12[trl_sqg_rank(s, bits) >> 4];
  }
  return 65536;
}

const float *trl_sqg_state_table_f32(trellis_codebook cb, int bits) {
  const int slot = table_slot(cb, bits);
  if (slot < 0)
    return NULL;
  return cb == TRELLIS_CB_SQG_E4M3 ? e4m3_f32[slot] : fp16_f32[slot];
}

uint16_t trl_sqg_value(trellis_codebook cb, int bits, uint32_t state) {
  const uint32_t rank = trl_sqg_rank(state, bits);
  if (cb == TRELLIS_CB_SQG_E4M3)
    return t12_f16[rank >> 4];
  return d3l_value(rank);
}
