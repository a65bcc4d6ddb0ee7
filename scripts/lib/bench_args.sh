# shellcheck shell=bash
# bench_args.sh: the command line every benchmark script shares, `[BUILD_DIR] [-- extra flags]`,
# and the check that BUILD_DIR is a Release build. The sourcing script defines usage() and sets
# script_name and root first.
# shellcheck disable=SC2154,SC2034

# Sets build_dir (default build-release/) and extra (the flags after --).
parse_bench_args() {
  build_dir=$root/build-release
  extra=()
  while (($# > 0)); do
    case "$1" in
      -h | --help) usage; exit 0 ;;
      --) shift; extra=("$@"); break ;;
      -*) echo "$script_name: unknown option $1" >&2; usage >&2; exit 2 ;;
      *) build_dir=$1 ;;
    esac
    shift
  done
}

# Stops when build_dir does not exist (these scripts build nothing); warns unless it is Release.
require_release_build() {
  if [[ ! -d $build_dir ]]; then
    echo "$script_name: build directory $build_dir does not exist; this script builds nothing. Make it with:" >&2
    echo "  cmake -S $root -B $build_dir -DCMAKE_BUILD_TYPE=Release" >&2
    echo "  cmake --build $build_dir --target tokenmeter tokenmeter-sim tokenmeter-load" >&2
    exit 2
  fi
  local build_type
  build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
  if [[ $build_type != Release ]]; then
    echo "$script_name: warning: $build_dir is a '${build_type:-unknown}' build; numbers are meant for Release" >&2
  fi
}
