# CTest glue: the shard tests opcts.<arch>.shard<i>of<N>, planned by the opcts binary itself.
#
# The tests are written when ctest starts (like gtest_discover_tests' PRE_TEST mode), by
# `opcts ctest-tests`, so labels name exactly the families each shard holds and an edited
# catalog needs no re-configure. The script lives next to the binaries in bin/, so copying
# bin/ and CTestTestfile.cmake to a GPU machine is enough.
function(opcts_add_shard_tests target archs shards tier timeout)
  set(script ${CMAKE_BINARY_DIR}/bin/opcts_shards.cmake)
  set(generated ${CMAKE_BINARY_DIR}/bin/opcts_shard_tests.cmake)
  string(REPLACE ";" "," archs_csv "${archs}")
  file(GENERATE OUTPUT ${script} CONTENT "\
# Runs when ctest starts: asks opcts for the shard tests of ${archs_csv}.
execute_process(
  COMMAND \"$<TARGET_FILE:${target}>\" ctest-tests --archs \"${archs_csv}\" --shards ${shards} --tier ${tier}
          --timeout ${timeout} --exe \"$<TARGET_FILE:${target}>\" --reports-dir \"${CMAKE_BINARY_DIR}/reports\"
          --out \"${generated}\"
  RESULT_VARIABLE opcts_rv ERROR_VARIABLE opcts_err)
if(opcts_rv EQUAL 0)
  include(\"${generated}\")
else()
  add_test(opcts.ctest_glue_error \"${CMAKE_COMMAND}\" -E echo \"opcts ctest-tests failed: \${opcts_err}\")
  set_tests_properties(opcts.ctest_glue_error PROPERTIES WILL_FAIL TRUE LABELS \"${archs}\")
endif()
")
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()
