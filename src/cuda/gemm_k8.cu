/* Decode-GEMM variants for K = 8 (see decode_gemm.cuh). */
#include "decode_gemm.cuh"

TRELLIS_GEMM_DEFINE_K(8)
