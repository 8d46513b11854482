# dlock_add_module(NAME <name> [OUTPUT_NAME <file>] SOURCES <src>... [PUBLIC_DEPS <t>...] [PRIVATE_DEPS <t>...]
#                  [PC_REQUIRES <pkg>...] [PC_LIBS_PRIVATE <flags>...])
#
# Makes the library dlock_<name> (alias dlock::<name>, file libdlock-<name>), its install
# rules, the export set dlock-<name>-targets and dlock-<name>.pc. Public headers live in
# <module>/include; the caller's directory is the module's.
function(dlock_add_module)
  cmake_parse_arguments(M "" "NAME;OUTPUT_NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS;PC_REQUIRES;PC_LIBS_PRIVATE"
                        ${ARGN})
  set(target dlock_${M_NAME})
  if(NOT M_OUTPUT_NAME)
    set(M_OUTPUT_NAME dlock-${M_NAME})
  endif()
  add_library(${target} ${M_SOURCES})
  add_library(dlock::${M_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${M_NAME}
    OUTPUT_NAME ${M_OUTPUT_NAME}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target}
    PUBLIC ${M_PUBLIC_DEPS}
    PRIVATE ${M_PRIVATE_DEPS} $<BUILD_INTERFACE:dlock_warnings>)
  # What a loadable module made of this library links besides dlock (the CLI's backend plugins).
  set_property(TARGET ${target} PROPERTY DLOCK_PRIVATE_DEPS ${M_PRIVATE_DEPS})

  install(TARGETS ${target} EXPORT dlock-${M_NAME}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT dlock-${M_NAME}-targets NAMESPACE dlock::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
  export(EXPORT dlock-${M_NAME}-targets NAMESPACE dlock::
    FILE ${PROJECT_BINARY_DIR}/dlock-${M_NAME}-targets.cmake)

  set(DLOCK_PC_NAME dlock-${M_NAME})
  set(DLOCK_PC_LIB ${M_OUTPUT_NAME})
  string(REPLACE ";" " " DLOCK_PC_REQUIRES "${M_PC_REQUIRES}")
  string(REPLACE ";" " " DLOCK_PC_LIBS_PRIVATE "${M_PC_LIBS_PRIVATE}")
  # The prefix is found from the .pc file's own place, so an installed tree can be moved.
  file(RELATIVE_PATH DLOCK_PC_PREFIX_FROM_PCFILEDIR
       "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in
                 ${PROJECT_BINARY_DIR}/pkgconfig/dlock-${M_NAME}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/dlock-${M_NAME}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
