# Installing opcts (`cmake --install build/<preset> --prefix DIR`) and its Debian package (CPack):
#   bin/opcts                          the command
#   lib/opcts/libopcts_example_plugin.so   the example plugin (docs/plugins.md)
#   include/opcts/plugin.h             the plugin ABI
#   share/opcts/cases/                 catalogs, archs.yaml, tolerances.yaml, manifests/
#   share/doc/opcts/                   README.md, docs/, the example plugin's source
# The binary finds share/opcts/cases relative to itself (runner/suite.hpp: default_cases_dir),
# so an installed or unpacked tree runs from any folder with no environment set. The build tree
# gets the same layout: build/<preset>/share/opcts/cases is a relative link to the source's
# cases/, so bin/opcts there reads the clone it was built from, and a copy of bin/ alone finds
# nothing and says so, instead of silently reading another tree's catalogs.
include(GNUInstallDirs)

# The cases folder as seen from the binary's folder, compiled into default_cases_dir().
file(RELATIVE_PATH OPCTS_CASES_FROM_BIN "/p/${CMAKE_INSTALL_BINDIR}" "/p/${CMAKE_INSTALL_DATADIR}/opcts/cases")
target_compile_definitions(opcts_runner PRIVATE OPCTS_CASES_FROM_BIN="${OPCTS_CASES_FROM_BIN}")
cmake_path(SET build_cases NORMALIZE "${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/${OPCTS_CASES_FROM_BIN}")
cmake_path(GET build_cases PARENT_PATH build_cases_parent)
file(MAKE_DIRECTORY "${build_cases_parent}")
file(RELATIVE_PATH link_target "${build_cases_parent}" "${CMAKE_SOURCE_DIR}/cases")
if(IS_SYMLINK "${build_cases}" OR EXISTS "${build_cases}")
  file(REMOVE "${build_cases}")
endif()
file(CREATE_LINK "${link_target}" "${build_cases}" SYMBOLIC)

# The installed binary keeps the folders of the shared libraries it linked outside the
# system's (the CUDA toolkit's cuBLAS, cuDNN), as the build tree's does.
set_target_properties(opcts PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS opcts RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS opcts_example_plugin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/opcts)
install(FILES include/opcts/plugin.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/opcts)
install(DIRECTORY cases/ DESTINATION ${CMAKE_INSTALL_DATADIR}/opcts/cases)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES plugins/example/example_plugin.c DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# `cpack --config build/<preset>/CPackConfig.cmake` (or `cmake --build build/<preset> --target
# package`) writes opcts_<version>_<arch>.deb. A host build's dependencies come from
# dpkg-shlibdeps; a CUDA build links NVIDIA's cuBLAS (and cuDNN), which no Debian package
# provides, so its dependencies are listed by hand and the CUDA libraries are the machine's.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME opcts)
set(CPACK_PACKAGE_VENDOR "opcts")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "conformance tests for GPU operators against fp64 CPU references")
set(CPACK_PACKAGE_CONTACT "opcts developers <opcts@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
if(OPCTS_HAVE_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libgcc-s1, libgomp1, libstdc++6")
  set(CPACK_PACKAGE_DESCRIPTION "Built with CUDA ${CUDAToolkit_VERSION}: needs the CUDA toolkit's cuBLAS\
 (and cuDNN 9 for cuda.cudnn) on the library path.")
else()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
include(CPack)
