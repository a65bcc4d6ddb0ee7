#!/usr/bin/env bash
# Tests check_includes.sh on small fake trees: a forbidden include, a stale or a used known
# violation, a table allowing config below app, a cycle, a module without a row.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check="$here/check_includes.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

table_rows() {
    cat <<'EOF'
# Fake

## Dependencies

| Module | May include | Why |
|---|---|---|
| `core` | (nothing) | bottom |
| `sse` | `core` | parser |
| `meter` | `sse`, `core` | above sse |
| `config` | `core` | structs |
| `app` | `meter`, `sse`, `config`, `core` | root |
| `main` | `app`, `config` | main.cpp |

## Next section

| `sse` | `meter` | a table of another section is not read |
EOF
}

# A tree whose every include is allowed: sibling and third-party quoted includes are not checked.
make_tree() {
    rm -rf "$work/tree" && mkdir -p "$work/tree/proxy"/{core,sse,meter,config,app}
    local p="$work/tree/proxy"
    echo '#pragma once' >"$p/core/time.hpp"
    printf '#include "sse/parser.hpp"\n#include "core/time.hpp"\n' >"$p/sse/parser.cpp"
    printf '#pragma once\n#include "core/time.hpp"\n' >"$p/sse/parser.hpp"
    printf '#include "meter.hpp"\n#include "sse/parser.hpp"\n#include "nlohmann/json.hpp"\n' \
        >"$p/meter/meter.cpp"
    echo '#include "core/time.hpp"' >"$p/config/config.hpp"
    printf '#include "config/config.hpp"\n#  include "meter/meter.hpp"\n' >"$p/app/app.cpp"
    printf '#include "app/app.hpp"\n#include "config/config.hpp"\n' >"$p/main.cpp"
    table_rows >"$work/tree/architecture.md"
    : >"$work/known.txt"
}

# expect NAME STATUS PATTERN: runs the checker on the tree, wants that exit status and, if
# PATTERN is not empty, a line of output matching it.
expect() {
    local name="$1" want="$2" pattern="$3" out status=0
    out="$("$check" "$work/tree" "$work/tree/architecture.md" "$work/known.txt" 2>&1)" || status=$?
    if [[ $status != "$want" ]]; then
        printf 'FAIL %s: exit %s, wanted %s\n%s\n' "$name" "$status" "$want" "$out"
        failures=$((failures + 1))
    elif [[ -n $pattern ]] && ! grep -qE -- "$pattern" <<<"$out"; then
        printf 'FAIL %s: no line matching %s in\n%s\n' "$name" "$pattern" "$out"
        failures=$((failures + 1))
    else
        printf 'ok   %s\n' "$name"
    fi
}

make_tree
expect "allowed includes pass" 0 ""

make_tree
printf '#include "core/time.hpp"\n\n#include "meter/meter.hpp"\n' >>"$work/tree/proxy/sse/parser.hpp"
expect "upward include is caught with file, line and edge" 1 \
    '^proxy/sse/parser\.hpp:5: forbidden include sse -> meter \("meter/meter\.hpp"\)'

make_tree
echo '#include "config/config.hpp"' >>"$work/tree/proxy/meter/meter.cpp"
expect "config below app is caught" 1 '^proxy/meter/meter\.cpp:4: forbidden include meter -> config'

make_tree
echo '#include "app/app.hpp"' >>"$work/tree/proxy/main.cpp"
echo '#include "meter/meter.hpp"' >>"$work/tree/proxy/main.cpp"
expect "main.cpp is module main" 1 '^proxy/main\.cpp:4: forbidden include main -> meter'

make_tree
echo '#include "meter/meter.hpp"' >>"$work/tree/proxy/sse/parser.cpp"
printf '# a comment\nproxy/sse/parser.cpp meter   # being removed\n' >"$work/known.txt"
expect "a listed violation passes" 0 ""

make_tree
printf 'proxy/sse/parser.cpp meter\n' >"$work/known.txt"
expect "a listed violation that is gone fails" 1 'proxy/sse/parser\.cpp no longer includes meter'

make_tree
echo '#include "meter/meter.hpp"' >>"$work/tree/proxy/sse/parser.cpp"
echo '#include "meter/meter.hpp"' >>"$work/tree/proxy/sse/parser.hpp"
printf 'proxy/sse/parser.cpp meter\n' >"$work/known.txt"
expect "a listing is per file" 1 '^proxy/sse/parser\.hpp:3: forbidden include sse -> meter'

make_tree
# shellcheck disable=SC2016 # the backticks are markdown, not a command
sed -i 's/^| `meter` | `sse`, `core`/| `meter` | `sse`, `config`, `core`/' "$work/tree/architecture.md"
expect "a table allowing config below app fails" 1 'meter may not include config'

make_tree
# shellcheck disable=SC2016 # the backticks are markdown, not a command
sed -i 's/^| `sse` | `core`/| `sse` | `meter`, `core`/' "$work/tree/architecture.md"
expect "a cycle in the table fails" 1 'has a cycle'

make_tree
mkdir -p "$work/tree/proxy/observe" && echo '#include "core/time.hpp"' >"$work/tree/proxy/observe/o.cpp"
expect "a module without a row fails" 1 'module observe has no row'

# A "Kept apart" row: app may not reach sse through any chain. app.cpp includes meter/meter.hpp,
# which includes nothing, so the tree passes; once meter.hpp includes sse (an allowed edge) the
# chain app -> meter -> sse fails.
kept_apart() {
    printf '\n## Kept apart\n\n| Module | Never reaches | Why |\n|---|---|---|\n'
    # shellcheck disable=SC2016 # the backticks are markdown, not a command
    printf '| `app` | `sse` | test |\n'
}

make_tree
kept_apart >>"$work/tree/architecture.md"
expect "a module kept apart that reaches nothing forbidden passes" 0 ""

make_tree
kept_apart >>"$work/tree/architecture.md"
printf '#pragma once\n#include "sse/parser.hpp"\n' >"$work/tree/proxy/meter/meter.hpp"
expect "a chain of includes into a kept-apart module fails, with the chain" 1 \
    '^proxy/app/app\.cpp: app must not reach sse through includes: proxy/app/app\.cpp -> proxy/meter/meter\.hpp -> proxy/sse/parser\.hpp'

make_tree
sed -i 's/## Dependencies/## Something else/' "$work/tree/architecture.md"
expect "a missing table fails" 1 'no "## Dependencies" table'

if [[ $failures -gt 0 ]]; then
    echo "$failures check(s) failed"
    exit 1
fi
