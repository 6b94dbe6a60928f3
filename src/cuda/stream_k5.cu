/* Persistent decode-GEMM unit 4: the variants of the bitrate at position
 * 4 of TRL_GPU_BITS (K = 5), see stream_gemm.cuh and dispatch.cuh. */
#include "dispatch_unit.cuh"
#include "stream_gemm.cuh"

TRL_DISPATCH_UNIT(trl::stream::Stream, 4)
