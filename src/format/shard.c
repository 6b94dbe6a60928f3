/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor-parallel shards of a layer (trellis.h, "Tensor parallelism").
 *
 * A shard is worked out per record (format/weight.h: a uniform layer is one
 * record, a pair two): the record's part of the rank's range on the split
 * axis, if any, becomes a record of the shard. Along k that part is a run
 * of whole tile rows, contiguous in [k/16][n/16][16K], so it is a view; along
 * n it is a copy (k/16 runs, one per tile row) unless the record's whole
 * width is the rank's. One record left makes a uniform shard, two a pair.
 * Both payload layouts cut alike: the lane layout permutes bytes only
 * inside a group of 8 tiles of one tile row (format/lanes.h), which a
 * boundary at a multiple of 128 never splits, so a shard moves whole groups
 * and keeps the layout of its source. */
#include "core/internal.h"
#include "format/weight.h"

#include <string.h>

/* Caller memory for copied records: every run starts 16-byte aligned. */
#define SHARD_ALIGN 16

const char *trellis_split_name(trellis_split split) {
  switch (split) {
  case TRELLIS_SPLIT_N:
    return "n";
  case TRELLIS_SPLIT_K:
    return "k";
  }
  return "invalid";
}

void trellis_shard_desc_init(trellis_shard_desc *d) {
  if (d == NULL)
    return;
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->split = TRELLIS_SPLIT_N;
  d->ranks = 1;
}

/* Bytes of one tile of a record at K = bits (+ 1/2 when `half`): 16 K int16
 * words (FORMAT.md §3.1), 16 H bytes at H = 2K half-bits per weight. The
 * one place that knows a tile's size. */
static size_t tile_bytes(const trl_record *r, int half) {
  return 16u * (size_t)(2 * r->bits + (half ? 1 : 0));
}

static trellis_status check_desc(const trellis_shard_desc *d) {
  TRL_CHECK_STRUCT(d, trellis_shard_desc, "shard desc");
  if (d->split != TRELLIS_SPLIT_N && d->split != TRELLIS_SPLIT_K)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "shard desc.split: expected TRELLIS_SPLIT_N (0) or "
                    "TRELLIS_SPLIT_K (1), got %d",
                    (int)d->split);
  if (d->ranks < 1)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "shard desc.ranks: expected >= 1, got %d", d->ranks);
  if (d->rank < 0 || d->rank >= d->ranks)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "shard desc.rank: expected 0..%d (ranks = %d), got %d",
                    d->ranks - 1, d->ranks, d->rank);
  return TRELLIS_OK;
}

/* Every explicit split point, so that each rank sees the same checks. */
static trellis_status check_points(int64_t length,
                                   const trellis_shard_desc *d) {
  int64_t prev = 0;
  for (int i = 0; i + 1 < d->ranks; i++) {
    const int64_t p = d->points[i];
    if (p % TRELLIS_HBLOCK != 0 || p <= prev || p >= length)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "shard desc.points[%d] = %lld: expected a multiple "
                      "of %d in %lld..%lld (split points increase "
                      "strictly inside an axis of %lld features)",
                      i, (long long)p, TRELLIS_HBLOCK,
                      (long long)(prev + TRELLIS_HBLOCK),
                      (long long)(length - TRELLIS_HBLOCK), (long long)length);
    prev = p;
  }
  return TRELLIS_OK;
}

trellis_status trellis_shard_range(int64_t length, const trellis_shard_desc *d,
                                   int64_t *begin, int64_t *end) {
  trellis_status st = check_desc(d);
  if (st != TRELLIS_OK)
    return st;
  if (begin == NULL || end == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "shard_range: %s is NULL",
                    begin ? "end" : "begin");
  if (length <= 0 || length % TRELLIS_HBLOCK != 0)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "shard_range: axis length expected a positive multiple "
                    "of %d, got %lld",
                    TRELLIS_HBLOCK, (long long)length);
  const int64_t blocks = length / TRELLIS_HBLOCK;
  if (blocks < d->ranks)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "shard: an axis of %lld features has %lld block%s of "
                    "%d, fewer than the %d ranks (each needs one)",
                    (long long)length, (long long)blocks,
                    blocks == 1 ? "" : "s", TRELLIS_HBLOCK, d->ranks);
  const int64_t r = d->rank;
  if (d->points == NULL) {
    const int64_t q = blocks / d->ranks, extra = blocks % d->ranks;
    const int64_t first = r * q + (r < extra ? r : extra);
    *begin = first * TRELLIS_HBLOCK;
    *end = (first + q + (r < extra)) * TRELLIS_HBLOCK;
    return TRELLIS_OK;
  }
  if ((st = check_points(length, d)) != TRELLIS_OK)
    return st;
  *begin = r == 0 ? 0 : d->points[r - 1];
  *end = r == d->ranks - 1 ? length : d->points[r];
  return TRELLIS_OK;
}

/* One record of the shard: a view, or `rows` runs of `run` bytes `pitch`
 * apart at `src`, copied to `offset` in the caller's memory. */
typedef struct shard_record {
  trl_record rec; /* its shape in the shard; trellis NULL until placed */
  const uint8_t *src;
  size_t rows, run, pitch, offset;
  int copy;
} shard_record;

typedef struct shard_plan {
  trellis_weight full; /* the source */
  trellis_weight out;  /* the shard, records not yet placed */
  shard_record rec[2];
  int count;
  size_t bytes; /* caller memory */
} shard_plan;

/* The part of record `r` in [begin, end) of the split axis, if any. */
static int plan_record(const trl_record *r, int half, trellis_split split,
                       int64_t begin, int64_t end, shard_record *out,
                       size_t *bytes) {
  const int along_k = split == TRELLIS_SPLIT_K;
  const int64_t first = 16 * (along_k ? r->kt0 : r->nt0);
  const int64_t length = along_k ? r->k : r->n;
  const int64_t lo = begin > first ? begin : first;
  const int64_t hi = end < first + length ? end : first + length;
  if (lo >= hi)
    return 0;
  const int64_t l0 = lo - first, width = hi - lo;
  const size_t tile = tile_bytes(r, half);
  const uint8_t *base = (const uint8_t *)r->trellis;
  memset(out, 0, sizeof *out);
  out->rec = *r;
  if (along_k) {
    /* whole tile rows: contiguous */
    out->rec.k = width;
    out->src = base + (size_t)(l0 / 16) * (size_t)(r->n / 16) * tile;
  } else if (width == r->n) {
    out->src = base; /* the record's whole width */
  } else {
    out->rec.n = width;
    out->copy = 1;
    out->src = base + (size_t)(l0 / 16) * tile;
    out->rows = (size_t)(r->k / 16);
    out->run = (size_t)(width / 16) * tile;
    out->pitch = (size_t)(r->n / 16) * tile;
    size_t total = 0, at = *bytes;
    /* fits: the copy is smaller than the validated payload */
    (void)trl_mul_size(out->rows, out->run, &total);
    (void)trl_carve_size(&at, total, SHARD_ALIGN, &out->offset);
    *bytes = at;
  }
  return 1;
}

static trellis_status plan_shard(const trellis_weight *w,
                                 const trellis_shard_desc *d, shard_plan *p) {
  memset(p, 0, sizeof *p);
  trellis_status st = trl_weight_load(w, &p->full);
  if (st != TRELLIS_OK)
    return st;
  if (p->full.layout == TRELLIS_LAYOUT_KMAJOR)
    return trl_fail(TRELLIS_ERR_LAYOUT,
                    "weight_shard: a k-major payload is not cut (its groups "
                    "span 128 rows of k and interleave the columns); shard "
                    "the checkpoint or lane layout and write each shard's "
                    "k-major copy");
  if ((st = check_desc(d)) != TRELLIS_OK)
    return st;
  const trellis_weight *f = &p->full;
  const int along_k = d->split == TRELLIS_SPLIT_K;
  int64_t begin, end;
  if ((st = trellis_shard_range(along_k ? f->k : f->n, d, &begin, &end)) !=
      TRELLIS_OK)
    return trl_fail_prefix(st, "shard of a %lld x %lld layer along %s",
                           (long long)f->k, (long long)f->n,
                           trellis_split_name(d->split));
  trl_record recs[2];
  const int count = trl_weight_records(f, recs);
  for (int r = 0; r < count; r++)
    p->count += plan_record(&recs[r], f->half, d->split, begin, end,
                            &p->rec[p->count], &p->bytes);

  trellis_weight *o = &p->out;
  *o = *f;
  if (along_k) {
    o->k = end - begin;
    if (o->suh)
      o->suh += begin;
    if (o->su)
      o->su += begin / 16;
    if (begin != 0)
      o->bias = NULL; /* added by rank 0 alone */
  } else {
    o->n = end - begin;
    if (o->svh)
      o->svh += begin;
    if (o->sv)
      o->sv += begin / 16;
    if (o->bias)
      o->bias += begin;
  }
  if (p->count == 1) { /* uniform, or one record of a pair */
    o->bits = p->rec[0].rec.bits;
    o->pair = TRELLIS_PAIR_NONE;
    o->rate_axis = TRELLIS_RATE_AXIS_N;
    o->bits1 = 0;
    o->trellis1 = NULL;
  }
  return TRELLIS_OK;
}

trellis_status trellis_weight_shard_bytes(const trellis_weight *w,
                                          const trellis_shard_desc *d,
                                          size_t *bytes) {
  if (bytes == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight_shard_bytes: bytes is NULL");
  shard_plan p;
  trellis_status st = plan_shard(w, d, &p);
  if (st == TRELLIS_OK)
    *bytes = p.bytes;
  return st;
}

/* Whether *out (which keeps its own struct_size) can hold the shard. */
static trellis_status check_out(const trellis_weight *out,
                                const trellis_weight *shard) {
  const uint32_t size = out->struct_size;
  if (size != TRELLIS_WEIGHT_SIZE_V1 && size != TRELLIS_WEIGHT_SIZE_V2 &&
      size < sizeof *out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight_shard: out.struct_size %u is neither %zu, %zu "
                    "nor >= %zu (call trellis_weight_init first)",
                    (unsigned)size, (size_t)TRELLIS_WEIGHT_SIZE_V1,
                    (size_t)TRELLIS_WEIGHT_SIZE_V2, sizeof *out);
  if (size == TRELLIS_WEIGHT_SIZE_V1 && shard->pair != TRELLIS_PAIR_NONE)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight_shard: the shard is a pair, which an out weight "
                    "of the first version (struct_size %u) cannot hold",
                    (unsigned)size);
  if (size < sizeof *out &&
      (shard->half || shard->layout != TRELLIS_LAYOUT_CHECKPOINT))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight_shard: the shard has a %s, which an out weight "
                    "without the half and layout fields (struct_size %u) "
                    "cannot hold",
                    shard->half ? "half-integer rate" : "lane layout",
                    (unsigned)size);
  return TRELLIS_OK;
}

trellis_status trellis_weight_shard(const trellis_weight *w,
                                    const trellis_shard_desc *d, void *memory,
                                    size_t memory_bytes, trellis_weight *out) {
  if (out == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "weight_shard: out is NULL");
  shard_plan p;
  trellis_status st = plan_shard(w, d, &p);
  if (st == TRELLIS_OK)
    st = check_out(out, &p.out);
  if (st != TRELLIS_OK)
    return st;
  if (p.bytes > 0 && (memory == NULL || memory_bytes < p.bytes))
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "weight_shard: the shard copies %zu payload bytes "
                    "(trellis_weight_shard_bytes), memory has %zu%s",
                    p.bytes, memory ? memory_bytes : (size_t)0,
                    memory ? "" : " (NULL)");
  if (p.bytes > 0 && (uintptr_t)memory % SHARD_ALIGN != 0)
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "weight_shard: memory %p is not %d-byte aligned", memory,
                    SHARD_ALIGN);
  const int16_t *placed[2] = {NULL, NULL};
  for (int r = 0; r < p.count; r++) {
    const shard_record *s = &p.rec[r];
    if (!s->copy) {
      placed[r] = (const int16_t *)s->src;
      continue;
    }
    uint8_t *dst = (uint8_t *)memory + s->offset;
    for (size_t row = 0; row < s->rows; row++)
      memcpy(dst + row * s->run, s->src + row * s->pitch, s->run);
    placed[r] = (const int16_t *)dst;
  }
  p.out.trellis = placed[0];
  if (p.count == 2)
    p.out.trellis1 = placed[1];
  if (trellis_weight_validate(&p.out) != TRELLIS_OK)
    return trl_fail_prefix(TRELLIS_ERR_INTERNAL,
                           "weight_shard: the shard is not a valid layer");
  const uint32_t size = out->struct_size;
  memcpy(out, &p.out, size < sizeof *out ? size : sizeof *out);
  out->struct_size = size;
  return TRELLIS_OK;
}
