# Shared definition of "stage NN must have / must not have": sourced by tests/test_instructions.sh
# (every stage of the tree) and tools/grade.sh (one student's file in place of a stage), so that
# the instruction checks and the grader can never disagree. A new stage adds its case here; a stage
# without one fails its instruction checks.
#
#   stage_ptx_checks  NN LABEL PTX    the technique's PTX instructions (PTX for the stage's own arch)
#   stage_sass_checks NN LABEL SASS   the same in SASS (cuobjdump -sass), where cuobjdump exists
#   stage_spill_check LABEL INFO      ptxas -v output INFO: no spill, no stack frame
#   stage_async_check LABEL INFO      ptxas -v output INFO: no wgmma serialised or wait injected
#                                     (C7510-C7519), no setmaxnreg ignored (C7508)
#
# Each check reports through ok LABEL / bad LABEL WHY, which the caller defines (tests/lib.sh).

has()  { grep -qE -- "$2" "$1"; }
# want LABEL FILE DESCRIPTION REGEX: the instruction must be there
want()   { if has "$2" "$4"; then ok "$1 has $3"; else bad "$1 has $3" "no match for /$4/ in $2"; fi; }
# unwanted LABEL FILE DESCRIPTION REGEX: the instruction must not be there yet
unwanted() { if has "$2" "$4"; then bad "$1 has no $3" "found /$4/ in $2"; else ok "$1 has no $3"; fi; }

MMA='mma\.sync\.aligned\.m16n8k16'
LDSM='ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16'
LDSM_T='ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16'
CPASYNC='cp\.async\.cg\.shared\.global'
WGMMA_SS='wgmma\.mma_async\.sync\.aligned\.m64n[0-9]+k16\.f32\.(bf16|f16)\.(bf16|f16) +\{[^}]*\}, +%rd'
WGMMA_RS='wgmma\.mma_async\.sync\.aligned\.m64n[0-9]+k16\.f32\.(bf16|f16)\.(bf16|f16) +\{[^}]*\}, +\{'
TMA_LOAD='cp\.async\.bulk\.tensor\.[0-9]d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes'

# stage_ptx_checks NN LABEL PTX
stage_ptx_checks() {
    local nn=$1 dir=$2 ptx=$3
    case $nn in
    01) unwanted "$dir" "$ptx" "tensor-core mma" "$MMA|wmma"
        unwanted "$dir" "$ptx" "ldmatrix" "ldmatrix"
        unwanted "$dir" "$ptx" "cp.async" "cp\.async" ;;
    02) want "$dir" "$ptx" "mma.sync m16n8k16" "$MMA"
        unwanted "$dir" "$ptx" "ldmatrix" "ldmatrix"
        unwanted "$dir" "$ptx" "cp.async" "cp\.async" ;;
    03) want "$dir" "$ptx" "mma.sync m16n8k16" "$MMA"
        want "$dir" "$ptx" "ldmatrix.x4" "$LDSM"
        want "$dir" "$ptx" "ldmatrix.x4.trans" "$LDSM_T"
        unwanted "$dir" "$ptx" "cp.async" "cp\.async" ;;
    04) want "$dir" "$ptx" "cp.async.cg 16 B" "$CPASYNC.*16"
        want "$dir" "$ptx" "cp.async.wait_group" "cp\.async\.wait_group"
        want "$dir" "$ptx" "16-byte vector global stores" "st\.global\.v4"
        unwanted "$dir" "$ptx" "swizzle xor" "xor\.b32" ;;
    05) want "$dir" "$ptx" "swizzle xor" "xor\.b32"
        want "$dir" "$ptx" "cp.async.cg 16 B" "$CPASYNC"
        unwanted "$dir" "$ptx" "split wait (wait_group 1)" "cp\.async\.wait_group 1;" ;;
    06) want "$dir" "$ptx" "split wait (wait_group 1)" "cp\.async\.wait_group 1;"
        want "$dir" "$ptx" "expf range reduction (textbook softmax)" "fma\.rm\.f32" ;;
    07) want "$dir" "$ptx" "ex2.approx" "ex2\.approx"
        unwanted "$dir" "$ptx" "expf range reduction" "fma\.rm\.f32" ;;
    08) want "$dir" "$ptx" "dynamic shared memory" "\.extern \.shared"
        want "$dir" "$ptx" "ex2.approx" "ex2\.approx"
        unwanted "$dir" "$ptx" "expf range reduction" "fma\.rm\.f32" ;;
    09) want "$dir" "$ptx" "wgmma from two descriptors (S = Q K^T)" "$WGMMA_SS"
        want "$dir" "$ptx" "wgmma with A in registers (O += P V)" "$WGMMA_RS"
        want "$dir" "$ptx" "wgmma.wait_group" "wgmma\.wait_group"
        want "$dir" "$ptx" "fence.proxy.async (cp.async data to wgmma)" "fence\.proxy\.async"
        want "$dir" "$ptx" "cp.async.cg" "$CPASYNC"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync"
        unwanted "$dir" "$ptx" "ldmatrix" "ldmatrix"
        unwanted "$dir" "$ptx" "TMA" "cp\.async\.bulk" ;;
    10) want "$dir" "$ptx" "TMA tensor loads" "$TMA_LOAD"
        want "$dir" "$ptx" "mbarrier expect-tx" "mbarrier\.arrive\.expect_tx"
        want "$dir" "$ptx" "mbarrier parity wait" "mbarrier\.try_wait\.parity"
        want "$dir" "$ptx" "TMA store of O" "cp\.async\.bulk\.tensor\.[0-9]d\.global\.shared::cta"
        want "$dir" "$ptx" "wgmma from two descriptors (S = Q K^T)" "$WGMMA_SS"
        want "$dir" "$ptx" "wgmma with A in registers (O += P V)" "$WGMMA_RS"
        unwanted "$dir" "$ptx" "cp.async (non-bulk)" "$CPASYNC"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    11) want "$dir" "$ptx" "setmaxnreg (producer down)" "setmaxnreg\.dec\.sync\.aligned\.u32"
        want "$dir" "$ptx" "setmaxnreg (consumers up)" "setmaxnreg\.inc\.sync\.aligned\.u32"
        want "$dir" "$ptx" "TMA tensor loads" "$TMA_LOAD"
        want "$dir" "$ptx" "empty-slot arrivals" "mbarrier\.arrive\.release"
        want "$dir" "$ptx" "mbarrier parity wait" "mbarrier\.try_wait\.parity"
        want "$dir" "$ptx" "wgmma from two descriptors (S = Q K^T)" "$WGMMA_SS"
        want "$dir" "$ptx" "wgmma with A in registers (O += P V)" "$WGMMA_RS"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    12) want "$dir" "$ptx" "named barrier wait (a turn on the tensor cores)" "bar\.sync"
        want "$dir" "$ptx" "named barrier arrival (the turn handed over)" "bar\.arrive"
        want "$dir" "$ptx" "setmaxnreg" "setmaxnreg\.inc\.sync\.aligned\.u32"
        want "$dir" "$ptx" "wgmma.wait_group 1 (S done, P V running)" "wgmma\.wait_group\.sync\.aligned 1"
        want "$dir" "$ptx" "wgmma with A in registers (O += P V)" "$WGMMA_RS"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    13) unwanted "$dir" "$ptx" "blockIdx.y (a persistent block takes tile numbers, not a grid position)" "%ctaid\.y"
        unwanted "$dir" "$ptx" "a global tile counter (stage 15)" "atom\.global\.add"
        unwanted "$dir" "$ptx" "TMA multicast (stage 14)" "multicast::cluster"
        want "$dir" "$ptx" "named barrier wait (a turn on the tensor cores)" "bar\.sync"
        want "$dir" "$ptx" "named barrier arrival (the turn handed over)" "bar\.arrive"
        want "$dir" "$ptx" "setmaxnreg" "setmaxnreg\.inc\.sync\.aligned\.u32"
        want "$dir" "$ptx" "wgmma.wait_group 1 (S done, P V running)" "wgmma\.wait_group\.sync\.aligned 1"
        want "$dir" "$ptx" "wgmma with A in registers (O += P V)" "$WGMMA_RS"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    14) want "$dir" "$ptx" "TMA multicast loads (.multicast::cluster)" "cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes\.multicast::cluster"
        want "$dir" "$ptx" "arrivals on another block's mbarrier (mapa, shared::cluster)" "mbarrier\.arrive\.shared::cluster\.b64"
        want "$dir" "$ptx" "mapa (the partner's barrier address)" "mapa\.shared::cluster"
        want "$dir" "$ptx" "cluster barrier" "barrier\.cluster\.wait"
        unwanted "$dir" "$ptx" "a global tile counter (stage 15)" "atom\.global\.add"
        want "$dir" "$ptx" "wgmma.wait_group 1 (S done, P V running)" "wgmma\.wait_group\.sync\.aligned 1"
        want "$dir" "$ptx" "wgmma with A in registers (O += P V)" "$WGMMA_RS"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    15) want "$dir" "$ptx" "a global tile counter (the causal grid's scheduler)" "atom\.global\.add"
        want "$dir" "$ptx" "three consumer warpgroups at 160 registers (setmaxnreg.inc 160)" "setmaxnreg\.inc\.sync\.aligned\.u32 160"
        want "$dir" "$ptx" "TMA multicast loads (stage 14's clusters)" "cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes\.multicast::cluster"
        want "$dir" "$ptx" "wgmma.wait_group 1 (S done, P V running)" "wgmma\.wait_group\.sync\.aligned 1"
        unwanted "$dir" "$ptx" "e4m3 wgmma (stage 16)" "k32\.f32\.e4m3"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    16) want "$dir" "$ptx" "e4m3 wgmma, k32 (S = Q K^T and O += P V in fp8)" "wgmma\.mma_async\.sync\.aligned\.m64n[0-9]+k32\.f32\.e4m3\.e4m3"
        want "$dir" "$ptx" "P rounded to e4m3 (cvt e4m3x2)" "cvt\.rn\.satfinite\.e4m3x2\.f32"
        want "$dir" "$ptx" "V transposed through ldmatrix.trans" "$LDSM_T"
        want "$dir" "$ptx" "TMA multicast loads (the bf16 path of stage 15)" "cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes\.multicast::cluster"
        want "$dir" "$ptx" "wgmma.wait_group 1 (S done, P V running)" "wgmma\.wait_group\.sync\.aligned 1"
        unwanted "$dir" "$ptx" "mma.sync" "mma\.sync" ;;
    *)  bad "$dir instruction checks" "tests/stage_checks.sh has no case for stage $nn: say what its PTX must hold" ;;
    esac
    case $nn in 04|05|06|07|08) want "$dir" "$ptx" "mma.sync m16n8k16" "$MMA" ;; esac
    case $nn in 05|06|07|08) want "$dir" "$ptx" "ldmatrix.x4.trans" "$LDSM_T"; want "$dir" "$ptx" "cp.async.cg" "$CPASYNC" ;; esac
}

# stage_sass_checks NN LABEL SASS
stage_sass_checks() {
    local nn=$1 label=$2 sass=$3
    case $nn in
    01) unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    02) want "$label" "$sass" "HMMA.16816" "HMMA\.16816"; unwanted "$label" "$sass" "LDSM" "LDSM" ;;
    03) want "$label" "$sass" "LDSM" "LDSM"; want "$label" "$sass" "LDSM.16.MT88" "LDSM\.16\.MT88"; unwanted "$label" "$sass" "LDGSTS" "LDGSTS" ;;
    04|05|06) want "$label" "$sass" "LDGSTS" "LDGSTS" ;;
    07|08) want "$label" "$sass" "MUFU.EX2" "MUFU\.EX2"; want "$label" "$sass" "LDGSTS" "LDGSTS" ;;
    09) want "$label" "$sass" "HGMMA" "HGMMA"; unwanted "$label" "$sass" "HMMA" "HMMA"; want "$label" "$sass" "LDGSTS" "LDGSTS" ;;
    10) want "$label" "$sass" "HGMMA" "HGMMA"; unwanted "$label" "$sass" "HMMA" "HMMA"
        want "$label" "$sass" "UTMALDG" "UTMALDG"; want "$label" "$sass" "UTMASTG" "UTMASTG"; want "$label" "$sass" "SYNCS" "SYNCS"; unwanted "$label" "$sass" "LDGSTS" "LDGSTS" ;;
    11) want "$label" "$sass" "USETMAXREG" "USETMAXREG"; want "$label" "$sass" "UTMALDG" "UTMALDG"
        want "$label" "$sass" "HGMMA" "HGMMA"; want "$label" "$sass" "SYNCS" "SYNCS"; unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    12) want "$label" "$sass" "USETMAXREG" "USETMAXREG"; want "$label" "$sass" "HGMMA" "HGMMA"
        want "$label" "$sass" "BAR.ARV" "BAR\.ARV"; want "$label" "$sass" "BAR.SYNC" "BAR\.SYNC"; unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    13) want "$label" "$sass" "USETMAXREG" "USETMAXREG"; want "$label" "$sass" "HGMMA" "HGMMA"; want "$label" "$sass" "UTMASTG" "UTMASTG"
        want "$label" "$sass" "BAR.ARV" "BAR\.ARV"; want "$label" "$sass" "BAR.SYNC" "BAR\.SYNC"; unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    14) want "$label" "$sass" "UTMALDG.MULTICAST" "UTMALDG.*MULTICAST"; want "$label" "$sass" "USETMAXREG" "USETMAXREG"
        want "$label" "$sass" "HGMMA" "HGMMA"; want "$label" "$sass" "SYNCS" "SYNCS"
        want "$label" "$sass" "UCGABAR (the cluster barrier)" "UCGABAR"; unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    15) want "$label" "$sass" "USETMAXREG.TRY_ALLOC 0xa0 = 160 (three consumers)" "USETMAXREG\.TRY_ALLOC\.CTAPOOL .*0xa0"
        want "$label" "$sass" "a global atomic (ATOMG)" "ATOMG|RED\."; want "$label" "$sass" "UTMALDG.MULTICAST" "UTMALDG.*MULTICAST"
        want "$label" "$sass" "HGMMA" "HGMMA"; want "$label" "$sass" "BAR.ARV" "BAR\.ARV"; unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    16) want "$label" "$sass" "QGMMA ... E4M3 (8-bit wgmma)" "QGMMA\.64x[0-9]+x32\.F32\.E4M3\.E4M3"
        want "$label" "$sass" "F2FP.SATFINITE.E4M3 (P to e4m3)" "F2FP\.SATFINITE\.E4M3"; want "$label" "$sass" "LDSM.16.MT88 (V's transpose)" "LDSM\.16\.MT88"
        want "$label" "$sass" "HGMMA (bf16, fp16)" "HGMMA"; want "$label" "$sass" "UTMALDG.MULTICAST" "UTMALDG.*MULTICAST"
        want "$label" "$sass" "USETMAXREG" "USETMAXREG"; want "$label" "$sass" "SYNCS" "SYNCS"; unwanted "$label" "$sass" "HMMA" "HMMA" ;;
    *)  bad "$label checks" "tests/stage_checks.sh has no SASS case for stage $nn" ;;
    esac
}

# stage_spill_check LABEL INFO: every kernel of the object, every arch: no spill, no stack frame.
stage_spill_check() {
    local label=$1 info=$2
    if [ ! -s "$info" ]; then
        bad "$label no spills" "$info missing (run make all first)"
    elif grep -E 'spill (stores|loads)|stack frame' "$info" | grep -qvE '^ *0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads'; then
        bad "$label no spills" "$(grep -E 'bytes (stack|spill)' "$info" | grep -v '^ *0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads' | head -2)"
    else
        ok "$label no spills ($(grep -c 'Compiling entry' "$info") kernels, $(grep -o 'Used [0-9]* registers' "$info" | sort -u | tr '\n' ' '))"
    fi
}

# stage_async_check LABEL INFO: ptxas reports, as "info" lines that a build does not show, when it
# serialises wgmma or injects a wait (C7510-C7519: an ordinary instruction touched an operand or
# accumulator register of an unfinished wgmma) and when it ignores setmaxnreg (C7508: no register
# cap at entry). Either silently undoes what a Hopper stage is about.
stage_async_check() {
    local label=$1 info=$2
    if [ ! -s "$info" ]; then
        bad "$label wgmma stays asynchronous" "$info missing (run make all first)"
    elif grep -qE 'C75(0[8]|1[0-9])' "$info"; then
        bad "$label wgmma stays asynchronous" "$(grep -E 'C75(0[8]|1[0-9])' "$info" | head -1 | cut -c1-200)"
    else
        ok "$label wgmma stays asynchronous (no C7508/C7510-C7519 from ptxas)"
    fi
}
