# ds_module(NAME DEPS a b c): one static library per src/ folder, made of every .cpp (and .cu when
# CUDA is on) in that folder. Folders own their sources; nobody edits a shared list to add a file.
function(ds_module name)
  cmake_parse_arguments(M "" "" "DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(DS_CUDA)
    file(GLOB _cu CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cu ${CMAKE_CURRENT_SOURCE_DIR}/*/*.cu)
    list(APPEND _srcs ${_cu})
  endif()
  if(_srcs)
    add_library(ds_${name} STATIC ${_srcs})
    target_include_directories(ds_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(ds_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
    set_target_properties(ds_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  else()
    add_library(ds_${name} INTERFACE)
    target_include_directories(ds_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(ds_${name} INTERFACE ${M_DEPS})
  endif()
endfunction()

# ds_test(AREA LIBS a b): one gtest binary per tests/ folder, made of every *_test.cpp in it.
function(ds_test area)
  cmake_parse_arguments(T "" "" "LIBS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(DS_CUDA)
    file(GLOB _cu CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cu)
    list(APPEND _srcs ${_cu})
  endif()
  if(NOT _srcs)
    return()
  endif()
  add_executable(test_${area} ${_srcs})
  target_link_libraries(test_${area} PRIVATE ${T_LIBS} ds_testutil GTest::gtest GTest::gtest_main)
  # DS_BIN: the CLI, for the tests that run it. A plain path, not $<TARGET_FILE:deltaserve>: inside
  # gtest_discover_tests' post-build step that expression made every test binary depend on the CLI, so the
  # sanitizer build of .ci/run (which runs its tests against the release CLI through DS_BIN) compiled the CLI,
  # the server and the engine again, ~100 of its ~160 steps. Other builds still build the CLI first.
  gtest_discover_tests(test_${area} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "DS_BIN=${PROJECT_BINARY_DIR}/apps/deltaserve")
  if(NOT DS_SANITIZE)
    add_dependencies(test_${area} deltaserve)
  endif()
endfunction()
