/* Persistent decode-GEMM unit 0: the variants of the bitrate at position
 * 0 of TRL_GPU_BITS (K = 1), see stream_gemm.cuh and dispatch.cuh. */
#include "dispatch_unit.cuh"
#include "stream_gemm.cuh"

TRL_DISPATCH_UNIT(trl::stream::Stream, 0)
