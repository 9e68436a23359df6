# Installing simnic for a class: `cpack -G DEB` in the build tree makes simnic_<version>_<arch>.deb
# (docs/teaching.md). Everything `simnic` needs at run time goes to the usual places under /usr:
# the programs in bin, the shim libibverbs.so.1 and librdmacm.so.1 in the private lib/simnic (not
# on the loader's path, so they never shadow the system's rdma-core; `simnic run` and `simnic env`
# find them relative to the simnic binary, simnic/cli/locate.cc), the labs, the docs, man pages
# and bash completion. Included last from the top-level CMakeLists.txt, so every install rule,
# the sealed labs' too, is known here.

# The labs come from cmake/labs_install.cmake (component "labs", included by the top-level
# CMakeLists.txt): student files in share/simnic/labs, sealed ones in share/simnic/teacher,
# execute-only reference peers in lib/simnic/labs. The postinst below gives the sealed ones to
# the group simnic-teachers.

set(SIMNIC_PACKAGE_PREFIX /usr)
set(SIMNIC_VERSION ${PROJECT_VERSION})
set(SIMNIC_SHIM_DIR ${SIMNIC_PACKAGE_PREFIX}/${CMAKE_INSTALL_LIBDIR}/simnic)
set(SIMNIC_DOC_DIR ${SIMNIC_PACKAGE_PREFIX}/${CMAKE_INSTALL_DOCDIR})
set(SIMNIC_TEACHER_DIR ${SIMNIC_PACKAGE_PREFIX}/${CMAKE_INSTALL_DATADIR}/simnic/teacher)

# Documentation, man pages (hand-written roff, kept true to --help), bash completion.
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
foreach(_page simnic.1 simnicd.8)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/man/${_page} ${PROJECT_BINARY_DIR}/man/${_page} @ONLY)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" _section ${_page})
  install(FILES ${PROJECT_BINARY_DIR}/man/${_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/packaging/bash-completion/simnic
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# The maintainer scripts: the simnic-teachers group and its read access to the sealed material.
foreach(_script postinst postrm)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/deb/${_script}.in ${PROJECT_BINARY_DIR}/deb/${_script}
                 @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                 WORLD_READ WORLD_EXECUTE)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME simnic)
set(CPACK_PACKAGE_VENDOR "simnic")
set(CPACK_PACKAGE_CONTACT "simnic maintainers <simnic@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "simulated RDMA NICs (RoCEv2 over UDP) and RDMA coursework labs")
set(CPACK_PACKAGE_DESCRIPTION
    "simnic runs unmodified verbs and rdma_cm programs on software RDMA NICs: simnicd (one\n\
process per NIC), a drop-in libibverbs.so.1 and librdmacm.so.1 in a private directory\n\
(the system's rdma-core is left alone), the simnic command, simnic-viz and nine graded\n\
coursework labs (simnic lab). No RDMA hardware, kernel module or root needed.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${SIMNIC_PACKAGE_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # simnic_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Shared-library dependencies of the binaries come from dpkg-shlibdeps (librdmacm.so.1 links
# the shim beside it); the rest is what `simnic lab` runs: python3 for the graders, cmake and a
# C compiler with the verbs headers for the students' programs.
find_program(SIMNIC_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(SIMNIC_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, cmake, make, gcc, libc6-dev, libibverbs-dev, librdmacm-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-utils, rdmacm-utils, perftest, gnuplot-nox")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "tshark, xvfb, qperf")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/deb/postinst ${PROJECT_BINARY_DIR}/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)  # no debug info for a class install: a third of the size
include(CPack)
