# Debug information for the builds that carry it (RelWithDebInfo, the default, and Debug).
#
# By default: line tables only (-g1), with the debug sections compressed (-gz=zlib) in objects and
# in what is linked from them. Line tables are what backtraces, sanitizer reports, perf and
# callgrind read. Full DWARF for the Asio/Beast translation units costs about 40 % more compile
# time and, uncompressed, about seven times the disk: relay/client_connection.cpp takes 64 s and
# 67 MB with -g, 44 s and 10 MB with -g1 -gz=zlib (GCC 12; docs/development.md, "Building by hand"), and the
# test command builds four trees on one disk (normal, ASan, TSan, fuzz).
#
# -DTOKENMETER_FULL_DEBUG_INFO=ON keeps full debug information (-g), for stepping through code
# and printing variables in gdb. -DTOKENMETER_COMPRESS_DEBUG_INFO=OFF writes it uncompressed,
# for tools that cannot read compressed sections (gdb, valgrind, perf and the sanitizers can).
option(TOKENMETER_FULL_DEBUG_INFO "Full debug information (-g) instead of line tables (-g1)" OFF)
option(TOKENMETER_COMPRESS_DEBUG_INFO "Compress debug sections (-gz=zlib) in objects and binaries" ON)

if(NOT TOKENMETER_FULL_DEBUG_INFO)
  foreach(config DEBUG RELWITHDEBINFO)
    string(REPLACE " -g " " -g1 " flags " ${CMAKE_CXX_FLAGS_${config}} ")
    string(STRIP "${flags}" CMAKE_CXX_FLAGS_${config})
  endforeach()
endif()

if(TOKENMETER_COMPRESS_DEBUG_INFO)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-g -gz=zlib")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-gz=zlib")
  check_cxx_source_compiles("int main() { return 0; }" TOKENMETER_HAVE_GZ_ZLIB)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(TOKENMETER_HAVE_GZ_ZLIB)
    add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-gz=zlib>)
    add_link_options($<$<CONFIG:Debug,RelWithDebInfo>:-gz=zlib>)
  endif()
endif()
