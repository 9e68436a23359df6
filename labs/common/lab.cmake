# What every lab's CMakeLists.txt shares: C11 with warnings, and programs linked against the
# system libibverbs (and librdmacm where a lab asks for it) like any verbs program, so that
# `simnic run -- ./PROGRAM` puts them on simnic and the same binaries run on a real NIC.
# Your copy of a lab (`simnic lab start`) has this text in its CMakeLists.txt; in the simnic
# tree each lab includes labs/common/lab.cmake.
set(CMAKE_C_STANDARD 11)

# The system's library first (/usr/lib...), not one that happens to be on the search path: the
# program links the real libibverbs.so.1, and `simnic run` (LD_LIBRARY_PATH) swaps in simnic's.
function(lab_find_library var name)
  find_library(${var} NAMES ${name} NO_DEFAULT_PATH
               PATHS /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib)
  if(NOT ${var})
    find_library(${var} NAMES ${name} REQUIRED)
  endif()
endfunction()

lab_find_library(LAB_IBVERBS ibverbs)
find_path(LAB_IBVERBS_INCLUDE infiniband/verbs.h REQUIRED)

# lab_program(NAME SOURCE... [LIBS lib...]): one program of the lab from the sources next to
# this file (labutil.h among them), linked with libibverbs and any LIBS (e.g. rdmacm).
function(lab_program name)
  cmake_parse_arguments(PARSE_ARGV 1 LAB "" "" "LIBS")
  add_executable(${name} ${LAB_UNPARSED_ARGUMENTS})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${LAB_IBVERBS_INCLUDE})
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  set(_libs "")
  foreach(_lib IN LISTS LAB_LIBS)
    string(TOUPPER "LAB_${_lib}" _var)
    lab_find_library(${_var} ${_lib})
    list(APPEND _libs ${${_var}})
  endforeach()
  target_link_libraries(${name} PRIVATE ${_libs} ${LAB_IBVERBS})
endfunction()
