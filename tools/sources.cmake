# SPDX-License-Identifier: Apache-2.0
# The tools library's sources (tools/CMakeLists.txt); fuzz/CMakeLists.txt
# compiles its file writers into the fuzz targets.
set(TRELLIS_TOOLS_FILE_SOURCES npy.c out_file.c)
set(TRELLIS_TOOLS_SOURCES cli.c measure.c synth.c synth_model.c
    ${TRELLIS_TOOLS_FILE_SOURCES})
set(TRELLIS_TOOLS_CUDA_SOURCES device.c)
foreach(v FILE_SOURCES SOURCES CUDA_SOURCES)
  list(TRANSFORM TRELLIS_TOOLS_${v} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
