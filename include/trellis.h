/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtrellis: EXL3 trellis-quantized linear layers on NVIDIA GPUs, with a
 * bit-exact CPU reference.
 *
 * One public header. It never requires cuda_runtime.h: CUDA streams are
 * passed as opaque `void *` (a cudaStream_t; NULL is the legacy default
 * stream). All fp16 and bf16 values on the host side are raw bit patterns in
 * uint16_t.
 *
 * Conventions
 *   - Every entry point returns a trellis_status. On failure a readable detail
 *     message (which argument, what was expected, what was given) is kept per
 *     thread and read with trellis_last_error(). The library never prints and
 *     never aborts.
 *   - Structs the caller fills carry `struct_size` as their first member; set
 *     it with the matching *_init() call so newer libraries can grow them.
 *   - Objects the library owns are opaque (trellis_file, trellis_model,
 *     trellis_device_weight, trellis_plan) and freed by their own
 *     *_close / *_destroy call, which accepts NULL.
 */
#ifndef TRELLIS_H
#define TRELLIS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TRELLIS_API
#elif defined(TRELLIS_BUILDING_LIBRARY)
#define TRELLIS_API __attribute__((visibility("default")))
#else
#define TRELLIS_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* 0.2.0: an uploaded weight is an opaque trellis_device_weight with its own
 * destroy (trellis_weight_free_device is gone).
 * 0.3.0: trellis_plans_buffer_sizes and trellis_model_file_path; plans of
 * the SQG codebooks and of pairs run on the GPU's generic and dense paths
 * (they were refused).
 * 0.4.0: the lane layout: trellis_weight gains `half` and `layout`
 * (TRELLIS_WEIGHT_SIZE_V2 is the 0.3 struct), plans read device weights in
 * the lane layout only (TRELLIS_ERR_LAYOUT otherwise; trellis_weight_upload
 * produces it, trellis_weight_repack converts framework memory), and the
 * register-direct small-m kernel replaces the persistent one;
 * trellis_model_hold and trellis_model_release (a model closed while other
 * threads compute on it). ExLlamaV3 1.6 checkpoints: half-integer rates
 * (trellis_weight.half, trellis_layer_info.half,
 * trellis_codebook_rate_valid, trellis_decode_tile_rate), the 1.6 fields of
 * trellis_quant_config (at its end), other-tensor kinds
 * (trellis_model_other_kind) and the n-gram file (trellis_model_ngram_file);
 * tensor-parallel shards (trellis_weight_shard, trellis_shard_range).
 * 0.5.0: the k-major layout (TRELLIS_LAYOUT_KMAJOR) and the functions that
 * write it (trellis_weight_upload_layout, trellis_weight_repack_layout,
 * trellis_weight_repack_host_layout); plans of k-major weights run the
 * k-major decode-GEMM on the generic path. */
#define TRELLIS_VERSION_MAJOR 0
#define TRELLIS_VERSION_MINOR 5
#define TRELLIS_VERSION_PATCH 0
#define TRELLIS_VERSION_NUMBER                                                 \
  (TRELLIS_VERSION_MAJOR * 10000 + TRELLIS_VERSION_MINOR * 100 +               \
   TRELLIS_VERSION_PATCH)
#define TRELLIS_VERSION_STRING "0.5.0"

/* TRELLIS_VERSION_NUMBER of the library actually linked. */
TRELLIS_API int trellis_version_number(void);
TRELLIS_API const char *trellis_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                   */
/* ------------------------------------------------------------------------ */

typedef enum trellis_status {
  TRELLIS_OK = 0,
  TRELLIS_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, bad enum, misuse */
  TRELLIS_ERR_OUT_OF_MEMORY = 2,    /* a host or device allocation failed */
  TRELLIS_ERR_IO = 3,               /* open/read/write/mmap failed */
  TRELLIS_ERR_FORMAT = 4,           /* malformed file: header, JSON, offsets */
  TRELLIS_ERR_DTYPE = 5,            /* a tensor or buffer has the wrong dtype */
  TRELLIS_ERR_SHAPE = 6,         /* a tensor or problem has the wrong shape */
  TRELLIS_ERR_NOT_FOUND = 7,     /* named tensor, layer or file missing */
  TRELLIS_ERR_UNSUPPORTED = 8,   /* valid request this build cannot do */
  TRELLIS_ERR_WORKSPACE = 9,     /* workspace missing or too small */
  TRELLIS_ERR_BUFFER = 10,       /* a caller buffer missing/small/misaligned */
  TRELLIS_ERR_NO_DEVICE = 11,    /* no CUDA device, or built without CUDA */
  TRELLIS_ERR_ARCH = 12,         /* no kernel image for this GPU's arch */
  TRELLIS_ERR_CUDA = 13,         /* a CUDA runtime or cuBLASLt call failed */
  TRELLIS_ERR_NOT_PREPARED = 14, /* plan used before trellis_plan_prepare */
  TRELLIS_ERR_INTERNAL = 15,
  TRELLIS_ERR_LAYOUT = 16 /* payload in the wrong layout for the call */
} trellis_status;

/* "TRELLIS_ERR_SHAPE" etc.; "TRELLIS_ERR_UNKNOWN" for out-of-range codes. */
TRELLIS_API const char *trellis_status_name(trellis_status status);
/* A short English description of the status. */
TRELLIS_API const char *trellis_status_string(trellis_status status);
/* Detail message of the last failing call on this thread ("" if none). The
 * pointer stays valid until the next library call on this thread. It is
 * safe to print: control characters, bytes that are not UTF-8 and
 * invisible line-reordering marks in the names and paths it quotes appear
 * as "\xHH" (a backslash itself is kept). */
TRELLIS_API const char *trellis_last_error(void);
/* Clears this thread's detail message. */
TRELLIS_API void trellis_clear_error(void);

/* ------------------------------------------------------------------------ */
/* Numeric types                                                             */
/* ------------------------------------------------------------------------ */

typedef enum trellis_dtype {
  TRELLIS_F16 = 0,
  TRELLIS_BF16 = 1,
  TRELLIS_F32 = 2
} trellis_dtype;

TRELLIS_API size_t trellis_dtype_size(trellis_dtype dtype); /* 0 if invalid */
TRELLIS_API const char *trellis_dtype_name(trellis_dtype dtype);

/* Round-to-nearest-even conversions (NaN stays NaN, overflow goes to inf). */
TRELLIS_API uint16_t trellis_f32_to_f16(float value);
TRELLIS_API float trellis_f16_to_f32(uint16_t bits);
TRELLIS_API uint16_t trellis_f32_to_bf16(float value);
TRELLIS_API float trellis_bf16_to_f32(uint16_t bits);

/* ------------------------------------------------------------------------ */
/* The EXL3 format                                                           */
/* ------------------------------------------------------------------------ */

/* 3INST, MCG and MUL1 are EXL3's codebooks (any K 1..8). The SQG codebooks
 * come from the b12x formats (docs/FORMAT.md §9): their value of a state
 * depends on K, and each is defined at some K only. */
typedef enum trellis_codebook {
  TRELLIS_CB_3INST = 0,
  TRELLIS_CB_MCG = 1,
  TRELLIS_CB_MUL1 = 2,
  TRELLIS_CB_SQG_E4M3 = 3, /* "sqg_e4m3": K 2..6 (5 and 6: b12x extension) */
  TRELLIS_CB_SQG_FP16 = 4  /* "sqg_fp16": K 5..6 */
} trellis_codebook;

/* "3inst", "mcg", "mul1", "sqg_e4m3", "sqg_fp16"; "invalid" otherwise. */
TRELLIS_API const char *trellis_codebook_name(trellis_codebook cb);

#define TRELLIS_MIN_BITS 1
#define TRELLIS_MAX_BITS 8
#define TRELLIS_TILE 16    /* weight tile is 16 x 16 */
#define TRELLIS_HBLOCK 128 /* Hadamard block, and required k/n multiple */

/* 1 when codebook `cb` is defined at `bits` bits per weight, else 0. */
TRELLIS_API int trellis_codebook_bits_valid(trellis_codebook cb, int bits);
/* The same for K = bits + half/2: half 0 is trellis_codebook_bits_valid;
 * half 1 is a half-integer rate of ExLlamaV3 1.6, defined for MUL1 at bits
 * 1..3 (K 1.5, 2.5, 3.5) only. */
TRELLIS_API int trellis_codebook_rate_valid(trellis_codebook cb, int bits,
                                            int half);

/* fp16 bits of the codebook value of one trellis state (its low 16 bits are
 * used). An invalid codebook, or an SQG codebook (whose value depends on K:
 * use trellis_codebook_value_bits), gives fp16 NaN (0x7E00). */
TRELLIS_API uint16_t trellis_codebook_value(trellis_codebook cb,
                                            uint32_t state);
/* The whole codebook: 65536 fp16 values indexed by state (built once,
 * thread-safe). NULL for an invalid or an SQG codebook. */
TRELLIS_API const uint16_t *trellis_codebook_table(trellis_codebook cb);
/* The same for any codebook at `bits` bits per weight (3INST, MCG and MUL1
 * give their K-independent values). NaN / NULL where
 * trellis_codebook_bits_valid(cb, bits) is 0. */
TRELLIS_API uint16_t trellis_codebook_value_bits(trellis_codebook cb, int bits,
                                                 uint32_t state);
TRELLIS_API const uint16_t *trellis_codebook_table_bits(trellis_codebook cb,
                                                        int bits);

/* Decodes one tile: `tile` holds 16*bits int16 words exactly as stored; `out`
 * receives the 16x16 fp16 weights row-major (out[16*r + c], r = input row).
 * (cb, bits) must be valid (trellis_codebook_bits_valid; TRELLIS_ERR_SHAPE
 * otherwise). */
TRELLIS_API trellis_status trellis_decode_tile(const int16_t *tile, int bits,
                                               trellis_codebook cb,
                                               uint16_t out[256]);
/* The same at K = bits + half/2 (trellis_codebook_rate_valid): `tile`
 * holds 16*K int16 words, 24, 40 or 56 for the half-integer rates (bit
 * layout: docs/FORMAT.md, "Half-integer rates"). half 0 is
 * trellis_decode_tile. */
TRELLIS_API trellis_status trellis_decode_tile_rate(const int16_t *tile,
                                                    int bits, int half,
                                                    trellis_codebook cb,
                                                    uint16_t out[256]);

/* Expands legacy packed sign bits (bit j of word w -> element 16w+j; 1 means
 * -1) into `count` fp16 values of +-1. */
TRELLIS_API trellis_status trellis_expand_signs(const int16_t *packed,
                                                int64_t count, uint16_t *out);

/* Paired payloads (b12x "QSRT" pairs): the 256 channels of the layer's rate
 * axis are two 128-channel records, each an ordinary tile array at its own
 * K, decoded with the layer's codebook (MCG or SQG_E4M3). The value is the
 * rate byte (K of record0 << 4) | K of record1. P43, P44 and P22 use the
 * same layout as P24 and P33. */
typedef enum trellis_pair_kind {
  TRELLIS_PAIR_NONE = 0, /* a uniform layer */
  TRELLIS_PAIR_P22 = 0x22,
  TRELLIS_PAIR_P24 = 0x24,
  TRELLIS_PAIR_P33 = 0x33,
  TRELLIS_PAIR_P43 = 0x43,
  TRELLIS_PAIR_P44 = 0x44
} trellis_pair_kind;

/* The axis a pair splits (its length is 256; the other is any multiple of
 * 128, "orth" below). */
typedef enum trellis_rate_axis {
  /* n = 256 (gate/up): record0 = output columns 0..127, record1 = columns
   * 128..255; record r is [k/16][8][16*K_r] */
  TRELLIS_RATE_AXIS_N = 0,
  /* k = 256 (down): record0 = input rows 0..127, record1 = rows 128..255;
   * record r is [8][n/16][16*K_r] */
  TRELLIS_RATE_AXIS_K = 1
} trellis_rate_axis;

/* "P24" etc., "none" for TRELLIS_PAIR_NONE, "invalid" otherwise. */
TRELLIS_API const char *trellis_pair_kind_name(trellis_pair_kind kind);
/* "n", "k", or "invalid". */
TRELLIS_API const char *trellis_rate_axis_name(trellis_rate_axis axis);

/* How a weight's tile payload (trellis, trellis1) is arranged in memory.
 * CHECKPOINT: the tile array exactly as a file stores it, what the CPU
 * functions read. LANES: the GPU's decode layout, the same bytes per tile
 * row of 8 tiles permuted so that each lane of a warp reads its share with
 * 16-byte loads (docs/FORMAT.md, "The lane layout"); trellis_weight_upload
 * produces it and trellis_weight_repack converts device memory to it.
 * KMAJOR: the same lane packing, but a group holds the 8 tiles of one tile
 * column over 128 rows of k, and a column's groups follow one another
 * (docs/FORMAT.md, "The k-major lane layout"): what the k-major
 * decode-GEMM streams. Opt in with the *_layout functions below; uniform
 * layers of the EXL3 codebooks (3INST, MCG, MUL1) at every rate. Its plans
 * take the generic path only (no fused path: they need a workspace) and
 * read neither an external rotation, bf16 compute, split_k nor the
 * LEGACY_KERNELS or EXACT_WEIGHTS flags (TRELLIS_ERR_LAYOUT). Plans read
 * LANES or KMAJOR, never CHECKPOINT. */
typedef enum trellis_layout {
  TRELLIS_LAYOUT_CHECKPOINT = 0,
  TRELLIS_LAYOUT_LANES = 1,
  TRELLIS_LAYOUT_KMAJOR = 2
} trellis_layout;

/* One linear layer. Pointers are host memory for the CPU functions and
 * device memory for the plan API. Exactly one of suh/su and one of svh/sv is
 * set.
 *
 * Versions: struct_size is sizeof(trellis_weight) (or larger, from a newer
 * header), exactly TRELLIS_WEIGHT_SIZE_V2 (a header without the half and
 * layout fields: an integer rate in the checkpoint layout) or exactly
 * TRELLIS_WEIGHT_SIZE_V1 (without the pair fields either: a uniform
 * layer); the library never reads past struct_size. */
typedef struct trellis_weight {
  uint32_t struct_size; /* sizeof(trellis_weight) */
  int64_t k;            /* in_features, multiple of 128 */
  int64_t n;            /* out_features, multiple of 128 */
  int bits;             /* K, 1..8; a pair: K of record0 */
  trellis_codebook codebook;
  const int16_t *trellis; /* [k/16][n/16][16*bits]; a pair: record0 */
  const uint16_t *suh;    /* fp16 [k], or NULL when su is used */
  const uint16_t *svh;    /* fp16 [n], or NULL when sv is used */
  const int16_t *su;      /* legacy packed signs [k/16], or NULL */
  const int16_t *sv;      /* legacy packed signs [n/16], or NULL */
  const uint16_t *bias;   /* fp16 [n], or NULL */
  /* ---- pairs, after TRELLIS_WEIGHT_SIZE_V1 (all zero when uniform) ---- */
  trellis_pair_kind pair;      /* TRELLIS_PAIR_NONE: a uniform layer */
  trellis_rate_axis rate_axis; /* which of k, n is 256 */
  int bits1;                   /* K of record1 */
  const int16_t *trellis1;     /* record1's tiles */
  /* ---- after TRELLIS_WEIGHT_SIZE_V2 (zero: integer K, checkpoint) ---- */
  /* 1: K = bits + 1/2, a half-integer rate of ExLlamaV3 1.6 (MUL1 only,
   * bits 1..3: K 1.5, 2.5, 3.5; tiles of 16*K = 24, 40, 56 int16). */
  int half;
  trellis_layout layout; /* of trellis and trellis1 */
} trellis_weight;

/* sizeof(trellis_weight) before the pair fields. */
#define TRELLIS_WEIGHT_SIZE_V1 offsetof(trellis_weight, pair)
/* sizeof(trellis_weight) before the half and layout fields. */
#define TRELLIS_WEIGHT_SIZE_V2 offsetof(trellis_weight, half)

TRELLIS_API void trellis_weight_init(trellis_weight *w);
/* Checks struct_size, shapes (k, n multiples of 128, bits 1..8), codebook,
 * half (0 or 1), that (codebook, bits, half) is valid
 * (trellis_codebook_rate_valid: a half rate is MUL1 at bits 1..3, never a
 * pair) and that exactly one sign form per side is present; a uniform
 * layer's pair fields must be zero (rate_axis, bits1, trellis1). For a
 * pair: a known kind and axis, the rate axis 256 long, bits and bits1 equal
 * to the kind's K values, codebook MCG or SQG_E4M3, trellis1 set, scaled
 * suh/svh (their values must also be finite, which the CPU functions check
 * when they read them). Does not touch the data. Unknown enum values, a
 * pair's other codebooks and missing pointers are
 * TRELLIS_ERR_INVALID_ARGUMENT; wrong sizes, record Ks and (codebook, K)
 * combinations TRELLIS_ERR_SHAPE. */
TRELLIS_API trellis_status trellis_weight_validate(const trellis_weight *w);
/* trellis_weight_validate, then the values: every suh, svh and bias
 * element must be finite (TRELLIS_ERR_INVALID_ARGUMENT naming the vector and
 * the first bad index). Host pointers only; reads k + 2n fp16 values. A
 * finite EXL3 layer never fails it, and the model loader rejects files that
 * do. The forward, decode and plan functions do not scan values, so check
 * weights you build yourself with this before running them. */
TRELLIS_API trellis_status trellis_weight_check_values(const trellis_weight *w);
/* Bytes of the trellis payload: k*n*K/8, i.e. k*n*bits/8, or
 * k*n*(2*bits+1)/16 at a half-integer rate; a pair: both records,
 * orth*128*(bits + bits1)/8. */
TRELLIS_API size_t trellis_weight_payload_bytes(const trellis_weight *w);

/* W_hat, fp16 [k][n] row-major, bit-exact. */
TRELLIS_API trellis_status trellis_decode_weight(const trellis_weight *w,
                                                 uint16_t *w_hat);
/* Original-basis weight diag(s_in) * Hblk * W_hat * Hblk * diag(s_out), fp32
 * [k][n] row-major, computed in fp32 (bias not included). */
TRELLIS_API trellis_status trellis_dense_weight(const trellis_weight *w,
                                                float *dense);

/* ------------------------------------------------------------------------ */
/* CPU reference forward                                                     */
/* ------------------------------------------------------------------------ */

/*
 * y[m][n] = Hblk(Hblk(x * s_in) . W_hat) * s_out + bias, where
 *   - the rotated input is rounded to fp16 exactly as the GPU does:
 *     a = fp16(float(x) * float(s_in)) (one rounding; for fp16 x this is the
 *     GPU's __hmul); fp32 butterflies; * 1/sqrt(128); RNE to fp16;
 *   - the product accumulates in fp32 (fp16 x fp16 products are exact);
 *   - the output rotation runs in fp32; fp16/bf16 outputs round once at the
 *     end, after svh and bias.
 * The weight is decoded tile by tile through the codebook table; no W_hat is
 * materialised. Work is split over `threads` threads (0 = one per core).
 * `workspace` must hold trellis_cpu_workspace_size() bytes (the size does
 * not depend on `threads`; the argument is kept for future schedules).
 */
TRELLIS_API size_t trellis_cpu_workspace_size(const trellis_weight *w,
                                              int64_t m, int threads);
TRELLIS_API trellis_status trellis_cpu_forward(
    const trellis_weight *w, const void *x, trellis_dtype x_dtype, int64_t m,
    void *y, trellis_dtype y_dtype, void *workspace, size_t workspace_bytes,
    int threads);
/* The number of threads trellis_cpu_forward splits `w`'s work over for
 * `threads`: 0 means one per online core; never more than 256, nor than
 * n / 16 (one 16-column tile each). A thread that cannot be created has its
 * share run by the caller's thread. 0 for invalid arguments. */
TRELLIS_API int trellis_cpu_forward_threads(const trellis_weight *w,
                                            int threads);

/* ------------------------------------------------------------------------ */
/* Tensor parallelism: one rank's shard of a layer                           */
/* ------------------------------------------------------------------------ */

/*
 * An engine that runs a layer on N ranks gives rank r a shard: an ordinary
 * trellis_weight, which every CPU and GPU function takes (a plan of a shard
 * is a plan like any other; upload it with trellis_weight_upload).
 *   - TRELLIS_SPLIT_N, column-parallel: output features [n0, n1). The shard
 *     maps the whole x to y[:, n0:n1] of the layer, exactly: every output
 *     128-block lies on one rank with its svh and bias. The payload's column
 *     slice is not contiguous in [k/16][n/16][16K], so it is copied into
 *     caller memory (k/16 runs of (n1 - n0) * 2K bytes, one per tile row); suh,
 *     su, svh, sv and bias are views.
 *   - TRELLIS_SPLIT_K, row-parallel: input features [k0, k1). The shard maps
 *     x[:, k0:k1] to the partial Hblk(Hblk(x_r * suh_r) . W_hat_r) * svh,
 *     plus the bias on rank 0 only; the output rotation and svh are linear,
 *     so the sum of the N partials (the engine's all-reduce) is the layer's
 *     output, up to fp32 summation order. Tile rows k0/16 .. k1/16 are
 *     contiguous: the shard is a view and needs no memory.
 * Boundaries are multiples of 128 (an H128 block never spans two ranks) and
 * every rank gets at least one 128-block. Legacy packed signs shard like
 * scales (a word holds 16 features). A pair (FORMAT.md §9.5) split on its
 * rate axis gives each rank one record as a uniform layer (a view); split
 * on the other axis it stays a pair whose two records are sliced (views
 * for k, copied one after the other for n). Either payload layout: a shard
 * keeps its source's (a 128-block of a tile row is one group of the lane
 * layout, which a shard moves whole), so the row shard of an uploaded
 * weight's view is a device weight a plan takes as it is.
 *
 * What it reads: a view is pointer arithmetic only (so the source may be
 * device memory); a copy reads the rank's payload runs with memcpy (host
 * memory only: shard on the host, then upload). Nothing else of the layer
 * is read, so a model's layer (host pointers into files the kernel maps
 * lazily, trellis_model_layer) sharded, then uploaded or run on the CPU,
 * touches only the pages holding the rank's payload, besides the scale and
 * bias vectors trellis_model_open already read to validate them (a tensor
 * the model realigns, in a file whose header length is not a multiple of
 * 8, is copied whole when its layer is fetched). */
typedef enum trellis_split {
  TRELLIS_SPLIT_N = 0, /* column-parallel: output features */
  TRELLIS_SPLIT_K = 1  /* row-parallel: input features */
} trellis_split;

/* "n", "k", or "invalid". */
TRELLIS_API const char *trellis_split_name(trellis_split split);

typedef struct trellis_shard_desc {
  uint32_t struct_size; /* sizeof(trellis_shard_desc) */
  trellis_split split;
  int ranks; /* N >= 1 */
  int rank;  /* 0..N-1 */
  /* NULL: the even split, whose 128-blocks go floor(B / N) to each rank and
   * one more to ranks 0 .. (B mod N) - 1 (B = axis length / 128). Else
   * ranks - 1 split points, strictly increasing multiples of 128 strictly
   * between 0 and the axis length: rank r gets [p[r-1], p[r]) with
   * p[-1] = 0 and p[N-1] = the length. */
  const int64_t *points;
} trellis_shard_desc;

/* split N, ranks 1, rank 0, points NULL. */
TRELLIS_API void trellis_shard_desc_init(trellis_shard_desc *d);
/* The rank's features [*begin, *end) on an axis of `length` features (a
 * positive multiple of 128; k for TRELLIS_SPLIT_K, n for TRELLIS_SPLIT_N).
 * TRELLIS_ERR_SHAPE when the axis has fewer 128-blocks than ranks or a
 * split point is not as described above. */
TRELLIS_API trellis_status trellis_shard_range(int64_t length,
                                               const trellis_shard_desc *d,
                                               int64_t *begin, int64_t *end);
/* Bytes of caller memory trellis_weight_shard needs for this shard of `w`
 * (validated; its data not read): 0 for a view. */
TRELLIS_API trellis_status trellis_weight_shard_bytes(
    const trellis_weight *w, const trellis_shard_desc *d, size_t *bytes);
/* Writes the shard of `w` into *out (whose struct_size must be set, e.g. by
 * trellis_weight_init; TRELLIS_WEIGHT_SIZE_V1 only takes uniform shards,
 * V1 and V2 only checkpoint-layout integer-rate ones).
 * `memory` receives the copied payload: NULL with 0 bytes for a view,
 * else 16-byte aligned host memory of at least trellis_weight_shard_bytes;
 * the shard points into it and into `w`'s memory, both of which must
 * outlive it. Too little memory is TRELLIS_ERR_BUFFER. */
TRELLIS_API trellis_status trellis_weight_shard(const trellis_weight *w,
                                                const trellis_shard_desc *d,
                                                void *memory,
                                                size_t memory_bytes,
                                                trellis_weight *out);

/* ------------------------------------------------------------------------ */
/* Checkpoints: safetensors files and EXL3 model directories                 */
/* ------------------------------------------------------------------------ */

typedef enum trellis_tensor_dtype {
  TRELLIS_T_BOOL = 0,
  TRELLIS_T_U8,
  TRELLIS_T_I8,
  TRELLIS_T_I16,
  TRELLIS_T_U16,
  TRELLIS_T_I32,
  TRELLIS_T_U32,
  TRELLIS_T_I64,
  TRELLIS_T_U64,
  TRELLIS_T_F16,
  TRELLIS_T_BF16,
  TRELLIS_T_F32,
  TRELLIS_T_F64,
  TRELLIS_T_F8_E4M3,
  TRELLIS_T_F8_E5M2
} trellis_tensor_dtype;

TRELLIS_API const char *trellis_tensor_dtype_name(trellis_tensor_dtype dt);
TRELLIS_API size_t trellis_tensor_dtype_size(trellis_tensor_dtype dt);

#define TRELLIS_MAX_DIMS 8

typedef struct trellis_tensor {
  const char *name; /* owned by the file/model */
  trellis_tensor_dtype dtype;
  int ndim;
  int64_t shape[TRELLIS_MAX_DIMS];
  const void *data; /* inside the mapped file */
  size_t nbytes;
} trellis_tensor;

/* One memory-mapped .safetensors file, strictly validated at open.
 *
 * Files are opened so that nothing blocks: a path that is not a regular
 * file (a FIFO, socket, device or directory) is rejected with a message
 * that says what it is, and so is a dangling or looping symbolic link. The
 * header is read with read(2) and bounded: at most 100,000,000 bytes,
 * 262,144 tensors, 16 JSON values per tensor, 1024-byte names and 32
 * levels of nesting (README "Limits").
 *
 * Tensor data is used in place, through a read-only mapping; the file's
 * descriptor is closed once it is mapped, so an open file or model holds no
 * descriptor (a model of 2000 shards opens under any RLIMIT_NOFILE). If a
 * file is truncated while it is open, touching its data past the new end
 * raises SIGBUS: the one failure the library cannot turn into a status,
 * since a library must not install signal handlers. Calls that hand out
 * data pointers (trellis_file_tensor/find, trellis_model_layer/find_layer/
 * find_tensor/other) first check, through the path the file was opened by,
 * that it has not shrunk and return TRELLIS_ERR_IO if it has; a file
 * truncated after that, or one whose path now names another file, is not
 * noticed. Keep files unchanged while they are open. */
typedef struct trellis_file trellis_file;

TRELLIS_API trellis_status trellis_file_open(const char *path,
                                             trellis_file **out);
/* Same validation over a caller-owned buffer (kept, not copied). */
TRELLIS_API trellis_status trellis_file_open_memory(const void *data,
                                                    size_t size,
                                                    trellis_file **out);
TRELLIS_API void trellis_file_close(trellis_file *f);
TRELLIS_API size_t trellis_file_tensor_count(const trellis_file *f);
TRELLIS_API trellis_status trellis_file_tensor(const trellis_file *f,
                                               size_t index,
                                               trellis_tensor *out);
TRELLIS_API trellis_status trellis_file_find(const trellis_file *f,
                                             const char *name,
                                             trellis_tensor *out);

/* quantization_config of config.json (all fields optional in the file). */
typedef struct trellis_quant_config {
  int present;           /* 1 when config.json had a quantization_config */
  char quant_method[32]; /* "exl3" */
  char version[32];
  double bits;       /* average bits per weight, 0 if absent */
  int head_bits;     /* 0 if absent */
  char codebook[16]; /* "mcg", "mul1", "3inst" or "" */
  char out_scales[16];
  int64_t calibration_rows, calibration_cols;
  /* b12x_qsrt models (docs/FORMAT.md §9.7): the sqg_fp16 descriptor table's
   * SHA-256, or "" */
  char descriptor_sha256[65];
  /* ---- ExLlamaV3 1.6 (docs/FORMAT.md §2.6) ---- */
  /* 1 when head_bits is a half-integer rate: K = head_bits + 1/2 (1.6
   * writes 1.5, 2.5 or 3.5 as a float) */
  int head_half;
  /* the MTP layers' K (16: unquantized) as head_bits/head_half; 0 if absent */
  int mtp_bits, mtp_half;
  int vision_bits; /* the vision tower's K; 0 if absent */
  /* config.json's top-level tie_word_embeddings: 1 true, 0 false, -1
   * absent. 1.6 writes false: its lm_head is always stored (lm_head.*), so
   * a reader ties lm_head to the embedding only when no lm_head.* exists. */
  int tie_word_embeddings;
} trellis_quant_config;

/* A model: a single .safetensors file, or a directory holding
 * model.safetensors or model.safetensors.index.json shards, and config.json
 * (read from the directory, or from beside an index given by its path).
 * Besides EXL3 layers it finds b12x layers (docs/FORMAT.md §9.7):
 * `<p>.qsrt_trellis` (uniform) or `<p>.qsrt_pair` (record0 || record1) with
 * `<p>.qsrt_suh` and `<p>.qsrt_svh`. Their codebook comes from the file's
 * __metadata__ "codebook" (a pair's kind and axis from "pair_kind" and
 * "rate_axis"), else from config.json when its quant_method is "b12x_qsrt";
 * a rank-16 correction (`<p>.qsrt_a`, `<p>.qsrt_b`) is not part of the
 * layer: those are "other" tensors, and no function here applies them. */
typedef struct trellis_model trellis_model;

typedef enum trellis_sign_form {
  TRELLIS_SIGNS_SCALED = 0, /* suh/svh fp16 vectors */
  TRELLIS_SIGNS_LEGACY = 1  /* packed su/sv bits */
} trellis_sign_form;

typedef struct trellis_layer {
  const char *name;        /* prefix, e.g. "model.layers.0.mlp.up_proj" */
  trellis_weight weight;   /* host pointers into the mapped files */
  trellis_sign_form signs; /* LEGACY when either side is legacy */
  int has_bias;
} trellis_layer;

/* A layer as the header describes it, without its data. */
typedef struct trellis_layer_info {
  const char *name;
  int64_t k, n;
  int bits;
  trellis_codebook codebook;
  trellis_sign_form input_signs;  /* suh, or legacy packed su */
  trellis_sign_form output_signs; /* svh, or legacy packed sv */
  int has_bias;
  trellis_pair_kind pair;      /* TRELLIS_PAIR_NONE: a uniform layer */
  trellis_rate_axis rate_axis; /* a pair's split axis */
  int half;                    /* 1: K = bits + 1/2 (trellis_weight.half) */
} trellis_layer_info;

/*
 * Models, files and threads:
 *   - trellis_file_open and trellis_model_open may run on any number of
 *     threads at once, on the same paths too.
 *   - Every call that takes a const trellis_file or trellis_model may run
 *     on several threads at once on one object (a model's first fetch of a
 *     misaligned layer copies it under the model's lock, once).
 *   - The CPU functions (trellis_decode_weight, trellis_dense_weight,
 *     trellis_cpu_forward, trellis_weight_check_values, ...) only read the
 *     weight: many threads may run them on one weight at once, each with
 *     its own outputs and workspace.
 *   - trellis_file_close and trellis_model_close free memory that the
 *     pointers handed out point into (tensor data and names, a layer's
 *     weight). Without holds, no call on the object and no use of those
 *     pointers may overlap the close or follow it.
 *   - Holds make a model safe to close while other threads compute on it:
 *     a thread takes trellis_model_hold before it uses the model or its
 *     layers' pointers (a forward, a decode, an upload) and
 *     trellis_model_release after. trellis_model_close never waits and may
 *     be called by any thread, a holder too: it marks the model closed
 *     (trellis_model_hold then fails) and the files are unmapped and the
 *     memory freed by whichever of the close and the last release comes
 *     last. A thread must take its hold before the close (a hold asked for
 *     after the model was freed is a use after free, as any call is).
 *   - trellis_file has no holds: close it when nothing uses it. */
TRELLIS_API trellis_status trellis_model_open(const char *path,
                                              trellis_model **out);
/* Closes the model: at once when no hold is held, else when the last hold
 * is released (see above). A second close while holds remain is recorded
 * as an error (trellis_last_error) and ignored. NULL is a no-op. */
TRELLIS_API void trellis_model_close(trellis_model *m);
/* Takes a hold on an open model: its memory stays valid until the hold is
 * released, even if it is closed meanwhile. TRELLIS_ERR_INVALID_ARGUMENT
 * for NULL or a closed model. Holds are counted; any thread may release a
 * hold that another took. */
TRELLIS_API trellis_status trellis_model_hold(trellis_model *m);
/* Releases one hold; the last hold of a closed model frees it. A release
 * without a hold is recorded as an error and ignored; NULL is a no-op. */
TRELLIS_API void trellis_model_release(trellis_model *m);
TRELLIS_API const trellis_quant_config *
trellis_model_quant_config(const trellis_model *m);
/* The files the model read when it was opened: its data files (the
 * .safetensors file, or every shard), then the index, config.json and
 * ngram_embedding.safetensors when it read them, as paths built from the one
 * given to trellis_model_open. NULL past the last (or for NULL). Owned by the
 * model. For callers that must not write over their own inputs. */
TRELLIS_API const char *trellis_model_file_path(const trellis_model *m,
                                                size_t index);
/* EXL3 layers, in model order: sorted by name with the numbers in names
 * compared by value (model.layers.2 before model.layers.10). Opening a model
 * reads each layer's scales and bias (non-finite values are TRELLIS_ERR_FORMAT
 * naming the tensor and the first bad element), never its payload.
 *
 * trellis_model_layer and trellis_model_find_layer hand out a layer for
 * computing: host pointers into the mapped files, except for an F32 bias
 * (converted to fp16 at open) and tensors misaligned for their element
 * type (a header length that is not a multiple of 8): those are copied
 * into aligned memory the model owns on the first fetch of their layer and
 * freed by trellis_model_close. Both may be called from several threads at
 * once. trellis_model_layer_info describes a layer from the header alone
 * (no data read or copied): use it to list a model. */
TRELLIS_API size_t trellis_model_layer_count(const trellis_model *m);
TRELLIS_API trellis_status trellis_model_layer(const trellis_model *m,
                                               size_t index,
                                               trellis_layer *out);
TRELLIS_API trellis_status trellis_model_layer_info(const trellis_model *m,
                                                    size_t index,
                                                    trellis_layer_info *out);
TRELLIS_API trellis_status trellis_model_find_layer(const trellis_model *m,
                                                    const char *name,
                                                    trellis_layer *out);
/* Tensors not part of any EXL3 layer (norms, embeddings, ...). */
TRELLIS_API size_t trellis_model_other_count(const trellis_model *m);
TRELLIS_API trellis_status trellis_model_other(const trellis_model *m,
                                               size_t index,
                                               trellis_tensor *out);

/* What an "other" tensor is, as far as the loader recognises it. */
typedef enum trellis_other_kind {
  TRELLIS_OTHER_PLAIN = 0, /* norms, an fp16 embedding or head, ... */
  /* `<p>.weight` (2-D, [out, in], usually F16) and `<p>.bias` of a Linear
   * that an EXL3 model keeps unquantized (ExLlamaV3 1.6 recipes, bitrate
   * 16): a `.weight` whose module has EXL3 layers beside it */
  TRELLIS_OTHER_FP16_LINEAR = 1,
  /* `<key>.trellis` (I16, 2-D [vocab, G (1 + 16 K)]) and `<key>.signs` (F16
   * [G, 256]) of a quantized token embedding (ExLlamaV3 1.6 --embed_bits):
   * rings of their own format, not a Linear; no function here decodes
   * them */
  TRELLIS_OTHER_EXL3_EMBEDDING = 2
} trellis_other_kind;

/* "plain", "fp16_linear", "exl3_embedding"; "invalid" otherwise. */
TRELLIS_API const char *trellis_other_kind_name(trellis_other_kind kind);
/* The kind of other tensor `index` (from the headers alone). */
TRELLIS_API trellis_status trellis_model_other_kind(const trellis_model *m,
                                                    size_t index,
                                                    trellis_other_kind *out);
/* A directory's `ngram_embedding.safetensors` (ExLlamaV3 1.6's hashed
 * n-gram table, outside the index; EXL3-1.6 §8), opened and validated with
 * the model, or NULL when there is none. Owned by the model; its tensors
 * (`<P>.shard_N.trellis` I16 [rows, 1 + 10 K], `<P>.head_bias`, ...) are
 * read with trellis_file_tensor. No function here decodes them. */
TRELLIS_API const trellis_file *
trellis_model_ngram_file(const trellis_model *m);
/* Any tensor by full name, across shards. */
TRELLIS_API trellis_status trellis_model_find_tensor(const trellis_model *m,
                                                     const char *name,
                                                     trellis_tensor *out);

/* ------------------------------------------------------------------------ */
/* GPU: devices, weights                                                     */
/* ------------------------------------------------------------------------ */

/* 1 when the library was built with CUDA, else 0. */
TRELLIS_API int trellis_cuda_built(void);
/* Number of usable CUDA devices (0 when none or built without CUDA). */
TRELLIS_API int trellis_cuda_device_count(void);

/* A weight uploaded to the device: it owns one device allocation holding
 * the payload, the scale or sign vectors and the bias. */
typedef struct trellis_device_weight trellis_device_weight;

/* Copies a host weight (checkpoint layout) to one device allocation on the
 * current device, repacked there into the lane layout, and returns its
 * handle in *out (NULL on failure); a pair's record1 follows record0 in it.
 * The host weight is not kept. Destroy the handle after every
 * plan that uses its view. */
TRELLIS_API trellis_status trellis_weight_upload(const trellis_weight *host,
                                                 trellis_device_weight **out);
/* The payload of `w` (host memory, checkpoint layout) in the lane layout:
 * record0 into `out`, a pair's record1 into `out1`, each as many bytes as
 * the record has (trellis_weight_payload_bytes in all; either may equal its
 * source: in place). For frameworks that repack before they upload. */
TRELLIS_API trellis_status trellis_weight_repack_host(const trellis_weight *w,
                                                      int16_t *out,
                                                      int16_t *out1);
/* The same on the device: `device_w` points at device memory in the
 * checkpoint layout (a framework's tensors); the lane layout is written to
 * `out` (record0) and `out1` (record1), 16-byte aligned device memory of
 * the records' sizes, in place when they equal the source. Launches on
 * `stream` (a cudaStream_t, NULL: the legacy stream) and never allocates
 * or synchronises. Then give trellis_plan_create the weight with those
 * pointers and layout = TRELLIS_LAYOUT_LANES. */
TRELLIS_API trellis_status trellis_weight_repack(const trellis_weight *device_w,
                                                 int16_t *out, int16_t *out1,
                                                 void *stream);
/* The same three calls with the device layout named: LANES (what the calls
 * above write, in place or not) or KMAJOR (a uniform EXL3-codebook layer
 * only, else TRELLIS_ERR_UNSUPPORTED; never in place: its out must not
 * overlap the source, TRELLIS_ERR_BUFFER otherwise). CHECKPOINT is
 * refused (TRELLIS_ERR_INVALID_ARGUMENT). A KMAJOR upload stages the
 * checkpoint payload in a second device allocation of its size, which the
 * device repack reads and which is freed before the call returns. */
TRELLIS_API trellis_status
trellis_weight_upload_layout(const trellis_weight *host, trellis_layout layout,
                             trellis_device_weight **out);
TRELLIS_API trellis_status trellis_weight_repack_host_layout(
    const trellis_weight *w, trellis_layout layout, int16_t *out,
    int16_t *out1);
TRELLIS_API trellis_status trellis_weight_repack_layout(
    const trellis_weight *device_w, trellis_layout layout, int16_t *out,
    int16_t *out1, void *stream);
/* The uploaded weight as a full-size trellis_weight of device pointers
 * (legacy su/sv kept as given; a pair's trellis1 at its record1), what
 * trellis_plan_create takes. Owned by the handle and
 * valid until it is destroyed. NULL for NULL or for a pointer that is not a
 * live handle (trellis_last_error says which). */
TRELLIS_API const trellis_weight *
trellis_device_weight_view(const trellis_device_weight *dw);
/* Frees the handle and its device memory. NULL is a no-op; a pointer that
 * is not a live handle is left alone (trellis_last_error says so). */
TRELLIS_API void trellis_device_weight_destroy(trellis_device_weight *dw);

/* ------------------------------------------------------------------------ */
/* GPU: plan / prepare / run                                                 */
/* ------------------------------------------------------------------------ */

/*
 * External H128 rotation. Must compute, for each of `rows` rows of `cols`
 * (multiple of 128) elements:
 *     out = RNE(H128blk(in * pre_scale) * post_scale)
 * with H128 normalised by 1/sqrt(128). pre_scale/post_scale are fp16 device
 * vectors of length `cols`, or NULL for 1. trellis_cuda_h128 needs `in` and
 * `out` 16-byte aligned and the scales 8-byte aligned (TRELLIS_ERR_BUFFER
 * otherwise). Dtypes are fixed per stage:
 *     input rotation : in = x in the plan's input dtype, out = the compute
 *                      dtype (fp16, or bf16 for BF16 compute),
 *                      pre_scale = suh, post_scale = NULL;
 *     output rotation: in = fp32 GEMM sums, out = fp32, pre_scale = NULL,
 *                      post_scale = svh (bias is added by the library).
 * Launch work on `stream` only; never synchronise. Return TRELLIS_OK or an
 * error, which run() passes back.
 */
typedef trellis_status (*trellis_h128_fn)(
    const void *in, trellis_dtype in_dtype, void *out, trellis_dtype out_dtype,
    const uint16_t *pre_scale, const uint16_t *post_scale, int64_t rows,
    int64_t cols, void *stream, void *user_data);

/* The library's own rotation, with the callback's signature and contract. */
TRELLIS_API trellis_status trellis_cuda_h128(
    const void *in, trellis_dtype in_dtype, void *out, trellis_dtype out_dtype,
    const uint16_t *pre_scale, const uint16_t *post_scale, int64_t rows,
    int64_t cols, void *stream, void *user_data);

typedef enum trellis_path {
  TRELLIS_PATH_NONE = 0,
  TRELLIS_PATH_FUSED = 1,   /* fused K6/MCG small-M kernel, zero workspace */
  TRELLIS_PATH_GENERIC = 2, /* rotation + decode-GEMM + rotation */
  TRELLIS_PATH_DENSE = 3    /* generic: decode to W_hat + cuBLASLt (large M) */
} trellis_path;

TRELLIS_API const char *trellis_path_name(trellis_path path);

/* Plan flags. FORCE_GENERIC: never take the fused path. FORCE_DECODE: the
 * generic path never takes the dense (cuBLASLt) variant. FORCE_DENSE: it
 * always does. EXACT_WEIGHTS: every kernel multiplies by W_hat rounded to
 * fp16 exactly as the format defines it (ExLlamaV3's arithmetic); by
 * default the register-direct small-m kernel (m <= 16, fp16 compute, the
 * EXL3 codebooks) adds a 3INST/MCG value's two fp16 halves in the tensor
 * core and uses MUL1's affine value unrounded, with activations as int8
 * limbs of 14 bits per 128-k slice up to 4 rows (docs/FORMAT.md, "GPU
 * numerics"); outputs are judged by tolerance either way. LEGACY_KERNELS:
 * never the register-direct kernel; the split-K decode-GEMM and the fused
 * cluster kernel, with the fused kernel's rotation claims of earlier
 * versions, kept selectable while the register-direct kernel is not faster
 * on every shape. NO_DEPENDENT_LAUNCH: no kernel of the plan is a
 * programmatic dependent launch (by default, on sm_90, a run's kernels
 * load their weights while the stream's previous kernel finishes and wait
 * for it before they read x); every launch then starts after the previous
 * one has ended, as in plain stream order: for tools that do not follow
 * dependent launches, and to measure what they gain. */
#define TRELLIS_PLAN_FORCE_GENERIC 0x1u
#define TRELLIS_PLAN_FORCE_DECODE 0x2u
#define TRELLIS_PLAN_FORCE_DENSE 0x4u
#define TRELLIS_PLAN_EXACT_WEIGHTS 0x8u
#define TRELLIS_PLAN_LEGACY_KERNELS 0x10u
#define TRELLIS_PLAN_NO_DEPENDENT_LAUNCH 0x20u

typedef struct trellis_plan_desc {
  uint32_t struct_size;        /* sizeof(trellis_plan_desc) */
  int64_t max_m;               /* largest m any run will pass */
  trellis_dtype input_dtype;   /* x: F16, BF16 or F32 */
  trellis_dtype output_dtype;  /* y: F16, BF16 or F32 */
  trellis_dtype compute_dtype; /* F16 (default) or BF16 */
  trellis_h128_fn h128;        /* external rotation, or NULL */
  void *h128_user_data;
  uint32_t flags; /* TRELLIS_PLAN_* */
  int split_k;    /* forced split-K factor; 0 = automatic */
} trellis_plan_desc;

TRELLIS_API void trellis_plan_desc_init(trellis_plan_desc *d);

typedef struct trellis_plan trellis_plan;

/* Buffer sizes in bytes a run with `m` rows needs. Every size comes from the
 * same layout function run() uses to carve the buffers. */
typedef struct trellis_buffer_sizes {
  uint32_t struct_size;
  trellis_path path;       /* the path run() takes for this m */
  size_t rotated_bytes;    /* fp16 [m][k] rotated input (always needed) */
  size_t input_f16_bytes;  /* fp16 staging of x: 0, kernels read any dtype */
  size_t output_f16_bytes; /* fp16 staging of y: 0, kernels write any dtype */
  size_t workspace_bytes;  /* generic scratch; 0 on the fused path */
} trellis_buffer_sizes;

typedef struct trellis_buffers {
  uint32_t struct_size; /* sizeof(trellis_buffers) */
  void *rotated;
  size_t rotated_bytes;
  void *input_f16;
  size_t input_f16_bytes;
  void *output_f16;
  size_t output_f16_bytes;
  void *workspace;
  size_t workspace_bytes;
} trellis_buffers;

TRELLIS_API void trellis_buffers_init(trellis_buffers *b);

/*
 * Plans, threads and devices:
 *   - create may run on several threads at once (each on its own current
 *     device, which the plan records); plans share no memory they write.
 *   - prepare and destroy change the plan: neither may overlap any other
 *     call on the same plan. query and run only read it.
 *   - Runs of one plan must not overlap on the device: the fused path's
 *     rotation flags are plan memory. Runs on one stream, or on streams
 *     ordered by events, are fine; for concurrent work create one plan per
 *     stream (plans of one weight may run at once). Runs that may overlap
 *     need their own buffers.
 *   - prepare and run need the plan's device to be current: otherwise
 *     TRELLIS_ERR_INVALID_ARGUMENT naming both devices.
 *   - query, prepare, run and destroy check that the plan is live: one that
 *     was destroyed is TRELLIS_ERR_INVALID_ARGUMENT while its memory has not
 *     been reused, which builds without NDEBUG guarantee by keeping the
 *     memory of the last 64 destroyed plans (in other builds a use after
 *     destroy stays undefined). */

/* The weight's pointers must be device memory, the payload 16-byte aligned,
 * suh/svh/bias 8-byte aligned (the kernels read them four at a time;
 * trellis_weight_upload aligns all of them). The plan copies the struct but
 * BORROWS the memory it points to: the caller keeps it alive and unchanged
 * for the plan's life (a trellis_device_weight_view of a handle destroyed
 * after the plan, or memory the caller owns, e.g. a framework tensor's).
 * Uses the current CUDA device. The SQG codebooks and pairs (a pair's
 * trellis1 likewise device memory, 16-byte aligned) run on the generic and
 * dense paths, never the fused one. */
TRELLIS_API trellis_status trellis_plan_create(const trellis_weight *device_w,
                                               const trellis_plan_desc *desc,
                                               trellis_plan **out);
/* Frees the plan and what prepare took. NULL is a no-op; a plan that is not
 * live is left alone (trellis_last_error says so). */
TRELLIS_API void trellis_plan_destroy(trellis_plan *plan);
/* Path and buffer sizes for m (1..max_m). */
TRELLIS_API trellis_status trellis_plan_query(const trellis_plan *plan,
                                              int64_t m,
                                              trellis_buffer_sizes *out);
/* The buffers that plans run one after another on one stream can share
 * (a model's layers in a decode step): each size in *max_out is the largest
 * that any of plans[0..count-1] needs at m (trellis_plan_query), so one set
 * of buffers of these sizes serves every plan's run at m. max_out->path is
 * the path all of them take at m, or TRELLIS_PATH_NONE when they differ.
 * count 0 gives zero sizes. m must be in 1..max_m of every plan; an error
 * names the plan's index. For several m (the batch sizes an engine
 * captures), provision the largest of each size over one call per m: sizes
 * need not grow with m, as the path changes. */
TRELLIS_API trellis_status
trellis_plans_buffer_sizes(const trellis_plan *const *plans, size_t count,
                           int64_t m, trellis_buffer_sizes *max_out);
/* One-time host work: kernel attributes, occupancy, per-plan locks, the
 * expansion of legacy signs. A second call after success does nothing; a
 * failed call leaves nothing allocated, so it may be retried. It waits only
 * for the work it launches itself (on a stream of its own), so the weight's
 * data must be on the device when it is called. */
TRELLIS_API trellis_status trellis_plan_prepare(trellis_plan *plan);
/* Never allocates, synchronises or sets attributes; safe to capture into a
 * CUDA graph. A missing/undersized workspace is TRELLIS_ERR_WORKSPACE; a
 * current device other than the plan's is TRELLIS_ERR_INVALID_ARGUMENT.
 * Stream order: the kernels are programmatic dependent launches (sm_90 and
 * newer): the register-direct kernel, the fused kernel and the decode-GEMM
 * may start, and read the weight payload, while the kernel before them on
 * the stream still runs; x, y, the buffers, the scales and
 * the bias are touched only after that kernel has completed. So the payload
 * must not be written by the kernel launched just before trellis_run on
 * the same stream (a copy or memset between them restores full order). */
TRELLIS_API trellis_status trellis_run(const trellis_plan *plan, const void *x,
                                       int64_t m, void *y,
                                       const trellis_buffers *buffers,
                                       void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TRELLIS_H */
