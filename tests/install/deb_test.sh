#!/usr/bin/env bash
# install.deb: the .deb CPack makes from an existing build directory, installed and removed on this
# machine as a user would: dpkg -i, tokenmeter --version, `tokenize` with the built-in o200k_base
# table (tiktoken's ids, no file, no config, no environment), the installed config accepted by
# --check-config, systemd-analyze verify and security on the unit, dpkg -r (binary gone, config
# kept as a conffile), then purge. The maintainer scripts' calls to systemd are recorded by stand-ins
# for systemctl, deb-systemd-invoke and deb-systemd-helper put first on PATH, with a systemd
# running or not as each dpkg call's private mount namespace says (/run/systemd/system present or
# absent): systemd reloads after install, upgrade and removal, a first install starts nothing, an
# upgrade restarts, a removal stops while the binary is still there. Needs root (dpkg, unshare);
# fails, never skips, without it.
#
# Usage: tests/install/deb_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: deb_test.sh BUILD_DIR}
fail() {
  echo "install.deb: FAIL: $*" >&2
  exit 1
}

[[ $(id -u) == 0 ]] || fail "dpkg -i needs root (CI runs as root)"
for tool in cpack dpkg dpkg-deb systemd-analyze unshare; do
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

for script in postinst prerm postrm; do
  [[ -x $work/control/$script ]] || fail "the package has no executable $script"
done

# Stand-ins that record each call (and whether the binary is installed at that moment).
stubs=$work/stubs
calls=$work/systemd-calls.log
mkdir -p "$stubs"
for tool in systemctl deb-systemd-invoke deb-systemd-helper; do
  cat >"$stubs/$tool" <<STUB
#!/bin/sh
binary=absent
[ -x /usr/bin/tokenmeter ] && binary=present
echo "$tool \$* (binary \$binary)" >>"$calls"
STUB
  chmod +x "$stubs/$tool"
done
# dpkg ARGS with systemd running (/run/systemd/system, in a mount namespace of its own) or not.
dpkg_with() {
  local init=$1
  shift
  : >"$calls"
  # shellcheck disable=SC2016 # $1 and $@ belong to the inner shell
  PATH="$stubs:$PATH" unshare --mount --propagation private sh -c \
    'mount -t tmpfs tokenmeter-test /run && if [ "$1" = systemd ]; then mkdir -p /run/systemd/system; fi &&
     shift && exec dpkg "$@"' sh "$init" "$@"
}
# The recorded calls, as one line each, must include (in this order) every pattern given.
expect_calls() {
  local what=$1
  shift
  local rest
  rest=$(cat "$calls")
  for pattern in "$@"; do
    grep -q -- "$pattern" <<<"$rest" || fail "$what: no call '$pattern' (in order) among: $(cat "$calls")"
    rest=$(sed -n "/$pattern/,\$p" <<<"$rest" | tail -n +2)
  done
}
refuse_calls() {
  local what=$1 pattern=$2
  if grep -q -- "$pattern" "$calls"; then
    fail "$what: unexpected call '$pattern': $(cat "$calls")"
  fi
}

dpkg_with systemd -i "$deb" || fail "dpkg -i"
installed=1
expect_calls "first install" "deb-systemd-helper update-state tokenmeter.service" \
  "systemctl --system daemon-reload"
refuse_calls "first install (not enabled, config unedited)" "deb-systemd-invoke"
dpkg_with none -i "$deb" || fail "dpkg -i again, no systemd running"
expect_calls "upgrade without systemd" "deb-systemd-helper unmask tokenmeter.service"
refuse_calls "upgrade without systemd" "systemctl"
refuse_calls "upgrade without systemd" "deb-systemd-invoke"
dpkg_with systemd -i "$deb" || fail "dpkg -i again (an upgrade)"
expect_calls "upgrade" "systemctl --system daemon-reload" \
  "deb-systemd-invoke restart tokenmeter.service (binary present)"
refuse_calls "upgrade (postinst restarts; nothing stops first)" "deb-systemd-invoke stop"
echo "install.deb: maintainer scripts: daemon-reload on install, restart on upgrade, nothing without systemd"

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
# The unit's sandboxing, as systemd rates it (0 safest, 10 none): held below 2.5.
exposure=$(systemd-analyze security --offline=true /usr/lib/systemd/system/tokenmeter.service 2>&1 |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[[ -n $exposure ]] || fail "systemd-analyze security printed no exposure level"
awk -v e="$exposure" 'BEGIN { exit !(e < 2.5) }' || fail "unit exposure $exposure, want below 2.5"
grep -q '^ExecReload=' /usr/lib/systemd/system/tokenmeter.service || fail "the unit has no ExecReload"
grep -q '^ExecStartPre=.*--check-config' /usr/lib/systemd/system/tokenmeter.service ||
  fail "the unit does not check its config before starting"
echo "install.deb: systemd-analyze security: exposure $exposure; ExecReload and a config check"

dpkg_with systemd -r tokenmeter || fail "dpkg -r"
expect_calls "removal" "deb-systemd-invoke stop tokenmeter.service (binary present)" \
  "systemctl --system daemon-reload (binary absent)" "deb-systemd-helper mask tokenmeter.service"
[[ ! -e /usr/bin/tokenmeter ]] || fail "/usr/bin/tokenmeter is still there after dpkg -r"
[[ -e /etc/tokenmeter/tokenmeter.yaml ]] || fail "dpkg -r removed the conffile (only purge should)"
dpkg_with systemd --purge tokenmeter || fail "dpkg --purge"
expect_calls "purge" "deb-systemd-helper purge tokenmeter.service" \
  "deb-systemd-helper unmask tokenmeter.service"
installed=0
[[ ! -e /etc/tokenmeter/tokenmeter.yaml ]] || fail "dpkg --purge left the config"
echo "install.deb: dpkg -r and --purge: ok (stop before removal, reload, mask; purge forgets the unit)"
