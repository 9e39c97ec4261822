# The Python plugin host (plugins/python, docs/python.md): libopcts_python.so embeds the
# CPython it is built against and imports a module of `@opcts.impl` functions for
# `opcts run --plugin my_kernels.py`. Built when CMake finds Python 3's interpreter and
# development files (python3-dev); OPCTS_PYTHON=OFF leaves it out. The interpreter is
# Python3_EXECUTABLE, else $PYTHON, else what FindPython3 finds (an active virtual environment
# first): the one whose packages (numpy, torch, triton) the impls import.
#   build tree: bin/libopcts_python.so, share/opcts/python -> the source's python/ (a link)
#   install:    lib/opcts/libopcts_python.so, share/opcts/python/opcts/
set(OPCTS_PYTHON AUTO CACHE STRING "Build the Python plugin host: AUTO (when Python 3 development files are found), ON or OFF")
set_property(CACHE OPCTS_PYTHON PROPERTY STRINGS AUTO ON OFF)

# Where the binary finds the host library, and the library the package, in an install.
file(RELATIVE_PATH OPCTS_PYTHON_HOST_FROM_BIN "/p/${CMAKE_INSTALL_BINDIR}" "/p/${CMAKE_INSTALL_LIBDIR}/opcts")
file(RELATIVE_PATH OPCTS_PYTHON_PKG_FROM_LIB "/p/${CMAKE_INSTALL_LIBDIR}/opcts" "/p/${CMAKE_INSTALL_DATADIR}/opcts/python")
target_compile_definitions(opcts_app PRIVATE OPCTS_PYTHON_HOST_FROM_BIN="${OPCTS_PYTHON_HOST_FROM_BIN}")

set(OPCTS_HAVE_PYTHON OFF)
if(NOT OPCTS_PYTHON STREQUAL "OFF")
  if(NOT DEFINED Python3_EXECUTABLE AND DEFINED ENV{PYTHON})
    set(Python3_EXECUTABLE "$ENV{PYTHON}" CACHE FILEPATH "The Python the plugin host embeds")
  endif()
  if(OPCTS_PYTHON STREQUAL "ON")
    find_package(Python3 COMPONENTS Interpreter Development.Embed REQUIRED)
  else()
    find_package(Python3 COMPONENTS Interpreter Development.Embed)
  endif()
  if(Python3_FOUND AND Python3_Development.Embed_FOUND)
    set(OPCTS_HAVE_PYTHON ON)
  endif()
endif()
if(OPCTS_HAVE_PYTHON)
  message(STATUS "opcts: Python plugin host ON (${Python3_EXECUTABLE}, Python ${Python3_VERSION})")
else()
  message(STATUS "opcts: Python plugin host OFF")
endif()

if(OPCTS_HAVE_PYTHON)
  add_library(opcts_python MODULE plugins/python/python_host.cpp)
  target_include_directories(opcts_python PRIVATE ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(opcts_python PRIVATE Python3::Python ${CMAKE_DL_LIBS})
  target_compile_options(opcts_python PRIVATE -Wall -Wextra)
  target_compile_definitions(opcts_python PRIVATE OPCTS_PYTHON_EXECUTABLE="${Python3_EXECUTABLE}"
    OPCTS_PYTHON_PKG_FROM_LIB="${OPCTS_PYTHON_PKG_FROM_LIB}")
  set_target_properties(opcts_python PROPERTIES PREFIX "lib" OUTPUT_NAME opcts_python
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin CXX_VISIBILITY_PRESET hidden)
  add_dependencies(opcts opcts_python)
  # The build tree's package: a link to the source's, as share/opcts/cases is.
  set(build_py "${CMAKE_BINARY_DIR}/${CMAKE_INSTALL_DATADIR}/opcts/python")
  file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/${CMAKE_INSTALL_DATADIR}/opcts")
  file(RELATIVE_PATH py_link "${CMAKE_BINARY_DIR}/${CMAKE_INSTALL_DATADIR}/opcts" "${CMAKE_SOURCE_DIR}/python")
  if(IS_SYMLINK "${build_py}" OR EXISTS "${build_py}")
    file(REMOVE "${build_py}")
  endif()
  file(CREATE_LINK "${py_link}" "${build_py}" SYMBOLIC)
  install(TARGETS opcts_python LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/opcts)
  install(DIRECTORY python/opcts DESTINATION ${CMAKE_INSTALL_DATADIR}/opcts/python
    PATTERN "__pycache__" EXCLUDE)
  install(DIRECTORY plugins/python/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/python)
endif()
