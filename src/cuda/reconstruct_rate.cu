/* SPDX-License-Identifier: Apache-2.0 */
/* W_hat from the register-direct kernel's view of a group, for the dense
 * path: dst[k][n_cols] = W_hat[:, n0 .. n0 + n_cols) (the plain form, fp16
 * or bf16). One warp per group (reconstruct_rate_kernel):
 *  - the half-integer rates (K 1.5, 2.5, 3.5: MUL1) in the lane layout,
 *    from the crossover or under FORCE_DENSE (below it they run the
 *    register-direct kernel or the split-K decode-GEMM);
 *  - every rate and EXL3 codebook in the k-major layout (its dense path). */
#include "direct_gemm.cuh"

namespace {

constexpr int kWarps = 4;
/* A warp's 16 x 128 tile of W_hat in shared memory: rows of 128 values and
 * 8 of padding (the lanes' 16-bit stores of one j spread over the banks). */
constexpr int kPitch = 136;

/* The k-major layout's staged tiles: a warp's 128 x 16 (8 tiles down k)
 * in rows of 16 values and 8 of padding. */
constexpr int kPitchKm = 24;

/* The lane's 8 values of tile T into the warp's staged block, where the
 * tile permutation puts them: the lane layout's 16 x 128 (tile T at
 * columns 16T..16T+15) or, KM, the k-major layout's 128 x 16 (tile T at
 * rows 16T..16T+15). */
template <int H, int CB, bool KM, int T>
__device__ __forceinline__ void stage_tile(const uint32_t (&w)[H],
                                           const uint32_t (&prev)[2 * H],
                                           int lane, uint16_t *tile, int bf16) {
  if constexpr (T < 8) {
    uint32_t s[8];
    trl::direct::tile_states<H, T>(w, prev, s);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t v = trl::decode_state<CB>(s[j]) & 0xFFFFu;
      if (bf16)
        v = trl::f16lo_to_bf16lo(v);
      const int row = 2 * t + (j & 1) + 8 * ((j >> 1) & 1);
      const int col = g + 8 * (j >> 2);
      if constexpr (KM)
        tile[(16 * T + row) * kPitchKm + col] = (uint16_t)v;
      else
        tile[row * kPitch + 16 * T + col] = (uint16_t)v;
    }
    stage_tile<H, CB, KM, T + 1>(w, prev, lane, tile, bf16);
  }
}

/* One warp per group: the lane's words as the register-direct kernel
 * reads them (direct_gemm.cuh), decoded into shared memory, then written
 * out with 16-byte stores, not 64 scattered 2-byte stores a lane. The lane
 * layout's group is a 16-row k-tile of a 128-column block (a row pair per
 * store, 256 contiguous bytes a row); the k-major layout's is 128 rows of
 * k of one 16-column tile (a row per two lanes, 32 bytes). */
template <int H, int CB, bool KM>
__global__ void __launch_bounds__(32 * kWarps)
    reconstruct_rate_kernel(const int16_t *__restrict__ payload, int64_t k,
                            int64_t n, int64_t n0, int64_t n_cols, int64_t ldd,
                            uint16_t *__restrict__ dst, int bf16) {
  __shared__ __align__(16)
      uint16_t tiles[kWarps][KM ? 128 * kPitchKm : 16 * kPitch];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  /* groups of the slice: (k-tile, 128 columns) or (128 k, 16 columns) */
  const int64_t per_row = KM ? n_cols / 16 : n_cols / 128;
  const int64_t u = (int64_t)blockIdx.x * kWarps + warp;
  if (u >= (KM ? k / 128 : k / 16) * per_row)
    return;
  const int64_t r = u / per_row, c = u % per_row;
  const int64_t gi =
      KM ? r * (n / 16) + n0 / 16 + c : r * (n / 128) + n0 / 128 + c;
  const char *g =
      reinterpret_cast<const char *>(payload) + gi * (int64_t)(128 * H);
  uint32_t w[H];
  trl::direct::load_group<H>(g, lane, w);
  uint32_t prev[2 * H];
  trl::direct::lower_bits<H>(w, lane, prev);
  uint16_t *tile = tiles[warp];
  stage_tile<H, CB, KM, 0>(w, prev, lane, tile, bf16);
  __syncwarp();
  if constexpr (KM) {
    const int half = lane & 1;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int row = 16 * i + (lane >> 1);
      const uint4 v =
          *reinterpret_cast<const uint4 *>(tile + row * kPitchKm + 8 * half);
      *reinterpret_cast<uint4 *>(dst + (128 * r + row) * ldd + 16 * c +
                                 8 * half) = v;
    }
  } else {
    const int half = lane >> 4, c8 = 8 * (lane & 15);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int row = 2 * i + half;
      const uint4 v =
          *reinterpret_cast<const uint4 *>(tile + row * kPitch + c8);
      *reinterpret_cast<uint4 *>(dst + (16 * r + row) * ldd + c * 128 + c8) = v;
    }
  }
}

template <int H, int CB, bool KM>
int launch(const trl_reconstruct_args *a, cudaStream_t s) {
  const int64_t units =
      KM ? (a->k / 128) * (a->n_cols / 16) : (a->k / 16) * (a->n_cols / 128);
  const int64_t blocks = (units + kWarps - 1) / kWarps;
  reconstruct_rate_kernel<H, CB, KM><<<(unsigned)blocks, 32 * kWarps, 0, s>>>(
      a->trellis, a->k, a->n, a->n0, a->n_cols, a->ldd, a->dst,
      a->dst_dtype == TRELLIS_BF16);
  return (int)cudaGetLastError();
}

/* The k-major kernels: every rate of the codebook (trl_direct_variant_exists
 * with the codebook's own multiply). */
template <int CB, int H, int... Hs>
int launch_km(int h, const trl_reconstruct_args *a, cudaStream_t s) {
  if (h == H)
    return trl_direct_variant_exists(H, CB,
                                     CB == TRELLIS_CB_MUL1 ? TRL_DIRECT_AFFINE
                                                           : TRL_DIRECT_HALVES)
               ? launch<H, CB, true>(a, s)
               : TRL_KERNEL_UNSUPPORTED;
  if constexpr (sizeof...(Hs) > 0)
    return launch_km<CB, Hs...>(h, a, s);
  return TRL_KERNEL_UNSUPPORTED;
}

} // namespace

extern "C" int trl_launch_reconstruct_rate(const trl_reconstruct_args *a,
                                           void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  const int h = trl_lanes_rate(a->bits, a->half);
  if (a->kmajor) {
    int err = TRL_KERNEL_UNSUPPORTED;
    if (a->n0 % 16 == 0 && a->n_cols % 16 == 0) {
      switch (a->codebook) {
      case TRELLIS_CB_3INST:
        err = launch_km<TRELLIS_CB_3INST, TRL_DIRECT_RATES>(h, a, s);
        break;
      case TRELLIS_CB_MCG:
        err = launch_km<TRELLIS_CB_MCG, TRL_DIRECT_RATES>(h, a, s);
        break;
      case TRELLIS_CB_MUL1:
        err = launch_km<TRELLIS_CB_MUL1, TRL_DIRECT_RATES>(h, a, s);
        break;
      default:
        break;
      }
    }
    if (err == TRL_KERNEL_UNSUPPORTED)
      trl_fail(TRELLIS_ERR_UNSUPPORTED,
               "k-major reconstruct: no kernel for codebook %d at %d "
               "half-bits a weight",
               (int)a->codebook, h);
    return err;
  }
  if (a->codebook != TRELLIS_CB_MUL1 || !a->half || a->n0 % 128 ||
      a->n_cols % 128) {
    trl_fail(TRELLIS_ERR_UNSUPPORTED,
             "half-rate reconstruct: MUL1 on 128-column slices only");
    return TRL_KERNEL_UNSUPPORTED;
  }
  switch (h) {
  case 3:
    return launch<3, TRELLIS_CB_MUL1, false>(a, s);
  case 5:
    return launch<5, TRELLIS_CB_MUL1, false>(a, s);
  case 7:
    return launch<7, TRELLIS_CB_MUL1, false>(a, s);
  }
  trl_fail(TRELLIS_ERR_UNSUPPORTED,
           "half-rate reconstruct: no kernel for K = %d.5", a->bits);
  return TRL_KERNEL_UNSUPPORTED;
}
