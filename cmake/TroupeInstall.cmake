# What `cmake --install` puts in place. Component trainer_api is what a user needs to build a
# trainer library (examples/user_trainer): the headers of trainers/api and the few core and data
# headers they include, the static libraries troupe::trainer_api, troupe::schema and troupe::base, a
# package config for find_package(troupe) and a troupe.pc for pkg-config. Component runtime is the
# troupe binary.
#
#   <prefix>/include/troupe/{trainers/api,core,data}/*.h   (include paths as in this repository)
#   <prefix>/lib/libtroupe_trainer_api.a, libtroupe_schema.a, libtroupe_base.a
#   <prefix>/lib/cmake/troupe/troupe{Config,ConfigVersion,Targets}.cmake
#   <prefix>/lib/pkgconfig/troupe.pc
#   <prefix>/include/troupe/models/torch/*.h, <prefix>/share/troupe/torch/*.cc   (troupe::torch_module)
include(CMakePackageConfigHelpers)

set(TROUPE_INSTALL_CMAKEDIR lib/cmake/troupe)

install(TARGETS troupe_base troupe_schema troupe_trainer_api EXPORT troupeTargets
  ARCHIVE DESTINATION lib COMPONENT trainer_api)
# The closure of trainers/api/trainer.h's includes; trainer_api_install_test keeps it honest by
# compiling the installed header alone.
install(FILES core/status.h core/device.h core/dtype.h core/host_device.h core/splitmix.h ${CMAKE_BINARY_DIR}/generated/core/version.h
  DESTINATION include/troupe/core COMPONENT trainer_api)
install(FILES trainers/api/trainer.h DESTINATION include/troupe/trainers/api COMPONENT trainer_api)
install(FILES data/schema.h DESTINATION include/troupe/data COMPONENT trainer_api)
# A user's libtorch module (models/torch/module_trainer.h): troupe::torch_module compiles the adapter's
# few sources into the user's library, against the libtorch that build finds (find_package(Torch)),
# so troupe's own libtorch never has to match it.
set(TROUPE_TORCH_ADAPTER_SOURCES batch_randomness.cc libtorch_version.cc module_loss.cc module_steps.cc
  param_binding.cc)
add_library(troupe_torch_module INTERFACE)
set_target_properties(troupe_torch_module PROPERTIES EXPORT_NAME torch_module)
foreach(source ${TROUPE_TORCH_ADAPTER_SOURCES})
  target_sources(troupe_torch_module INTERFACE $<INSTALL_INTERFACE:$<INSTALL_PREFIX>/share/troupe/torch/${source}>)
  install(FILES models/torch/${source} DESTINATION share/troupe/torch COMPONENT trainer_api)
endforeach()
target_link_libraries(troupe_torch_module INTERFACE troupe_trainer_api)
install(TARGETS troupe_torch_module EXPORT troupeTargets COMPONENT trainer_api)
install(FILES models/torch/batch_randomness.h models/torch/guarded.h models/torch/module_loss.h models/torch/module_steps.h
  models/torch/module_trainer.h models/torch/param_binding.h DESTINATION include/troupe/models/torch COMPONENT trainer_api)
install(EXPORT troupeTargets NAMESPACE troupe:: DESTINATION ${TROUPE_INSTALL_CMAKEDIR} COMPONENT trainer_api)

configure_package_config_file(cmake/troupeConfig.cmake.in ${CMAKE_BINARY_DIR}/troupeConfig.cmake
  INSTALL_DESTINATION ${TROUPE_INSTALL_CMAKEDIR})
# Exact: a trainer library built against another troupe version is refused when loaded, so
# find_package should not offer one either.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/troupeConfigVersion.cmake COMPATIBILITY ExactVersion)
install(FILES ${CMAKE_BINARY_DIR}/troupeConfig.cmake ${CMAKE_BINARY_DIR}/troupeConfigVersion.cmake
  DESTINATION ${TROUPE_INSTALL_CMAKEDIR} COMPONENT trainer_api)
configure_file(cmake/troupe.pc.in ${CMAKE_BINARY_DIR}/troupe.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/troupe.pc DESTINATION lib/pkgconfig COMPONENT trainer_api)

if(TARGET troupe)
  install(TARGETS troupe RUNTIME DESTINATION bin COMPONENT runtime)
endif()
