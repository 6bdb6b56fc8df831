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
include(CMakePackageConfigHelpers)

set(TROUPE_INSTALL_CMAKEDIR lib/cmake/troupe)

install(TARGETS troupe_base troupe_schema troupe_trainer_api EXPORT troupeTargets
  ARCHIVE DESTINATION lib COMPONENT trainer_api)
# The closure of trainers/api/trainer.h's includes; trainer_api_install_test keeps it honest by
# compiling the installed header alone.
install(FILES core/status.h core/device.h core/dtype.h core/host_device.h ${CMAKE_BINARY_DIR}/generated/core/version.h
  DESTINATION include/troupe/core COMPONENT trainer_api)
install(FILES trainers/api/trainer.h DESTINATION include/troupe/trainers/api COMPONENT trainer_api)
install(FILES data/schema.h DESTINATION include/troupe/data COMPONENT trainer_api)
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
