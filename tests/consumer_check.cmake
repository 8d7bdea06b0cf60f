# Builds and runs examples/consumer (the README's "A taste") the ways a user would, as ctest's package.consumer.*:
#   cmake -DMODE=installed|subdirectory -DUOE_SOURCE_DIR=... -DUOE_BINARY_DIR=... -DWORK_DIR=...
#         -DCXX=<compiler> -DCONSUMER_ARGS=<extra configure arguments, separated by |> -P consumer_check.cmake
# installed:    `cmake --install` of the build under test into WORK_DIR/prefix, then find_package(uoe) from there, and
#               the same program compiled by hand with `pkg-config --cflags --libs uoe` (when pkg-config exists);
# subdirectory: add_subdirectory(<uoe checkout>) in a fresh build of the consumer (the library alone is built),
#               then that CPU-only library installed and found with find_package(uoe) as in `installed`.
cmake_minimum_required(VERSION 3.24)
string(REPLACE "|" ";" CONSUMER_ARGS "${CONSUMER_ARGS}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}): ${what} failed (exit ${rc}):\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# The program prints w.grad(): [64, 10] float32.
function(run_consumer program)
  run("running ${program}" ${program})
  if(NOT last_output MATCHES "shape=\\[64, 10\\], dtype=float32")
    message(FATAL_ERROR "consumer (${MODE}): ${program} printed no [64, 10] gradient:\n${last_output}")
  endif()
endfunction()

set(consumer_source ${UOE_SOURCE_DIR}/examples/consumer)

# The program the docs show under `heading` is examples/consumer/main.cpp, character for character.
function(check_docs_show_the_program doc heading)
  file(READ ${UOE_SOURCE_DIR}/${doc} text)
  file(READ ${consumer_source}/main.cpp program)
  set(shown "")
  string(FIND "${text}" "${heading}\n" at)
  if(at GREATER_EQUAL 0)
    string(SUBSTRING "${text}" ${at} -1 text)
    string(FIND "${text}" "```cpp\n" begin)
    if(begin GREATER_EQUAL 0)
      math(EXPR begin "${begin} + 7")  # past the fence line
      string(SUBSTRING "${text}" ${begin} -1 text)
      string(FIND "${text}" "\n```\n" end)
      math(EXPR end "${end} + 1")  # the program's last newline
      string(SUBSTRING "${text}" 0 ${end} shown)
    endif()
  endif()
  if(NOT shown STREQUAL program)
    message(FATAL_ERROR "consumer: the ```cpp block under '${heading}' in ${doc} is not examples/consumer/main.cpp:"
                        "\n${shown}")
  endif()
endfunction()
# `cmake --install` of `uoe_build` into `prefix`, then the consumer configured in `build` with find_package(uoe)
# from there, built and run.
function(install_and_find uoe_build prefix build)
  file(REMOVE_RECURSE ${prefix} ${build})
  run("cmake --install ${uoe_build}" ${CMAKE_COMMAND} --install ${uoe_build} --prefix ${prefix})
  run("configuring against ${prefix}" ${CMAKE_COMMAND} -S ${consumer_source} -B ${build}
      -DCMAKE_PREFIX_PATH=${prefix} ${CONSUMER_ARGS})
  run("building against ${prefix}" ${CMAKE_COMMAND} --build ${build})
  run_consumer(${build}/consumer)
endfunction()

set(consumer_build ${WORK_DIR}/${MODE})
file(REMOVE_RECURSE ${consumer_build})
if(MODE STREQUAL "installed")
  check_docs_show_the_program(README.md "## A taste")
  check_docs_show_the_program(docs/GUIDE.md "## 12. Use uoe from your own C++ program")
  set(prefix ${WORK_DIR}/prefix)
  install_and_find(${UOE_BINARY_DIR} ${prefix} ${consumer_build})
  find_program(PKG_CONFIG pkg-config)
  if(PKG_CONFIG)
    file(GLOB pc_file ${prefix}/lib*/pkgconfig/uoe.pc ${prefix}/lib/*/pkgconfig/uoe.pc)
    get_filename_component(pc_dir "${pc_file}" DIRECTORY)
    set(ENV{PKG_CONFIG_PATH} ${pc_dir})
    run("pkg-config" ${PKG_CONFIG} --cflags --libs uoe)
    separate_arguments(pc_flags UNIX_COMMAND "${last_output}")
    run("compiling with pkg-config's flags" ${CXX} ${consumer_source}/main.cpp ${pc_flags}
        -o ${consumer_build}/consumer_pkg_config)
    run_consumer(${consumer_build}/consumer_pkg_config)
  endif()
elseif(MODE STREQUAL "subdirectory")
  run("configuring with add_subdirectory(${UOE_SOURCE_DIR})" ${CMAKE_COMMAND} -S ${consumer_source}
      -B ${consumer_build} -DUOE_SOURCE_DIR=${UOE_SOURCE_DIR} ${CONSUMER_ARGS})
  run("building" ${CMAKE_COMMAND} --build ${consumer_build})
  foreach(not_built uoe_tests uoe_bench uoe)  # a subproject builds the library alone
    if(EXISTS ${consumer_build}/uoe/${not_built})
      message(FATAL_ERROR "consumer (subdirectory): uoe built ${not_built}, which a subproject should not build")
    endif()
  endforeach()
  run_consumer(${consumer_build}/consumer)
  # The subproject's library is a CPU-only build with its install rules on (UOE_INSTALL=ON): installed and found
  # with find_package, it is the CPU-only half of the installed-package check (the `installed` mode has this
  # build's CUDA, MPI and NCCL).
  install_and_find(${consumer_build} ${WORK_DIR}/prefix-cpu-only ${consumer_build}-installed)
else()
  message(FATAL_ERROR "consumer_check.cmake: MODE must be installed or subdirectory, got '${MODE}'")
endif()
