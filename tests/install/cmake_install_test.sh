#!/usr/bin/env bash
# install.keeps_config: `cmake --install` (the runtime component) into an empty prefix puts the
# shipped config there; after the operator edits it, a second install keeps the edit and puts the
# shipped config beside it as tokenmeter.yaml.default. Needs no root.
#
# Usage: tests/install/cmake_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

build_dir=${1:?usage: cmake_install_test.sh BUILD_DIR SOURCE_DIR}
source_dir=${2:?usage: cmake_install_test.sh BUILD_DIR SOURCE_DIR}
fail() {
  echo "install.keeps_config: FAIL: $*" >&2
  exit 1
}

prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
config=$prefix/etc/tokenmeter/tokenmeter.yaml
shipped=$source_dir/config/tokenmeter.yaml

cmake --install "$build_dir" --prefix "$prefix" --component runtime >"$prefix/install1.log" ||
  fail "cmake --install: $(cat "$prefix/install1.log")"
cmp -s "$config" "$shipped" || fail "the first install did not put the shipped config at $config"
[[ ! -e $config.default ]] || fail "a first install has nothing to keep, yet wrote $config.default"
[[ -f $prefix/lib/systemd/system/tokenmeter.service ]] || fail "no unit installed"

printf '%s\n' '# edited here' 'upstream: "http://10.1.2.3:8000"' >>"$config"
edited=$(cat "$config")
cmake --install "$build_dir" --prefix "$prefix" --component runtime >"$prefix/install2.log" ||
  fail "cmake --install again: $(cat "$prefix/install2.log")"
[[ $(cat "$config") == "$edited" ]] || fail "the second install replaced the edited $config"
cmp -s "$config.default" "$shipped" || fail "the shipped config is not at $config.default"
grep -q "Keeping: $config" "$prefix/install2.log" || fail "the install did not say it kept $config"

# Unchanged: nothing written beside it.
rm "$config.default"
cp "$shipped" "$config"
cmake --install "$build_dir" --prefix "$prefix" --component runtime >"$prefix/install3.log" ||
  fail "cmake --install a third time"
[[ ! -e $config.default ]] || fail "an unchanged config got a .default beside it"
echo "install.keeps_config: an edited config is kept, the shipped one written beside it"
