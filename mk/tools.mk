# Classroom and inspection tools: diff, sass, sass-table, profile, sanitize, grade, xu-pipe.
# Included at the end of the Makefile; the work is done by the scripts under tools/ (and
# tests/test_sanitizer.sh).

# K=5 and K=05 both name stage 05; K_PREV is the stage before it.
K_NN   := $(if $(K),$(shell echo '$(K)' | awk '/^[0-9]+$$/ { printf "%02d", $$1 + 0 }'))
K_DIR  := $(if $(K_NN),$(call STAGE_DIR,$(K_NN)))
K_PREV := $(lastword $(foreach s,$(STAGES),$(if $(K_NN),$(if $(shell test $(s) -lt $(K_NN) && echo y),$(s)))))

.PHONY: diff sass sass-table profile sanitize grade xu-pipe

diff:
	@bash tools/diff.sh '$(A)' '$(B)'

# PTX for the histograms, compiled for the stage's own architecture.
$(foreach s,$(STAGES),$(eval $(BUILD)/tools/kernel$(s).ptx: $(call STAGE_DIR,$(s))/kernel.cu $(COMMON_HEADERS) | have-nvcc ; \
	@mkdir -p $(BUILD)/tools && $(NVCC) -std=c++17 -Icommon -arch=compute_$(patsubst sm_%,%,$(call STAGE_ARCH,$(s))) -ptx $$< -o $$@))

# The ptxas and PTX parts need no cuobjdump, so they are printed whatever happens; the SASS part
# does, so without it the target fails afterwards, naming it (need_program, in the Makefile).
sass: $(if $(K_DIR),$(BUILD)/kernel$(K_NN).o $(BUILD)/tools/kernel$(K_NN).ptx)
	@test -n '$(K_DIR)' || { echo "usage: make sass K=05 (K names a stage: $(STAGES))" >&2; exit 2; }
	@bash tools/sass.sh one $(K_NN)
	$(call need_program,cuobjdump)

sass-table: $(STAGE_OBJ) $(foreach s,$(STAGES),$(BUILD)/tools/kernel$(s).ptx)
	@bash tools/sass.sh table $(STAGES)
	$(call need_program,cuobjdump)

# profile and sanitize look for their program and nvidia-smi's GPU before they build anything, and
# then ask whether the CUDA runtime can use that GPU (--gpu-slug says why not).
profile:
	@test -n '$(K_DIR)' || { echo "usage: make profile K=05 [PROFILE_ARGS=...] (K: one of $(STAGES))" >&2; exit 2; }
	$(call need_program,ncu,Nsight Compute)
	$(call need_gpu,it profiles a stage on the GPU)
	@$(MAKE) --no-print-directory $(BUILD)/allstages
	@bash tools/profile.sh $(K_NN) $(PROFILE_ARGS)

sanitize:
	$(call need_program,compute-sanitizer)
	$(call need_gpu,it runs every stage under compute-sanitizer on the GPU)
	@$(MAKE) --no-print-directory $(BUILD)/allstages
	@$(BUILD)/allstages --gpu-slug >/dev/null
	@SANITIZER_TOOLS="$${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}" bash tests/test_sanitizer.sh $(BUILD)/allstages \
	    | tee $(BUILD)/sanitize.log
	@echo "$$(grep -c '^PASS' $(BUILD)/sanitize.log) passed, $$(grep -c '^FAIL' $(BUILD)/sanitize.log) failed," \
	    "$$(grep -c '^SKIP' $(BUILD)/sanitize.log) skipped (log: $(BUILD)/sanitize.log)"
	@! grep -q '^FAIL' $(BUILD)/sanitize.log

# Builds SRC in place of stage K under build/grade/ (never touching the stage itself) and links it
# with the real previous stage, which it must beat (tools/grade.sh). STAGE_FP8 and PREV_FP8 are the
# stage table's fp8 column of both: a stage that takes e4m3 is graded in e4m3 too.
grade: $(HARNESS_OBJ) $(API_OBJ) $(if $(K_PREV),$(BUILD)/kernel$(K_PREV).o)
	@test -n '$(K_DIR)' && test -n '$(SRC)' || \
	    { echo "usage: make grade K=05 SRC=path/to/kernel.cu (K: a stage with an assignment; see docs/assignments.md)" >&2; exit 2; }
	@STAGE_GENCODE='$(call STAGE_GENCODE,$(K_NN))' PREV_NN='$(K_PREV)' \
	 STAGE_FP8='$(call STAGE_FP8,$(K_NN))' PREV_FP8='$(if $(K_PREV),$(call STAGE_FP8,$(K_PREV)),0)' \
	 LINK_OBJS='$(HARNESS_OBJ) $(API_OBJ)' bash tools/grade.sh $(K_NN) '$(SRC)'

# The pipe microbenchmark behind docs/15's reading of the exponentials and P's conversions: sm_90a.
# It links the API objects for their device checks (what is missing, said as ./run says it).
$(BUILD)/xu_pipe: tools/xu_pipe.cu $(API_OBJ) | have-nvcc
	@mkdir -p $(BUILD)
	$(NVCC) $(NVFLAGS) $(call ARCH_GENCODE,sm_90a) $< $(API_OBJ) -o $@ $(LDLIBS)

xu-pipe:
	$(call need_gpu,it times the pipes of a Hopper GPU)
	@$(MAKE) --no-print-directory $(BUILD)/xu_pipe
	@$(BUILD)/xu_pipe
