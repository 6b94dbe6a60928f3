# SPDX-License-Identifier: Apache-2.0
# The library's sources, listed per folder (docs/ARCHITECTURE.md §1): the
# one place a new file is added. Read by src/CMakeLists.txt (the library) and
# fuzz/CMakeLists.txt (which compiles the CPU folders into its targets with
# its own instrumentation).
set(trl_src ${CMAKE_CURRENT_LIST_DIR})
set(TRELLIS_CORE_SOURCES error.c half.c sha256.c version.c)
set(TRELLIS_FORMAT_SOURCES codebook.c dense.c hadamard.c lanes.c shard.c
    sqg.c tile.c weight.c)
set(TRELLIS_IO_SOURCES json_bounds.c layers.c model.c posix_file.c qsrt.c
    safetensors.c)
set(TRELLIS_CPU_SOURCES forward.c)
# the pure rules of the GPU path: the gate, the buffer layout, the path for
# m and the decision record of a run (kernel_config.h and
# plan/direct_rules.h are header-only)
set(TRELLIS_RULES_SOURCES decision.c gate.c layout.c path.c)
# the plan API in every build: struct initialisers and the shared buffer
# sizes of a set of plans (from trellis_plan_query alone)
set(TRELLIS_PLAN_SOURCES api_structs.c plan_sizes.c)
# the GPU host code (CUDA builds), or its CPU-only stand-in
set(TRELLIS_PLAN_GPU_SOURCES cuda_status.c dense.c device.c fused.c plan.c)
set(TRELLIS_PLAN_NO_CUDA_SOURCES no_cuda.c)
set(TRELLIS_CUDA_SOURCES decode_gemm.cu direct_gemm.cu fused_k6.cu kmajor_gemm.cu
    lanes.cu reconstruct.cu reconstruct_rate.cu rotate.cu)
foreach(u RANGE 1 8)
  list(APPEND TRELLIS_CUDA_SOURCES gemm_k${u}.cu)
endforeach()
foreach(u RANGE 0 10)
  list(APPEND TRELLIS_CUDA_SOURCES direct_u${u}.cu)
endforeach()

list(TRANSFORM TRELLIS_CORE_SOURCES PREPEND ${trl_src}/core/)
list(TRANSFORM TRELLIS_FORMAT_SOURCES PREPEND ${trl_src}/format/)
list(TRANSFORM TRELLIS_IO_SOURCES PREPEND ${trl_src}/io/)
list(TRANSFORM TRELLIS_CPU_SOURCES PREPEND ${trl_src}/cpu/)
list(TRANSFORM TRELLIS_RULES_SOURCES PREPEND ${trl_src}/rules/)
foreach(v PLAN PLAN_GPU PLAN_NO_CUDA)
  list(TRANSFORM TRELLIS_${v}_SOURCES PREPEND ${trl_src}/plan/)
endforeach()
list(TRANSFORM TRELLIS_CUDA_SOURCES PREPEND ${trl_src}/cuda/)
# what runs without a GPU: the parsers, the format and the CPU forward
set(TRELLIS_HOST_SOURCES ${TRELLIS_CORE_SOURCES} ${TRELLIS_FORMAT_SOURCES}
    ${TRELLIS_IO_SOURCES} ${TRELLIS_CPU_SOURCES})
unset(trl_src)
