#!/usr/bin/env bash
# install.deb: the .deb CPack makes from an existing build directory, installed and removed on this
# machine as a user would: dpkg -i, tokenmeter --version, `tokenize` with the built-in o200k_base
# table (tiktoken's ids, no file, no config, no environment), the installed config accepted by
# --check-config, systemd-analyze verify on the unit, dpkg -r (binary gone, config kept as a
# conffile), then purge. Needs root (dpkg); fails, never skips, without it.
#
# Usage: tests/install/deb_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: deb_test.sh BUILD_DIR}
fail() {
  echo "install.deb: FAIL: $*" >&2
  exit 1
}

[[ $(id -u) == 0 ]] || fail "dpkg -i needs root (CI runs as root)"
for tool in cpack dpkg dpkg-deb systemd-analyze; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found"
done
if dpkg-query -W -f='${Status}' tokenmeter 2>/dev/null | grep -q 'install ok installed'; then
  fail "a tokenmeter package is already installed here; this test will not replace it"
fi

work=$(mktemp -d)
installed=0
cleanup() {
  if ((installed)); then
    dpkg --purge tokenmeter >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "install.deb: cpack from $build_dir"
cpack --config "$build_dir/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
shopt -s nullglob
debs=("$work"/tokenmeter_*.deb)
((${#debs[@]} == 1)) || fail "expected one tokenmeter_*.deb in $work, got ${#debs[@]}"
deb=${debs[0]}
echo "install.deb: $(basename "$deb"), $(stat -c %s "$deb") bytes"

contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/tokenmeter ./etc/tokenmeter/tokenmeter.yaml \
  ./usr/lib/systemd/system/tokenmeter.service ./usr/share/doc/tokenmeter/README.md; do
  grep -q " $path\$" <<<"$contents" || fail "$path is not in the package"
done
if grep -q 'tokenizer.json$' <<<"$contents"; then
  fail "model tokenizer files must not be in the package (their licenses, docs/tokenizers.md)"
fi
dpkg-deb -f "$deb" Depends | grep -q libssl || fail "Depends (dpkg-shlibdeps) lacks libssl"
[[ $(dpkg-deb -e "$deb" "$work/control" && cat "$work/control/conffiles") == \
  "/etc/tokenmeter/tokenmeter.yaml" ]] || fail "the config is not a conffile"

dpkg -i "$deb" || fail "dpkg -i"
installed=1

version=$(/usr/bin/tokenmeter --version) || fail "tokenmeter --version"
echo "install.deb: $version"
grep -q '0\.' <<<"$version" || fail "unexpected --version output: $version"

# The built-in table, with nothing else to find: no env, cwd elsewhere. The ids are tiktoken
# 1.0.22's encode_ordinary("hello world") and ("<|endoftext|>") for o200k_base.
cd "$work"
for probe in 'hello world#24912 2375' '<|endoftext|>#27 91 419 1440 919 91 29'; do
  text=${probe%%#*}
  want=${probe#*#}
  got=$(printf '%s' "$text" | env -u TOKENMETER_TOKENIZER_DIR /usr/bin/tokenmeter tokenize \
    --tokenizer o200k_base --ids --verbose 2>"$work/tokenize.err" | head -n 1) ||
    fail "tokenize: $(cat "$work/tokenize.err")"
  [[ $got == "$want" ]] || fail "tokenize '$text': got '$got', want '$want'"
  grep -q 'from embedded' "$work/tokenize.err" || fail "not the built-in table: $(cat "$work/tokenize.err")"
done
echo "install.deb: tokenize --tokenizer o200k_base --ids matches tiktoken (built-in table)"

env -u TOKENMETER_TOKENIZER_DIR /usr/bin/tokenmeter --check-config /etc/tokenmeter/tokenmeter.yaml ||
  fail "the installed config does not validate"
systemd-analyze verify /usr/lib/systemd/system/tokenmeter.service ||
  fail "systemd-analyze verify tokenmeter.service"
echo "install.deb: systemd-analyze verify: ok"
# The unit's sandboxing, as systemd rates it (0 safest, 10 none): held to "OK" (below 4).
exposure=$(systemd-analyze security --offline=true /usr/lib/systemd/system/tokenmeter.service 2>&1 |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[[ -n $exposure ]] || fail "systemd-analyze security printed no exposure level"
awk -v e="$exposure" 'BEGIN { exit !(e < 4.0) }' || fail "unit exposure $exposure, want below 4.0"
grep -q '^ExecReload=' /usr/lib/systemd/system/tokenmeter.service || fail "the unit has no ExecReload"
grep -q '^ExecStartPre=.*--check-config' /usr/lib/systemd/system/tokenmeter.service ||
  fail "the unit does not check its config before starting"
echo "install.deb: systemd-analyze security: exposure $exposure; ExecReload and a config check"

dpkg -r tokenmeter || fail "dpkg -r"
[[ ! -e /usr/bin/tokenmeter ]] || fail "/usr/bin/tokenmeter is still there after dpkg -r"
[[ -e /etc/tokenmeter/tokenmeter.yaml ]] || fail "dpkg -r removed the conffile (only purge should)"
dpkg --purge tokenmeter || fail "dpkg --purge"
installed=0
[[ ! -e /etc/tokenmeter/tokenmeter.yaml ]] || fail "dpkg --purge left the config"
echo "install.deb: dpkg -r and --purge: ok"
