# Included after project() of a lab built as a reference peer (CMAKE_PROJECT_INCLUDE, from
# cmake/labs_install.cmake): every program of the lab gets lab_ref_dumpable.c linked in.
add_library(simnic_lab_ref_dumpable OBJECT ${CMAKE_CURRENT_LIST_DIR}/lab_ref_dumpable.c)
link_libraries(simnic_lab_ref_dumpable)
