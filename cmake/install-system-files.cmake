# Run by `cmake --install` (see install.cmake): the config file and the systemd unit, placed by
# the prefix in use at install time. Inputs: TOKENMETER_SOURCE_DIR, TOKENMETER_BINDIR,
# TOKENMETER_DOCDIR (relative to the prefix), TOKENMETER_BUILD_DIR, CMAKE_INSTALL_PREFIX; DESTDIR is honoured by
# file(INSTALL).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(sysconf_dir /etc)
else()
  set(sysconf_dir ${CMAKE_INSTALL_PREFIX}/etc)
endif()
set(TOKENMETER_BIN_FILE ${CMAKE_INSTALL_PREFIX}/${TOKENMETER_BINDIR}/tokenmeter)
set(TOKENMETER_CONFIG_FILE ${sysconf_dir}/tokenmeter/tokenmeter.yaml)
set(TOKENMETER_DOC_DIR ${CMAKE_INSTALL_PREFIX}/${TOKENMETER_DOCDIR})

file(INSTALL ${TOKENMETER_SOURCE_DIR}/config/tokenmeter.yaml
     DESTINATION ${sysconf_dir}/tokenmeter)

set(unit_dir ${TOKENMETER_BUILD_DIR}/packaging)
configure_file(${TOKENMETER_SOURCE_DIR}/packaging/tokenmeter.service.in
               ${unit_dir}/tokenmeter.service @ONLY)
file(INSTALL ${unit_dir}/tokenmeter.service
     DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
