#!/usr/bin/env bash
# The include-direction test: every `#include "module/…"` in proxy/ must be allowed by the
# "Dependencies" table of docs/architecture.md, or be listed in known_violations.txt; and no file
# of a module in the "Kept apart" table may reach the modules its row names through any chain of
# includes (a header that includes a header that includes one counts).
# Usage: check_includes.sh [ROOT [TABLE [KNOWN]]]
#   ROOT  tree holding proxy/ (default: this repository)
#   TABLE markdown file with a "## Dependencies" table (default: ROOT/docs/architecture.md)
#   KNOWN known violations, "file module" per line (default: the list next to this script)
# Prints one line per problem (file:line: edge) and exits 1 if there is any.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${1:-$here/../..}"
table="${2:-$root/docs/architecture.md}"
known="${3:-$here/known_violations.txt}"
for f in "$table" "$known"; do
    [[ -f $f ]] || { echo "check_includes: no such file: $f" >&2; exit 2; }
done
[[ -d $root/proxy ]] || { echo "check_includes: no proxy/ under $root" >&2; exit 2; }
cd "$root"

# Directories of proxy/: a quoted include whose first path part is one of them is ours; any
# other quoted include (none today) is a third-party header and not checked.
dirs="$(find proxy -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | tr '\n' ' ')"

includes="$(find proxy -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.ipp' \) |
    LC_ALL=C sort |
    xargs -r grep -nHE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' || true)"
printf '%s\n' "$includes" |
    LC_ALL=C awk -v table="$table" -v known_file="$known" -v dirs="$dirs" '
function fail(msg) { print msg; failed = 1 }
function strip(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
# Every `name` in backticks of a table cell, space-separated.
function ticked(cell,    out, name) {
    out = ""
    while (match(cell, /`[^`]+`/)) {
        name = substr(cell, RSTART + 1, RLENGTH - 2)
        out = out (out == "" ? "" : " ") name
        cell = substr(cell, RSTART + RLENGTH)
    }
    return out
}
# Files of module m must not reach module x through any chain: a depth-first walk of the
# include graph from each file of m, with the first chain found printed.
function reaches(f, x,    n, kids, i, below) {
    if (f in memo) { return memo[f] }
    memo[f] = ""                              # on the path: a cycle adds nothing
    if (index(f, "proxy/" x "/") == 1) { memo[f] = f; return f }
    n = split(graph[f], kids, " ")
    for (i = 1; i <= n; i++) {
        below = reaches(kids[i], x)
        if (below != "") { memo[f] = f " -> " below; return memo[f] }
    }
    return ""
}
function check_reach(    in_apart, line, cell, m, xs, n, i, f, chain) {
    while ((getline line < table) > 0) {
        if (line ~ /^## /) { in_apart = (line ~ /^## Kept apart[ \t]*$/); continue }
        if (!in_apart || line !~ /^\|/) { continue }
        split(line, cell, "|")
        m = ticked(cell[2])
        if (m == "" || m ~ / /) { continue }
        apart[m] = ticked(cell[3])
    }
    close(table)
    for (m in apart) {
        n = split(apart[m], xs, " ")
        for (i = 1; i <= n; i++) {
            delete memo
            for (f in files) {
                if (index(f, "proxy/" m "/") != 1) { continue }
                chain = reaches(f, xs[i])
                if (chain != "") { fail(f ": " m " must not reach " xs[i] " through includes: " chain) }
            }
        }
    }
}
# Depth-first search for a cycle; state: 1 on the path, 2 done.
function visit(m,    n, deps, i) {
    if (state[m] == 1) { return 1 }
    if (state[m] == 2) { return 0 }
    state[m] = 1
    n = split(row[m], deps, " ")
    for (i = 1; i <= n; i++) {
        if (visit(deps[i])) {
            if (!cycle_reported) { fail(table ": the Dependencies table has a cycle through " m " -> " deps[i]); cycle_reported = 1 }
            return 1
        }
    }
    state[m] = 2
    return 0
}
BEGIN {
    in_section = 0
    while ((getline line < table) > 0) {
        if (line ~ /^## /) { in_section = (line ~ /^## Dependencies[ \t]*$/); continue }
        if (!in_section || line !~ /^\|/) { continue }
        split(line, cell, "|")
        module = ticked(cell[2])
        if (module == "" || module ~ / /) { continue }   # header, separator, or not a module row
        if (module in row) { fail(table ": module " module " has two rows") }
        row[module] = ticked(cell[3])
        modules++
        n = split(row[module], deps, " ")
        for (i = 1; i <= n; i++) {
            allowed[module, deps[i]] = 1
            if (deps[i] == "config" && module != "app" && module != "main") {
                fail(table ": " module " may not include config: below app/ nobody includes config/")
            }
        }
    }
    close(table)
    if (modules == 0) { fail(table ": no \"## Dependencies\" table found"); exit }
    for (m in row) {
        n = split(row[m], deps, " ")
        for (i = 1; i <= n; i++) {
            if (!(deps[i] in row)) { fail(table ": " m " may include " deps[i] ", which has no row") }
        }
    }
    for (m in row) { visit(m) }

    n = split(dirs, d, " ")
    for (i = 1; i <= n; i++) { ours[d[i]] = 1 }
    for (m in row) { ours[m] = 1 }

    while ((getline line < known_file) > 0) {
        sub(/#.*/, "", line)
        line = strip(line)
        if (line == "") { continue }
        if (split(line, f, /[ \t]+/) != 2) { fail(known_file ": expected \"file module\": " line); continue }
        known[f[1], f[2]] = 0
        known_order[++known_count] = f[1] SUBSEP f[2]
    }
    close(known_file)
}
$0 != "" {
    # proxy/relay/headers.hpp:9:#include "config/config.hpp"
    colon = index($0, ":"); file = substr($0, 1, colon - 1); rest = substr($0, colon + 1)
    colon = index(rest, ":"); lineno = substr(rest, 1, colon - 1); text = substr(rest, colon + 1)
    files[file] = 1
    match(text, /"[^"]*"/)
    included = substr(text, RSTART + 1, RLENGTH - 2)
    if (index(included, "/") == 0) {
        dir = file; sub(/\/[^\/]*$/, "", dir); graph[file] = graph[file] " " dir "/" included
    } else if (substr(included, 1, index(included, "/") - 1) in ours) {
        graph[file] = graph[file] " proxy/" included
    }
    split(file, parts, "/")
    if (parts[3] == "") { from = parts[2]; sub(/\.[^.]*$/, "", from) } else { from = parts[2] }
    if (!(from in row)) {
        if (!(from in unlisted)) { fail(file ": module " from " has no row in the Dependencies table of " table) }
        unlisted[from] = 1
        next
    }
    match(text, /"[^"]*"/)
    target = substr(text, RSTART + 1, RLENGTH - 2)
    if (index(target, "/") == 0) { next }                 # a sibling header: same module
    to = substr(target, 1, index(target, "/") - 1)
    if (to == from || !(to in ours)) { next }
    if ((from, to) in allowed) { next }
    if ((file, to) in known) { known[file, to]++; next }
    fail(file ":" lineno ": forbidden include " from " -> " to " (\"" target "\"); allowed for " from ": " (row[from] == "" ? "nothing" : row[from]))
}
END {
    for (i = 1; i <= known_count; i++) {
        split(known_order[i], k, SUBSEP)
        if (known[k[1], k[2]] == 0) {
            fail(known_file ": " k[1] " no longer includes " k[2] " (or the table now allows it): delete this entry")
        }
    }
    if (!failed) { check_reach() }
    exit failed
}
'
