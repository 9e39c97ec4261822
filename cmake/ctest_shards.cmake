# CTest glue: the shard tests opcts.<arch>.<family>.shard<i>of<N>, planned by the opcts binary itself.
#
# The tests are written when ctest starts (like gtest_discover_tests' PRE_TEST mode), by
# `opcts ctest-tests`, so labels name exactly the families each shard holds and an edited
# catalog needs no re-configure. The script lives next to the binaries in bin/, so copying
# bin/ and CTestTestfile.cmake to a GPU machine is enough.
#
# When `opcts ctest-tests` fails at ctest start (a cases folder not found, a malformed catalog),
# the error is printed then and one test, opcts.ctest_glue_error, labelled with every arch,
# fails with it: it runs the same command again, so its output is the real error. It needs no
# cmake on the machine that runs ctest (CMAKE_COMMAND is empty while ctest reads test files,
# and the configuring machine's cmake path may not exist there), and it cannot pass: a
# PASS_REGULAR_EXPRESSION no output matches decides it, whatever the command's exit status.
function(opcts_add_shard_tests target archs shards tier timeout bitwise invariance capture memcheck_slices)
  set(script ${CMAKE_BINARY_DIR}/bin/opcts_shards.cmake)
  set(generated ${CMAKE_BINARY_DIR}/bin/opcts_shard_tests.cmake)
  string(REPLACE ";" "," archs_csv "${archs}")
  set(args ctest-tests --archs "${archs_csv}" --shards ${shards} --tier ${tier} --timeout ${timeout}
      --exe "$<TARGET_FILE:${target}>" --reports-dir "${CMAKE_BINARY_DIR}/reports")
  if(bitwise)
    list(APPEND args --bitwise)  # every shard checks determinism claims (opcts run --bitwise)
  endif()
  if(invariance)
    list(APPEND args --invariance)  # and the invariance claims (opcts run --invariance)
  endif()
  if(capture)
    list(APPEND args --capture)  # and record and replay every run (opcts run --capture)
  endif()
  list(APPEND args --memcheck-slices ${memcheck_slices})  # the nightly slice (docs/ci.md)
  list(JOIN args "\" \"" quoted_args)
  file(GENERATE OUTPUT ${script} CONTENT "\
# Runs when ctest starts: asks opcts for the shard tests of ${archs_csv}.
execute_process(
  COMMAND \"$<TARGET_FILE:${target}>\" \"${quoted_args}\" --out \"${generated}\"
  RESULT_VARIABLE opcts_rv ERROR_VARIABLE opcts_err)
if(opcts_rv EQUAL 0)
  include(\"${generated}\")
else()
  message(WARNING \"opcts ctest-tests failed (\${opcts_rv}): \${opcts_err}\")
  add_test(opcts.ctest_glue_error \"$<TARGET_FILE:${target}>\" \"${quoted_args}\" --out \"${generated}.failed\")
  set_tests_properties(opcts.ctest_glue_error PROPERTIES LABELS \"${archs}\"
    PASS_REGULAR_EXPRESSION \"opcts ctest glue: this never matches\")
endif()
")
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()
