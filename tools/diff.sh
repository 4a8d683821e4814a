#!/usr/bin/env bash
# make diff A=04 B=05: what stage B changed in kernel.cu relative to stage A (A and B as 4 or 04).
set -u
cd "$(dirname "$0")/.."
[ -n "${1:-}" ] && [ -n "${2:-}" ] || { echo "usage: make diff A=04 B=05" >&2; exit 2; }
stage_dir() {  # stage_dir 4 -> kernel04_cp_async, or nothing
    local nn
    nn=$(echo "$1" | awk '/^[0-9]+$/ { printf "%02d", $1 + 0 }')
    [ -n "$nn" ] && ls -d "kernel${nn}"_*/ 2>/dev/null | head -n 1 | sed 's:/$::'
}
a=$(stage_dir "$1") b=$(stage_dir "$2")
[ -n "$a" ] || { echo "make diff: no stage $1" >&2; exit 2; }
[ -n "$b" ] || { echo "make diff: no stage $2" >&2; exit 2; }
if command -v git >/dev/null 2>&1; then
    git --no-pager diff --no-index --color=auto --stat "$a/kernel.cu" "$b/kernel.cu"
    git --no-pager diff --no-index --color=auto "$a/kernel.cu" "$b/kernel.cu"
else
    diff -u "$a/kernel.cu" "$b/kernel.cu"
fi
[ $? -le 1 ]
