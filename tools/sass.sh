#!/usr/bin/env bash
# make sass K=05 / make sass-table: what the compiler made of each stage.
#   tools/sass.sh one NN          ptxas registers/smem/spills, PTX and SASS instruction histograms
#   tools/sass.sh table NN NN...  the same numbers for several stages, side by side
# Needs the stage objects (build/kernelNN.o, build/kernelNN.ptxas.txt) and the PTX of
# build/tools/kernelNN.ptx, which make builds first. SASS needs cuobjdump (part of the CUDA toolkit).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
need_make_env

# The static instruction histograms: PTX opcodes (prefix match on dot boundaries, so ldmatrix
# counts ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16) and SASS opcodes (LDS does not count LDSM,
# MUFU.EX2 does not count MUFU.RCP).
SASS_OPS=${SASS_OPS:-"HMMA LDSM LDGSTS LDS STS LDG STG BAR MUFU.EX2 FFMA FMUL FADD LDL STL"}
PTX_OPS=${PTX_OPS:-"mma.sync ldmatrix cp.async ld.shared st.shared ld.global st.global bar.sync ex2.approx fma.rn.f32 fma.rm.f32 shfl.sync"}

# op_counts KIND FILE OPS...: static count of each opcode (PTX or SASS) in FILE, one per line.
op_counts() {
    local kind=$1 file=$2; shift 2
    awk -v kind="$kind" -v ops="$*" '
        BEGIN { n = split(ops, want, " ") }
        kind == "sass" {
            if ($0 !~ /\/\*[0-9a-f]+\*\/[ \t]/) next
            sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/, "")
        }
        kind == "ptx" {
            sub(/^[ \t]+/, "")
            if ($0 ~ /^([.$\/{}]|$)/) next
        }
        {
            op = ($1 ~ /^@/) ? $2 : $1
            sub(/;$/, "", op)
            for (i = 1; i <= n; i++)
                if (op == want[i] || index(op, want[i] ".") == 1) count[i]++
        }
        END { for (i = 1; i <= n; i++) printf "%s %d\n", want[i], count[i] + 0 }' "$file"
}

stage_field() {  # stage_field NN FIELD(2: dir, 3: arch)
    local entry
    for entry in $STAGE_TABLE; do [ "${entry%%:*}" = "$1" ] && echo "$entry" | cut -d: -f"$2"; done
}

# sass_file NN: build/tools/kernelNN.sass (sm_90 for the sm_80 stages, the stage's own arch for an
# sm_XXa stage), or nothing without cuobjdump.
sass_file() {
    local obj=$BUILD/kernel$1.o out=$BUILD/tools/kernel$1.sass arch
    command -v cuobjdump >/dev/null 2>&1 || return 1
    arch=$(stage_field "$1" 3)
    case $arch in *a) ;; *) arch=sm_90 ;; esac
    cuobjdump -sass -arch "$arch" "$obj" >"$out" 2>/dev/null || return 1
    echo "$arch" >"$out.arch"
}

# ptxas_table INFO: one line per (arch, kernel) from ptxas -v output.
ptxas_table() {
    printf '  %-7s %-38s %5s %7s %6s %6s %6s\n' arch kernel regs smem_B stack spillS spillL
    awk '
        /Compiling entry function/ { k = $0; sub(/.*function .\047?/, "", k); sub(/\047 for .*/, "", k)
                                     a = $0; sub(/.*for \047/, "", a); sub(/\047.*/, "", a) }
        /bytes stack frame/ { st = $1; ss = $5; sl = $9 }
        /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r)
                                  sm = 0; if ($0 ~ /bytes smem/) { sm = $0; sub(/ bytes smem.*/, "", sm); sub(/.*, /, "", sm) }
                                  print a, k, r, sm, st, ss, sl }' "$1" |
    while read -r a k r sm st ss sl; do
        k=$(echo "$k" | c++filt 2>/dev/null || echo "$k")
        k=${k#void }; k=${k%(flash_problem)}
        printf '  %-7s %-38s %5s %7s %6s %6s %6s\n' "$a" "$k" "$r" "$sm" "$st" "$ss" "$sl"
    done
}

sass_one() {
    local nn=$1 dir info=$BUILD/kernel$1.ptxas.txt
    dir=$(stage_field "$nn" 2)
    echo "== $dir: ptxas resource usage ($info; smem_B is static shared memory, dynamic not included)"
    ptxas_table "$info"
    echo
    echo "== $dir: PTX instruction histogram (static count over all kernels of the file, PTX for $(stage_field "$nn" 3))"
    op_counts ptx "$BUILD/tools/kernel$nn.ptx" $PTX_OPS | awk '{ printf "  %-14s %6d\n", $1, $2 }'
    echo
    if sass_file "$nn"; then
        echo "== $dir: SASS instruction histogram (static count, cuobjdump -sass -arch $(cat "$BUILD/tools/kernel$nn.sass.arch"))"
        op_counts sass "$BUILD/tools/kernel$nn.sass" $SASS_OPS | awk '{ printf "  %-14s %6d\n", $1, $2 }'
        echo "  (full listing: $BUILD/tools/kernel$nn.sass)"
    else
        echo "== $dir: SASS instruction histogram: SKIPPED: cuobjdump not found on this machine (it comes with"
        echo "   the CUDA toolkit); the ptxas and PTX parts above are complete."
    fi
}

# table KIND NNS OPS...: one row per op, one column per stage.
table() {
    local kind=$1 nns=$2; shift 2
    local nn f i=0 op
    printf '  %-16s' ""; for nn in $nns; do printf '%9s' "k$nn"; done; echo
    for nn in $nns; do
        if [ "$kind" = ptx ]; then f=$BUILD/tools/kernel$nn.ptx; else f=$BUILD/tools/kernel$nn.sass; fi
        op_counts "$kind" "$f" "$@" | awk '{ print $2 }' >"$BUILD/tools/.col$nn"
    done
    for op in "$@"; do
        i=$((i + 1))
        printf '  %-16s' "$op"
        for nn in $nns; do printf '%9s' "$(sed -n "${i}p" "$BUILD/tools/.col$nn")"; done
        echo
    done
    rm -f "$BUILD"/tools/.col*
}

sass_table() {
    local nns="$*" nn
    row() { printf '  %-16s' "$1"; shift; for v in "$@"; do printf '%9s' "$v"; done; echo; }
    echo "== ptxas (max over the kernels of each stage's object, every arch it is built for; smem is static"
    echo "   smem: a stage that sizes its tiles with dynamic shared memory, like 08, shows 0 here)"
    printf '  %-16s' ""; for nn in $nns; do printf '%9s' "k$nn"; done; echo
    local regs=() smem=() spill=()
    for nn in $nns; do
        local info=$BUILD/kernel$nn.ptxas.txt
        regs+=("$(grep -o 'Used [0-9]* registers' "$info" | awk '{ if ($2 > m) m = $2 } END { print m + 0 }')")
        smem+=("$(grep -o '[0-9]* bytes smem' "$info" | awk '{ if ($1 > m) m = $1 } END { print m + 0 }')")
        spill+=("$(grep -E 'bytes spill' "$info" | awk '{ s += $5 + $9 } END { print s + 0 }')")
    done
    row "registers" "${regs[@]}"; row "smem bytes" "${smem[@]}"; row "spill bytes" "${spill[@]}"
    echo
    echo "== PTX instruction histogram (static counts, PTX for each stage's own architecture)"
    table ptx "$nns" $PTX_OPS
    echo
    local have=1
    for nn in $nns; do sass_file "$nn" || { have=0; break; }; done
    if [ "$have" = 1 ]; then
        echo "== SASS instruction histogram (static counts, cuobjdump -sass)"
        table sass "$nns" $SASS_OPS
    else
        echo "== SASS instruction histogram: SKIPPED: cuobjdump not found on this machine (run make sass-table"
        echo "   with the CUDA toolkit); the ptxas and PTX tables above are complete."
    fi
}

mkdir -p "$BUILD/tools"
cmd=${1:-}; shift || true
case $cmd in
one)   sass_one "$1" ;;
table) sass_table "$@" ;;
*)     echo "usage: tools/sass.sh one NN | table NN..." >&2; exit 2 ;;
esac
