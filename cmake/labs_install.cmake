# The coursework labs in an install (component `labs`), sealed: students run the graders but
# cannot read the model solutions (issue 24, docs/teaching.md "Sealed solutions").
#
#   share/simnic/labs/NN-topic/          what students see: README, img, starter, common (the
#                                         files starter/ and solution/ share), grader.py, ...
#   share/simnic/teacher/labs/NN-topic/  solution/, broken/, teacher/: dirs 0700, files 0600
#                                         (the .deb's postinst opens them to simnic-teachers)
#   lib/simnic/labs/NN-topic/ref/        the reference peers built from solution/, mode 0711:
#                                         anyone may run them, nobody but root may read them
#
# The graders find the reference peers relative to share/simnic/labs (simnic_lab.py), so they
# sit in lib/, not the multiarch CMAKE_INSTALL_LIBDIR: a fixed path from share/ on every arch.
# The build tree has the same layout under build/lib/simnic/labs (SIMNIC_LAB_REF_DIR may point
# there). Each peer is built by the lab's own CMakeLists.txt, as the student's code is.

option(SIMNIC_LAB_REFS "Build the labs' reference peers from their solution/ (needs libibverbs-dev, librdmacm-dev)" ON)

set(SIMNIC_LABS_SRC ${PROJECT_SOURCE_DIR}/labs)
set(SIMNIC_LAB_REF_INSTALL_DIR lib/simnic/labs)
set(SIMNIC_LAB_REF_BUILD_DIR ${CMAKE_BINARY_DIR}/${SIMNIC_LAB_REF_INSTALL_DIR})
set(_sealed_parts solution broken teacher)

# Student-visible: everything in labs/ but the sealed parts and Python caches.
install(DIRECTORY ${SIMNIC_LABS_SRC}/ DESTINATION ${CMAKE_INSTALL_DATADIR}/simnic/labs COMPONENT labs
        REGEX "/[0-9][0-9]-[^/]+/(solution|broken|teacher)$" EXCLUDE
        PATTERN "__pycache__" EXCLUDE)

# Sealed: owner-only directories and files, every level from teacher/ down, so a student can
# neither read nor list them.
set(_dir_0700 OWNER_READ OWNER_WRITE OWNER_EXECUTE)
set(_file_0600 OWNER_READ OWNER_WRITE)
set(_teacher_root ${CMAKE_INSTALL_DATADIR}/simnic/teacher)

function(simnic_install_private_dir dest)
  install(DIRECTORY DESTINATION ${dest} DIRECTORY_PERMISSIONS ${_dir_0700} COMPONENT labs)
endfunction()

function(simnic_seal_lab lab_dir)
  get_filename_component(_name ${lab_dir} NAME)
  set(_dest ${_teacher_root}/labs/${_name})
  simnic_install_private_dir(${_dest})
  foreach(_part IN LISTS _sealed_parts)
    if(IS_DIRECTORY ${lab_dir}/${_part})
      install(DIRECTORY ${lab_dir}/${_part} DESTINATION ${_dest} COMPONENT labs
              DIRECTORY_PERMISSIONS ${_dir_0700} FILE_PERMISSIONS ${_file_0600}
              PATTERN "__pycache__" EXCLUDE)
    endif()
  endforeach()
endfunction()

# The files every build of a lab gets besides its solution/ or starter/ (simnic_lab.py's
# shared_files): labutil.h, the labs/common/ files its shared.txt names, its own common/.
function(simnic_lab_shared_files lab_dir out_var)
  set(_files ${SIMNIC_LABS_SRC}/common/labutil.h)
  if(EXISTS ${lab_dir}/shared.txt)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${lab_dir}/shared.txt)
    file(STRINGS ${lab_dir}/shared.txt _names REGEX "^[^#]")
    foreach(_name IN LISTS _names)
      list(APPEND _files ${SIMNIC_LABS_SRC}/common/${_name})
    endforeach()
  endif()
  file(GLOB _own CONFIGURE_DEPENDS ${lab_dir}/common/*)
  set(${out_var} ${_files} ${_own} PARENT_SCOPE)
endfunction()

# The reference peer of one lab: its solution/ with the lab's shared files and CMakeLists.txt
# configured and built apart, as a grader builds it, then copied to ref/. lab.cmake goes to
# common/ beside src/, where the CMakeLists.txt's include(../common/lab.cmake) finds it. Each
# program gets lab_ref_dumpable.c (see there: execute-only programs must make themselves
# dumpable for simnicd to reach their memory).
function(simnic_lab_reference lab_name)
  set(_lab ${SIMNIC_LABS_SRC}/${lab_name})
  set(_work ${CMAKE_BINARY_DIR}/labs/ref/${lab_name})
  set(_out ${SIMNIC_LAB_REF_BUILD_DIR}/${lab_name}/ref)
  file(GLOB _solution CONFIGURE_DEPENDS ${_lab}/solution/*)
  simnic_lab_shared_files(${_lab} _shared)
  set(_outputs "")
  set(_copies "")
  foreach(_prog IN LISTS ARGN)
    list(APPEND _outputs ${_out}/${_prog})
    list(APPEND _copies COMMAND ${CMAKE_COMMAND} -E copy ${_work}/build/${_prog} ${_out}/${_prog})
  endforeach()
  add_custom_command(OUTPUT ${_outputs}
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${_work}/src
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${_lab}/solution ${_work}/src
    COMMAND ${CMAKE_COMMAND} -E copy ${_lab}/CMakeLists.txt ${_shared} ${_work}/src
    COMMAND ${CMAKE_COMMAND} -E copy ${SIMNIC_LABS_SRC}/common/lab.cmake ${_work}/common/lab.cmake
    COMMAND ${CMAKE_COMMAND} -S ${_work}/src -B ${_work}/build -DCMAKE_BUILD_TYPE=Debug
            -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER}
            -DCMAKE_PROJECT_INCLUDE=${PROJECT_SOURCE_DIR}/cmake/lab_ref_project.cmake --log-level=WARNING
    COMMAND ${CMAKE_COMMAND} -E env --unset=MAKEFLAGS ${CMAKE_COMMAND} --build ${_work}/build  # its own make, no jobserver
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_out}
    ${_copies}
    DEPENDS ${_solution} ${_shared} ${_lab}/CMakeLists.txt ${SIMNIC_LABS_SRC}/common/lab.cmake
            ${PROJECT_SOURCE_DIR}/cmake/lab_ref_project.cmake ${PROJECT_SOURCE_DIR}/cmake/lab_ref_dumpable.c
    COMMENT "Building the reference peers of lab ${lab_name} from its solution/"
    VERBATIM)
  string(REGEX REPLACE "^([0-9][0-9]).*" "\\1" _num ${lab_name})
  add_custom_target(lab${_num}_ref ALL DEPENDS ${_outputs})
  add_dependencies(lab_refs lab${_num}_ref)
  # 0711: executable by all, readable only by root (an ELF runs without read access).
  install(PROGRAMS ${_outputs} DESTINATION ${SIMNIC_LAB_REF_INSTALL_DIR}/${lab_name}/ref COMPONENT labs
          PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_EXECUTE WORLD_EXECUTE)
endfunction()

simnic_install_private_dir(${_teacher_root})
simnic_install_private_dir(${_teacher_root}/labs)
file(GLOB _lab_dirs LIST_DIRECTORIES true CONFIGURE_DEPENDS ${SIMNIC_LABS_SRC}/[0-9][0-9]-*)
foreach(_lab IN LISTS _lab_dirs)
  if(IS_DIRECTORY ${_lab})
    simnic_seal_lab(${_lab})
  endif()
endforeach()

# The labs whose graders run a reference peer (lab.build_reference) and the peers they run.
find_library(SIMNIC_SYSTEM_IBVERBS ibverbs)
find_library(SIMNIC_SYSTEM_RDMACM rdmacm)
if(SIMNIC_LAB_REFS AND SIMNIC_SYSTEM_IBVERBS AND SIMNIC_SYSTEM_RDMACM)
  add_custom_target(lab_refs)
  simnic_lab_reference(02-rc-send-recv server client)
  simnic_lab_reference(03-one-sided server client)
  simnic_lab_reference(04-atomics server client)
  simnic_lab_reference(06-ud ud_lab)
  simnic_lab_reference(09-rdma-cm server client)
elseif(SIMNIC_LAB_REFS)
  message(STATUS "libibverbs-dev or librdmacm-dev missing: the labs' reference peers are not built, "
                 "so an install cannot grade labs 2, 3, 4, 6 and 9")
endif()
