/* Persistent decode-GEMM unit 3: the variants of the bitrate at position
 * 3 of TRL_GPU_BITS (K = 4), see stream_gemm.cuh and dispatch.cuh. */
#include "dispatch_unit.cuh"
#include "stream_gemm.cuh"

TRL_DISPATCH_UNIT(trl::stream::Stream, 3)
