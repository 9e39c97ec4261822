# opcts_write_if_changed(PATH TEXT): writes TEXT to PATH only when PATH does not hold it already,
# so a generated header that did not change keeps its time stamp and recompiles nothing. Shared
# by the build-time scripts (cmake -P) commit.cmake and ref_digest.cmake.
function(opcts_write_if_changed path text)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${path}" "${text}")
  endif()
endfunction()
