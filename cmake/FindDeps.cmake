# SPDX-License-Identifier: Apache-2.0
# trellis_find_dep(name header target [OPTIONAL]): an imported target for a
# C library found through pkg-config when available, else by
# find_path/find_library (honours CMAKE_PREFIX_PATH, e.g. Debian packages
# unpacked with dpkg -x). Without OPTIONAL a missing library is fatal.
# Also installed with the CMake package, which names the same target.
function(trellis_find_dep name header target)
  if(TARGET ${target})
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(DEP_${name} QUIET IMPORTED_TARGET GLOBAL ${name})
    if(DEP_${name}_FOUND)
      add_library(${target} INTERFACE IMPORTED GLOBAL)
      set_target_properties(${target} PROPERTIES
        INTERFACE_LINK_LIBRARIES PkgConfig::DEP_${name})
      return()
    endif()
  endif()
  find_path(${name}_INCLUDE_DIR ${header})
  find_library(${name}_LIBRARY ${name})
  if(NOT ${name}_INCLUDE_DIR OR NOT ${name}_LIBRARY)
    if("OPTIONAL" IN_LIST ARGN)
      return()
    endif()
    message(FATAL_ERROR "${name} not found: install lib${name}-dev "
                        "(apt-get install -y lib${name}-dev)")
  endif()
  add_library(${target} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION ${${name}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${${name}_INCLUDE_DIR})
endfunction()
