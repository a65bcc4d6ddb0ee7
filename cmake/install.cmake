# Installation and packaging: what `cmake --install` puts where, and the .deb CPack makes from it.
#
#   cmake --install build [--prefix /usr/local]     binary, tokenizers, config, systemd unit, docs
#   cpack --config build/CPackConfig.cmake -B build/package    build/package/tokenmeter_<v>_amd64.deb
#
# Layout under the prefix (GNUInstallDirs; /usr/local by default, /usr in the .deb):
#   bin/tokenmeter
#   share/tokenmeter/tokenizers/<model>/tokenizer.json   the model tokenizers fetch-tokenizers.sh
#                                                          fetched (component "tokenizers"; not in
#                                                          the .deb: their licenses are the model
#                                                          owners', docs/tokenizers.md)
#   <sysconfdir>/tokenmeter/tokenmeter.yaml               the minimal config (/etc in the .deb); an
#                                                          existing one is kept (install-system-files)
#   share/doc/tokenmeter/                                 README, config reference, annotated example
#   lib/systemd/system/tokenmeter.service                 the unit (/usr/lib/systemd/system in the .deb)
# o200k_base and cl100k_base are built into the binary, so their fetched JSON files are not
# installed (a file would take precedence over the identical built-in table and load slower).
include(GNUInstallDirs)

set(TOKENMETER_INSTALL_TOKENIZERS_FROM "${PROJECT_SOURCE_DIR}/.cache/tokenizers" CACHE PATH
    "Directory whose model tokenizers (<model>/tokenizer.json) `cmake --install` copies")

install(TARGETS tokenmeter RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${TOKENMETER_INSTALL_TOKENIZERS_FROM}/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tokenmeter/tokenizers
        COMPONENT tokenizers OPTIONAL
        FILES_MATCHING PATTERN "tokenizer.json")
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/config/tokenmeter.example.yaml
              ${PROJECT_SOURCE_DIR}/docs/metrics.md ${PROJECT_SOURCE_DIR}/docs/tokenizers.md
              ${PROJECT_SOURCE_DIR}/proxy/tokenizer/embedded/LICENSE.tiktoken
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/config/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME configuration.md COMPONENT runtime)
# The config and the unit go where the system looks for them, decided at install time from the
# prefix actually used (/usr: /etc and /usr/lib/systemd/system, as Debian does; any other
# prefix: <prefix>/etc and <prefix>/lib/systemd/system, which systemd also searches).
install(CODE "set(TOKENMETER_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
set(TOKENMETER_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
set(TOKENMETER_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
set(TOKENMETER_BUILD_DIR \"${PROJECT_BINARY_DIR}\")" COMPONENT runtime)
install(SCRIPT ${CMAKE_CURRENT_LIST_DIR}/install-system-files.cmake COMPONENT runtime)

# The .deb: only the runtime component (binary with the built-in tables, config, unit, docs).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tokenmeter)
set(CPACK_PACKAGE_VENDOR tokenmeter)
set(CPACK_PACKAGE_CONTACT "tokenmeter maintainers <tokenmeter@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Sidecar reverse proxy that meters LLM inference traffic (Prometheus, usage records)")
# Absolute destinations (/etc, /usr/lib/systemd) must land in CPack's staging tree, not on the
# build machine: stage with DESTDIR and the real prefix, /usr (with CPACK_SET_DESTDIR, CPack
# installs with CPACK_INSTALL_PREFIX).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Only the runtime component: build directory, project, component, subdirectory.
set(CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};${PROJECT_NAME};runtime;/")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Maintainer scripts: systemd reloads its units after install, upgrade and removal; an upgrade
# restarts a running service, a removal stops it (packaging/debian/).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
