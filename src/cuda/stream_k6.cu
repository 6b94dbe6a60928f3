/* Persistent decode-GEMM unit 5: the variants of the bitrate at position
 * 5 of TRL_GPU_BITS (K = 6), see stream_gemm.cuh and dispatch.cuh. */
#include "dispatch_unit.cuh"
#include "stream_gemm.cuh"

TRL_DISPATCH_UNIT(trl::stream::Stream, 5)
