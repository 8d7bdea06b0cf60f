# Install rules (included from the top CMakeLists.txt when UOE_INSTALL is on): the static library `uoe` with its
# headers, the `uoe` program, a CMake package (find_package(uoe CONFIG) -> uoe::uoe) and a pkg-config file (uoe.pc).
#
# Headers keep the source tree's layout under <prefix>/include/uoe, and uoe::uoe (like `pkg-config --cflags uoe`)
# puts <prefix>/include/uoe on the include path, so a program includes "ops/ops.h", "nn/transformer.h", ... exactly
# as the library's own sources do, whether it uses the installed tree or add_subdirectory.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(UOE_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/uoe)
set(UOE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/uoe)
target_include_directories(uoe_config INTERFACE $<INSTALL_INTERFACE:${UOE_INSTALL_INCLUDEDIR}>)

file(GLOB_RECURSE UOE_PUBLIC_HEADERS CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
     core/*.h autograd/*.h ops/*.h cuda/*.h nn/*.h analysis/*.h)
foreach(header ${UOE_PUBLIC_HEADERS})
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${UOE_INSTALL_INCLUDEDIR}/${folder} COMPONENT uoe_development)
endforeach()

install(TARGETS uoe uoe_config EXPORT uoeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT uoe_development)
install(EXPORT uoeTargets NAMESPACE uoe:: DESTINATION ${UOE_INSTALL_CMAKEDIR} COMPONENT uoe_development)
if(TARGET uoe_cli AND UOE_BUILD_APPS)  # a subproject builds the program only on request: not installed there
  install(TARGETS uoe_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT uoe_program)
endif()

# The package: uoeConfig.cmake finds what this build linked (OpenMP; CUDA, MPI only when built with them).
configure_package_config_file(cmake/uoeConfig.cmake.in ${PROJECT_BINARY_DIR}/uoeConfig.cmake
                              INSTALL_DESTINATION ${UOE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/uoeConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/uoeConfig.cmake ${PROJECT_BINARY_DIR}/uoeConfigVersion.cmake
        DESTINATION ${UOE_INSTALL_CMAKEDIR} COMPONENT uoe_development)

# pkg-config: the same usage requirements spelled as flags.
set(UOE_PC_CFLAGS "-std=c++20 ${OpenMP_CXX_FLAGS}")
set(UOE_PC_LIBS "${OpenMP_CXX_FLAGS}")
if(UOE_HAVE_CUDA)
  string(APPEND UOE_PC_CFLAGS " -DUOE_WITH_CUDA=1")
  foreach(dir ${CUDAToolkit_INCLUDE_DIRS})
    string(APPEND UOE_PC_CFLAGS " -I${dir}")
  endforeach()
  string(APPEND UOE_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}"
                            " -lcublasLt -lcublas -lcudart")
endif()
if(UOE_HAVE_MPI)
  string(APPEND UOE_PC_CFLAGS " -DUOE_WITH_MPI=1")
  foreach(dir ${MPI_CXX_INCLUDE_DIRS})
    string(APPEND UOE_PC_CFLAGS " -I${dir}")
  endforeach()
  foreach(lib ${MPI_CXX_LIBRARIES})
    string(APPEND UOE_PC_LIBS " ${lib}")
  endforeach()
endif()
if(UOE_HAVE_NCCL)
  string(APPEND UOE_PC_CFLAGS " -DUOE_WITH_NCCL=1")
  string(APPEND UOE_PC_LIBS " ${NCCL_LIBRARY}")
endif()
# Relocatable: the prefix is found from the .pc file's own place, so `cmake --install --prefix P` works anywhere.
file(RELATIVE_PATH UOE_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/uoe.pc.in ${PROJECT_BINARY_DIR}/uoe.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/uoe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT uoe_development)
