/* SPDX-License-Identifier: Apache-2.0 */
/* Procedural codebooks (FORMAT.md §4): 16-bit trellis state -> fp16; the
 * SQG codebooks (§9, their tables live in sqg.c) behind the same entry
 * points. */
#include "format/codebook.h"

#include "core/internal.h"
#include "format/constants.h"
#include "format/sqg.h"

#include <pthread.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *trellis_codebook_name(trellis_codebook cb) {
  return trl_codebook_name_of((int)cb);
}

int trellis_codebook_bits_valid(trellis_codebook cb, int bits) {
  return trl_codebook_rate_valid((int)cb, bits, 0);
}

int trellis_codebook_rate_valid(trellis_codebook cb, int bits, int half) {
  return trl_codebook_rate_valid((int)cb, bits, half);
}

int trl_codebook_parse(const char *name, trellis_codebook *out) {
  if (name == NULL || name[0] == '\0')
    return 0;
  for (int cb = 0; cb < TRL_CB_COUNT; cb++) {
    const char *alias = trl_codebook_alias(cb);
    if (!strcasecmp(name, trl_codebook_name_of(cb)) ||
        (alias[0] && !strcasecmp(name, alias))) {
      *out = (trellis_codebook)cb;
      return 1;
    }
  }
  return 0;
}

const char *trl_codebook_list(int (*pred)(int cb), char *buf, size_t cap) {
  size_t used = 0;
  if (cap == 0)
    return buf;
  buf[0] = '\0';
  for (int cb = 0; cb < TRL_CB_COUNT; cb++) {
    if (!pred(cb))
      continue;
    int r = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
                     trl_codebook_name_of(cb));
    if (r < 0 || (size_t)r >= cap - used)
      break;
    used += (size_t)r;
  }
  return buf;
}

const char *trl_rate_text(int bits, int half, char *buf, size_t cap) {
  snprintf(buf, cap, half ? "%d.5" : "%d", bits);
  return buf;
}

trellis_status trl_codebook_check_rate(trellis_codebook cb, int bits, int half,
                                       const char *what) {
  const int c = (int)cb;
  if (trl_codebook_rate_valid(c, bits, half))
    return TRELLIS_OK;
  const char *name = trl_codebook_name_of(c);
  if (!half)
    return trl_fail(
        TRELLIS_ERR_SHAPE, "%s: codebook %s is defined for K %d..%d%s, got %d",
        what, name, trl_codebook_min_bits(c), trl_codebook_max_bits(c),
        trl_codebook_has_half(c) ? " (and the half rates)" : "", bits);
  if (!trl_codebook_has_half(c)) {
    char with_half[96];
    trl_codebook_list(trl_codebook_has_half, with_half, sizeof with_half);
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: K = %d.5 is a half-integer rate, which only %s "
                    "take%s; codebook %s has integer K %d..%d",
                    what, bits, with_half, strchr(with_half, ',') ? "" : "s",
                    name, trl_codebook_min_bits(c), trl_codebook_max_bits(c));
  }
  return trl_fail(TRELLIS_ERR_SHAPE,
                  "%s: K = %d.5 is not a half-integer rate of %s (K %d.5 .. "
                  "%d.5)",
                  what, bits, name, TRL_HALF_MIN_BITS, TRL_HALF_MAX_BITS);
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

/* One table per codebook row; the SQG rows stay empty (sqg.c has theirs). */
static uint16_t table_f16[TRL_CB_COUNT][TRL_CODEBOOK_STATES];
static float table_f32[TRL_CB_COUNT][TRL_CODEBOOK_STATES];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
  for (int cb = 0; cb < TRL_CB_COUNT; cb++) {
    if (trl_codebook_is_sqg(cb))
      continue;
    for (uint32_t s = 0; s < TRL_CODEBOOK_STATES; s++) {
      uint16_t v = trellis_codebook_value((trellis_codebook)cb, s);
      table_f16[cb][s] = v;
      table_f32[cb][s] = trellis_f16_to_f32(v);
    }
  }
}

/* The K-independent codebooks (3INST, MCG, MUL1). */
static int valid_codebook(trellis_codebook cb) {
  return trl_codebook_known((int)cb) && !trl_codebook_is_sqg((int)cb);
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
