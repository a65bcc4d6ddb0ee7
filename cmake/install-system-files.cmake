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

# An existing config is the operator's: it is never replaced. When it differs from the shipped one,
# the shipped one is put beside it as tokenmeter.yaml.default, to compare with.
set(shipped_config ${TOKENMETER_SOURCE_DIR}/config/tokenmeter.yaml)
set(installed_config $ENV{DESTDIR}${TOKENMETER_CONFIG_FILE})
if(NOT EXISTS ${installed_config})
  file(INSTALL ${shipped_config} DESTINATION ${sysconf_dir}/tokenmeter)
else()
  file(READ ${installed_config} installed_text)
  file(READ ${shipped_config} shipped_text)
  if(installed_text STREQUAL shipped_text)
    message(STATUS "Up-to-date: ${installed_config}")
  else()
    message(STATUS "Keeping: ${installed_config} (changed here); "
                   "the shipped config is ${installed_config}.default")
    file(INSTALL ${shipped_config} DESTINATION ${sysconf_dir}/tokenmeter
         RENAME tokenmeter.yaml.default)
  endif()
endif()

set(unit_dir ${TOKENMETER_BUILD_DIR}/packaging)
configure_file(${TOKENMETER_SOURCE_DIR}/packaging/tokenmeter.service.in
               ${unit_dir}/tokenmeter.service @ONLY)
file(INSTALL ${unit_dir}/tokenmeter.service
     DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
