/* Procedural codebooks (FORMAT.md §4): 16-bit trellis state -> fp16; the
 * SQG codebooks (§9, their tables live in sqg.c) behind the same entry
 * points. */
#include "format/codebook.h"

#include "core/internal.h"
#include "format/constants.h"
#include "format/sqg.h"

#include <pthread.h>

#define CB_COUNT 3

const char *trellis_codebook_name(trellis_codebook cb) {
  switch (cb) {
  case TRELLIS_CB_3INST:
    return "3inst";
  case TRELLIS_CB_MCG:
    return "mcg";
  case TRELLIS_CB_MUL1:
    return "mul1";
  case TRELLIS_CB_SQG_E4M3:
    return "sqg_e4m3";
  case TRELLIS_CB_SQG_FP16:
    return "sqg_fp16";
  }
  return "invalid";
}

int trellis_codebook_bits_valid(trellis_codebook cb, int bits) {
  const int lo = trl_codebook_min_bits(cb);
  return lo > 0 && bits >= lo && bits <= trl_codebook_max_bits(cb);
}

/* Both fp16 halves lie in [0.125, 2) with exponents at most 3 apart, so the
 * fp32 sum is exact and one RNE to fp16 equals the GPU's __hadd. */
static uint16_t lop3_pair_sum(uint32_t x) {
  uint32_t y = (x & TRL_LOP3_MASK) ^ TRL_LOP3_XOR;
  float lo = trellis_f16_to_f32((uint16_t)(y & 0xFFFFu));
  float hi = trellis_f16_to_f32((uint16_t)(y >> 16));
  float sum = lo + hi;
  return trellis_f32_to_f16(sum);
}

/* (1024 + S) * k_inv + bias has at most 21 significant bits: the fp32
 * product and sum are exact, so one RNE equals the GPU's __hfma. */
static uint16_t mul1_value(uint32_t x) {
  uint32_t byte_sum =
      (x & 0xFFu) + ((x >> 8) & 0xFFu) + ((x >> 16) & 0xFFu) + (x >> 24);
  float h = trellis_f16_to_f32((uint16_t)(TRL_MUL1_ACC + byte_sum));
  float product = h * trellis_f16_to_f32(TRL_MUL1_K_INV);
  float value = product + trellis_f16_to_f32(TRL_MUL1_BIAS);
  return trellis_f32_to_f16(value);
}

/* Only the low 16 bits of `state` are the trellis state. */
uint16_t trellis_codebook_value(trellis_codebook cb, uint32_t state) {
  uint32_t idx = state & 0xFFFFu;
  switch (cb) {
  case TRELLIS_CB_3INST:
    return lop3_pair_sum(idx * TRL_MUL_3INST + TRL_ADD_3INST);
  case TRELLIS_CB_MCG:
    return lop3_pair_sum(idx * TRL_MUL_MCG);
  case TRELLIS_CB_MUL1:
    return mul1_value(idx * TRL_MUL_MUL1);
  case TRELLIS_CB_SQG_E4M3:
  case TRELLIS_CB_SQG_FP16:
    break; /* the value depends on K */
  }
  return 0x7E00u; /* invalid codebook: fp16 NaN */
}

static uint16_t table_f16[CB_COUNT][TRL_CODEBOOK_STATES];
static float table_f32[CB_COUNT][TRL_CODEBOOK_STATES];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
  for (int cb = 0; cb < CB_COUNT; cb++) {
    for (uint32_t s = 0; s < TRL_CODEBOOK_STATES; s++) {
      uint16_t v = trellis_codebook_value((trellis_codebook)cb, s);
      table_f16[cb][s] = v;
      table_f32[cb][s] = trellis_f16_to_f32(v);
    }
  }
}

/* The K-independent codebooks (3INST, MCG, MUL1). */
static int valid_codebook(trellis_codebook cb) {
  return (unsigned)cb < CB_COUNT;
}

const uint16_t *trellis_codebook_table(trellis_codebook cb) {
  if (!valid_codebook(cb))
    return NULL;
  pthread_once(&tables_once, build_tables);
  return table_f16[cb];
}

const float *trl_codebook_table_f32(trellis_codebook cb) {
  if (!valid_codebook(cb))
    return NULL;
  pthread_once(&tables_once, build_tables);
  return table_f32[cb];
}

uint16_t trellis_codebook_value_bits(trellis_codebook cb, int bits,
                                     uint32_t state) {
  if (!trellis_codebook_bits_valid(cb, bits))
    return 0x7E00u;
  if (!trl_codebook_is_sqg(cb))
    return trellis_codebook_value(cb, state);
  if (trl_sqg_tables_status() != TRELLIS_OK)
    return 0x7E00u;
  return trl_sqg_value(cb, bits, state);
}

const uint16_t *trellis_codebook_table_bits(trellis_codebook cb, int bits) {
  if (!trellis_codebook_bits_valid(cb, bits))
    return NULL;
  if (trl_codebook_is_sqg(cb))
    return trl_sqg_state_table(cb, bits);
  return trellis_codebook_table(cb);
}

const float *trl_codebook_table_f32_bits(trellis_codebook cb, int bits) {
  if (!trellis_codebook_bits_valid(cb, bits))
    return NULL;
  if (trl_codebook_is_sqg(cb))
    return trl_sqg_state_table_f32(cb, bits);
  return trl_codebook_table_f32(cb);
}
