/* Persistent decode-GEMM unit 7: the variants of the bitrate at position
 * 7 of TRELLIS_GPU_BITS (K = 8), see stream_gemm.cuh and dispatch.cuh. */
#include "dispatch_unit.cuh"
#include "stream_gemm.cuh"

TRELLIS_DISPATCH_UNIT(trellis::stream::Stream, 7)
