# Fails when a per-ISA-level GEMM object (cmake/isa_levels.cmake) defines a global or weak
# symbol outside its own level's namespaces: such a symbol (a library template's instance, say)
# could be folded by the linker with another level's copy, and the base path would then run
# AVX-512 code on a CPU without it. Run as: cmake -DNM=nm -DLEVELS="base|v2|..."
#   -DOBJECTS="obj_base|obj_v2|..." -P check_isa_objects.cmake (objects in the order of LEVELS).
string(REPLACE "|" ";" LEVELS "${LEVELS}")
string(REPLACE "|" ";" OBJECTS "${OBJECTS}")
list(LENGTH LEVELS count)
math(EXPR last "${count} - 1")
set(failed 0)
foreach(i RANGE ${last})
  list(GET LEVELS ${i} level)
  list(GET OBJECTS ${i} object)
  execute_process(COMMAND ${NM} --defined-only ${object} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${object}")
  endif()
  # Mangled names: a name in namespace N of length L starts "_ZN<L>N" (after a GV/TI/TS/TV
  # prefix for guard variables and type info), so the level's roots are prefixes.
  set(eigen_ns "opcts_eigen_${level}")
  string(LENGTH "${eigen_ns}" eigen_len)
  string(LENGTH "${level}" level_len)
  set(roots "_Z(GV|TI|TS|TV)?Z?N(${eigen_len}${eigen_ns}|5opcts3ref3isa${level_len}${level})[0-9]")
  string(REPLACE "\n" ";" lines "${out}")
  set(globals 0)
  foreach(line IN LISTS lines)
    # "ADDRESS TYPE NAME": upper-case types are global, V/W weak, u GNU-unique, i indirect.
    if(NOT line MATCHES "^[0-9a-f]* ([A-Zui]) (.*)$")
      continue()
    endif()
    set(name "${CMAKE_MATCH_2}")
    math(EXPR globals "${globals} + 1")
    # DW.ref.*: the exception tables' pointer to the C++ personality routine, data that every
    # object built by g++ shares and that holds no code of any level.
    if(NOT name MATCHES "^${roots}" AND NOT name STREQUAL "DW.ref.__gxx_personality_v0")
      message(SEVERE_ERROR "${object} (level ${level}) defines a shared symbol: ${name}")
      set(failed 1)
    endif()
  endforeach()
  if(globals EQUAL 0)
    message(SEVERE_ERROR "${object} (level ${level}) defines no global symbol: not the GEMM kernel?")
    set(failed 1)
  endif()
  message(STATUS "${level}: ${globals} global symbols, all in the level's namespaces")
endforeach()
if(failed)
  message(FATAL_ERROR "per-ISA objects share symbols")
endif()
