# Classroom and inspection tools (issue 6): diff, sass, sass-table, profile, sanitize, grade.
# Included at the end of the Makefile; uses its NVCC, ARCH, BUILD, NVFLAGS, HARNESS_OBJ, API_OBJ,
# LDLIBS, STAGE_DIR and EXISTING. `make help-tools` lists the targets.

# K=5 and K=05 both name stage 05; tools_nn turns 1..8 into 01..08.
tools_nn = $(if $(filter 1 2 3 4 5 6 7 8,$(1)),0$(1),$(1))
TOOLS_K := $(call tools_nn,$(K))
TOOLS_PREV_02 := 01
TOOLS_PREV_03 := 02
TOOLS_PREV_04 := 03
TOOLS_PREV_05 := 04
TOOLS_PREV_06 := 05
TOOLS_PREV_07 := 06
TOOLS_PREV_08 := 07
TOOLS_PREV := $(TOOLS_PREV_$(TOOLS_K))

# The static instruction histograms of `make sass`: PTX opcodes (prefix match on dot boundaries,
# so ldmatrix counts ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16) and SASS opcodes (LDS does
# not count LDSM, MUFU.EX2 does not count MUFU.RCP).
SASS_OPS ?= HMMA LDSM LDGSTS LDS STS LDG STG BAR MUFU.EX2 FFMA LDL STL
PTX_OPS  ?= mma.sync ldmatrix cp.async ld.shared st.shared ld.global st.global bar.sync ex2.approx \
            fma.rn.f32 fma.rm.f32 shfl.sync
# cuobjdump -sass picks this arch from the fat object when it holds it, else the first one.
SASS_ARCH ?= sm_90

PROFILE_METRICS ?= smsp__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,$\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,$\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,$\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,$\
sm__warps_active.avg.pct_of_peak_sustained_active,$\
dram__throughput.avg.pct_of_peak_sustained_elapsed
# Extra problem flags for `make profile`, e.g. PROFILE_ARGS="--causal 1 --head-dim 64".
PROFILE_ARGS ?=
SANITIZE_TOOLS ?= memcheck racecheck synccheck initcheck

.PHONY: help-tools

help-tools:
	@echo "Classroom and inspection tools"
	@echo "  make diff A=04 B=05      what stage B changed in kernel.cu, relative to stage A"
	@echo "  make sass K=05           stage 05: ptxas registers/smem/spills, PTX and SASS instruction histograms"
	@echo "  make sass-table          the same numbers for every stage, side by side"
	@echo "  make profile K=05        ncu on the headline problem: tensor pipe, smem bank conflicts, occupancy, DRAM"
	@echo "                           (PROFILE_ARGS=\"--causal 1\" changes the problem; needs ncu and a GPU)"
	@echo "  make sanitize            compute-sanitizer memcheck, racecheck, synccheck, initcheck on every stage"
	@echo "  make grade K=05 SRC=f.cu grade a student's stage 05 (docs/assignments.md): build, instruction checks,"
	@echo "                           correctness matrix, racecheck, faster than stage 04; PASS or FAIL"

# -- make diff A=04 B=05 ----------------------------------------------------------------------
diff:
	@test -n "$(A)" && test -n "$(B)" || { echo "usage: make diff A=04 B=05" >&2; exit 2; }
	@a='$(call STAGE_DIR,$(call tools_nn,$(A)))'; b='$(call STAGE_DIR,$(call tools_nn,$(B)))'; \
	 test -n "$$a" || { echo "make diff: no stage $(A) (kernel$(call tools_nn,$(A))_*/)" >&2; exit 2; }; \
	 test -n "$$b" || { echo "make diff: no stage $(B) (kernel$(call tools_nn,$(B))_*/)" >&2; exit 2; }; \
	 if command -v git >/dev/null 2>&1; then \
	     git --no-pager diff --no-index --color=auto --stat "$$a/kernel.cu" "$$b/kernel.cu"; \
	     git --no-pager diff --no-index --color=auto "$$a/kernel.cu" "$$b/kernel.cu"; \
	 else diff -u "$$a/kernel.cu" "$$b/kernel.cu"; fi; \
	 test $$? -le 1

# -- make sass K=05, make sass-table ----------------------------------------------------------
# PTX for the histogram: the instruction checks' recipe (compute_80), kept under build/tools/.
$(foreach s,$(EXISTING),$(eval $(BUILD)/tools/kernel$(s).ptx: $(call STAGE_DIR,$(s))/kernel.cu $(HEADERS) ; \
	@mkdir -p $(BUILD)/tools && $(NVCC) -std=c++17 -Icommon -arch=compute_80 -ptx $$< -o $$@))

define TOOLS_SASS_TEXT
set -u
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

# sass_file NN: build/tools/kernelNN.sass from the build object, or nothing without cuobjdump.
sass_file() {
    local obj=$BUILD/kernel$1.o out=$BUILD/tools/kernel$1.sass arch
    command -v cuobjdump >/dev/null 2>&1 || return 1
    arch=$(cuobjdump --list-elf "$obj" 2>/dev/null | grep -o 'sm_[0-9a-z]*' | sort -u | grep -x "$SASS_ARCH" ||
           cuobjdump --list-elf "$obj" 2>/dev/null | grep -o 'sm_[0-9a-z]*' | head -1)
    [ -n "$arch" ] || return 1
    cuobjdump -sass -arch "$arch" "$obj" >"$out" 2>/dev/null || return 1
    echo "$arch" >"$out.arch"
}

# ptxas_table INFO: one line per (arch, kernel) from ptxas -v output.
ptxas_table() {
    printf '  %-6s %-38s %5s %7s %6s %6s %6s\n' arch kernel regs smem_B stack spillS spillL
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
        printf '  %-6s %-38s %5s %7s %6s %6s %6s\n' "$a" "$k" "$r" "$sm" "$st" "$ss" "$sl"
    done
}

sass_one() {
    local nn=$1 dir=$2 info=$BUILD/kernel$1.ptxas.txt
    echo "== $dir: ptxas resource usage ($info; smem_B is static shared memory, dynamic not included)"
    ptxas_table "$info"
    echo
    echo "== $dir: PTX instruction histogram (static count over all kernels of the file, nvcc -arch=compute_80 -ptx)"
    op_counts ptx "$BUILD/tools/kernel$nn.ptx" $PTX_OPS | awk '{ printf "  %-14s %6d\n", $1, $2 }'
    echo
    if sass_file "$nn"; then
        echo "== $dir: SASS instruction histogram (static count, cuobjdump -sass -arch $(cat "$BUILD/tools/kernel$nn.sass.arch"))"
        op_counts sass "$BUILD/tools/kernel$nn.sass" $SASS_OPS | awk '{ printf "  %-14s %6d\n", $1, $2 }'
        echo "  (full listing: $BUILD/tools/kernel$nn.sass)"
    else
        echo "== $dir: SASS instruction histogram: SKIPPED: cuobjdump not found on this machine (it comes with"
        echo "   the CUDA toolkit on the GPU machine); the ptxas and PTX parts above are complete."
    fi
}

sass_table() {
    local nn hdr=""
    for nn in $STAGES_LIST; do hdr="$hdr $(printf '%8s' "k$nn")"; done
    row() { printf '  %-16s' "$1"; shift; for v in "$@"; do printf '%9s' "$v"; done; echo; }
    echo "== ptxas (max over the kernels of each stage's object, every arch in ARCH; smem is static smem:"
    echo "   a stage that sizes its tiles with dynamic shared memory, like 08, shows 0 here)"
    printf '  %-16s%s\n' "" "$hdr"
    local regs=() smem=() spill=()
    for nn in $STAGES_LIST; do
        local info=$BUILD/kernel$nn.ptxas.txt
        regs+=("$(grep -o 'Used [0-9]* registers' "$info" | awk '{ if ($2 > m) m = $2 } END { print m + 0 }')")
        smem+=("$(grep -o '[0-9]* bytes smem' "$info" | awk '{ if ($1 > m) m = $1 } END { print m + 0 }')")
        spill+=("$(grep -E 'bytes spill' "$info" | awk '{ s += $5 + $9 } END { print s + 0 }')")
    done
    row "registers" "${regs[@]}"; row "smem bytes" "${smem[@]}"; row "spill bytes" "${spill[@]}"
    echo
    echo "== PTX instruction histogram (static counts, nvcc -arch=compute_80 -ptx)"
    table ptx $PTX_OPS
    echo
    local have=1
    for nn in $STAGES_LIST; do sass_file "$nn" || { have=0; break; }; done
    if [ "$have" = 1 ]; then
        echo "== SASS instruction histogram (static counts, cuobjdump -sass)"
        table sass $SASS_OPS
    else
        echo "== SASS instruction histogram: SKIPPED: cuobjdump not found on this machine (run make sass-table"
        echo "   on the GPU machine); the ptxas and PTX tables above are complete."
    fi
}

# table KIND OPS...: one row per op, one column per stage.
table() {
    local kind=$1; shift
    local nn f
    printf '  %-16s' ""; for nn in $STAGES_LIST; do printf '%9s' "k$nn"; done; echo
    for nn in $STAGES_LIST; do
        if [ "$kind" = ptx ]; then f=$BUILD/tools/kernel$nn.ptx; else f=$BUILD/tools/kernel$nn.sass; fi
        op_counts "$kind" "$f" "$@" | awk '{ print $2 }' >"$BUILD/tools/.col$nn"
    done
    local i=0 op
    for op in "$@"; do
        i=$((i + 1))
        printf '  %-16s' "$op"
        for nn in $STAGES_LIST; do printf '%9s' "$(sed -n "${i}p" "$BUILD/tools/.col$nn")"; done
        echo
    done
    rm -f "$BUILD"/tools/.col*
}

cmd=$1; shift
case $cmd in
sass)       sass_one "$@" ;;
sass-table) sass_table ;;
esac
endef

sass sass-table: export TOOLS_SASS_SH := $(value TOOLS_SASS_TEXT)
sass sass-table: export BUILD := $(BUILD)
sass sass-table: export SASS_OPS := $(SASS_OPS)
sass sass-table: export PTX_OPS := $(PTX_OPS)
sass sass-table: export SASS_ARCH := $(SASS_ARCH)
sass-table: export STAGES_LIST := $(EXISTING)

sass: $(if $(call STAGE_DIR,$(TOOLS_K)),$(BUILD)/kernel$(TOOLS_K).o $(BUILD)/tools/kernel$(TOOLS_K).ptx)
	@test -n '$(call STAGE_DIR,$(TOOLS_K))' || { echo "usage: make sass K=05 (K names an existing stage: $(EXISTING))" >&2; exit 2; }
	@bash -c "$$TOOLS_SASS_SH" sass sass $(TOOLS_K) $(call STAGE_DIR,$(TOOLS_K))

sass-table: $(foreach s,$(EXISTING),$(BUILD)/kernel$(s).o $(BUILD)/tools/kernel$(s).ptx)
	@bash -c "$$TOOLS_SASS_SH" sass-table sass-table

# -- make profile K=05 ------------------------------------------------------------------------
profile: $(BUILD)/allstages
	@test -n '$(call STAGE_DIR,$(TOOLS_K))' || { echo "usage: make profile K=05 [PROFILE_ARGS=...] (K: one of $(EXISTING))" >&2; exit 2; }
	@command -v ncu >/dev/null 2>&1 || { echo "make profile: SKIPPED: ncu (Nsight Compute) not found on this machine;" \
	    "it ships with the CUDA toolkit on the GPU machine (PATH=/usr/local/cuda/bin:\$$PATH)." >&2; exit 1; }
	@$(BUILD)/allstages --gpu-slug >/dev/null 2>&1 || { echo "make profile: SKIPPED: no CUDA device answers here" \
	    "($(BUILD)/allstages --gpu-slug failed); run it on the GPU machine." >&2; exit 1; }
	@echo "ncu: stage $(TOOLS_K), the 4th launch of flash_fwd_kernel (3 warm-up launches skipped), clocks left alone"
	ncu --clock-control none --kernel-name regex:flash_fwd_kernel --launch-skip 3 --launch-count 1 \
	    --metrics $(PROFILE_METRICS) \
	    $(BUILD)/allstages --stage $(patsubst 0%,%,$(TOOLS_K)) --no-check --warmup 3 --iters 1 $(PROFILE_ARGS)
	@echo "Reading it: tensor_op_hmma pct = how busy the tensor pipe was; bank_conflicts ld/st = extra shared-memory"
	@echo "wavefronts (compare with wavefronts_mem_shared_op_ld: 0 conflicts is the goal of stage 05);"
	@echo "warps_active pct = achieved occupancy; dram__throughput pct = how close to the HBM bandwidth limit."

# -- make sanitize ----------------------------------------------------------------------------
sanitize: $(BUILD)/allstages
	@command -v compute-sanitizer >/dev/null 2>&1 || { echo "make sanitize: SKIPPED: compute-sanitizer not found on this machine" >&2; exit 1; }
	@$(BUILD)/allstages --gpu-slug >/dev/null 2>&1 || { echo "make sanitize: SKIPPED: no CUDA device answers here; run it on the GPU machine" >&2; exit 1; }
	@SANITIZER_TOOLS="$(SANITIZE_TOOLS)" bash tests/test_sanitizer.sh $(BUILD)/allstages | tee $(BUILD)/sanitize.log
	@echo "$$(grep -c '^PASS' $(BUILD)/sanitize.log) passed, $$(grep -c '^FAIL' $(BUILD)/sanitize.log) failed (log: $(BUILD)/sanitize.log)"
	@! grep -q '^FAIL' $(BUILD)/sanitize.log

# -- make grade K=05 SRC=student.cu -----------------------------------------------------------
# Builds SRC in place of stage K under build/grade/ (never touching the stage itself), links it
# with the real previous stage for the timing comparison, and runs tests/grade.sh.
grade: $(HARNESS_OBJ) $(API_OBJ) $(if $(TOOLS_PREV),$(if $(call STAGE_DIR,$(TOOLS_PREV)),$(BUILD)/kernel$(TOOLS_PREV).o))
	@test -n '$(filter 01 02 03 04 05 06 07 08,$(TOOLS_K))' && test -n '$(SRC)' || \
	    { echo "usage: make grade K=05 SRC=path/to/kernel.cu (K: 01..08; see docs/assignments.md)" >&2; exit 2; }
	@NVCC='$(NVCC)' ARCH='$(ARCH)' NVFLAGS='$(NVFLAGS)' LDLIBS='$(LDLIBS)' BUILD='$(BUILD)' \
	 LINK_OBJS='$(HARNESS_OBJ) $(API_OBJ)' PREV_OBJ='$(if $(TOOLS_PREV),$(BUILD)/kernel$(TOOLS_PREV).o)' \
	 bash tests/grade.sh $(TOOLS_K) '$(SRC)'
