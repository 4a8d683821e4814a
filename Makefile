# Flash attention from scratch, in CUDA C: build, test, benchmark, plot.
# `make help` lists the targets. Everything that depends on which stages exist reads the
# kernelNN_name/ directories below; nothing lists them by hand.

# -- the toolkit ---------------------------------------------------------------------------------
# nvcc from PATH, else where the CUDA Toolkit installs itself by default. `make NVCC=/path/to/nvcc`
# picks another one. Its bin/ goes first on the PATH of every recipe, so that the tools that come
# with it (cuobjdump, compute-sanitizer, ncu) are found too.
NVCC      ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(NVCC)))
CC        ?= gcc
PYTHON    ?= python3
ifneq ($(CUDA_HOME),)
export PATH := $(CUDA_HOME)/bin:$(PATH)
endif

# The targets that need a program of the toolkit (compute-sanitizer, ncu, cuobjdump) or a GPU,
# asked for directly, stop with exit 2 naming what is missing, before compiling anything: a recipe
# line $(call need_program,PROGRAM[,what it is]) or $(call need_gpu,what the target does there).
# Inside make test, the suites that need them report SKIP instead: a machine without them can
# still pass every test it can run.
need_program = @command -v $(1) >/dev/null 2>&1 || { echo "make $@: $(1)$(if $(2), ($(2))) not found on this machine," \
    "neither on PATH nor in $(or $(CUDA_HOME),the CUDA toolkit's)/bin; it comes with the CUDA toolkit" \
    "(make NVCC=/path/to/bin/nvcc names another one)" >&2; exit 2; }
need_gpu     = @nvidia-smi -L >/dev/null 2>&1 || { echo "make $@: no NVIDIA GPU answers here (nvidia-smi -L failed);" \
    "$(1), so run it on a machine with one" >&2; exit 2; }

# -- target GPUs ---------------------------------------------------------------------------------
# Stages 01-08 are built for Ampere (sm_80: A100, and through it RTX 30xx/40xx) and Hopper (sm_90:
# H100, H200), plus the present GPU's own architecture when nvidia-smi finds one. Override with
# e.g. `make ARCH="-gencode arch=compute_89,code=sm_89"`; `make ARCH=here` builds for the present GPU
# only (quicker, what the GPU tools use for builds that only run here). A stage whose header says
# "Needs: sm_90a" is built for exactly that architecture, whatever ARCH says.
comma        := ,
GPU_CC       := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
ARCH_DEFAULT := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                $(if $(filter-out 80 90,$(GPU_CC)),-gencode arch=compute_$(GPU_CC)$(comma)code=sm_$(GPU_CC))
ARCH_HERE    := $(if $(GPU_CC),-gencode arch=compute_$(GPU_CC)$(comma)code=sm_$(GPU_CC),$(ARCH_DEFAULT))
ARCH         ?= $(ARCH_DEFAULT)
ifeq ($(strip $(ARCH)),here)
override ARCH := $(ARCH_HERE)
endif

# -- the stages ----------------------------------------------------------------------------------
# A stage is a directory kernelNN_name/ with a kernel.cu whose header has a "Needs: sm_XX" line:
# the architecture it is built for ("sm_80": that or newer; "sm_90a": exactly that).
STAGE_DIRS   := $(patsubst %/kernel.cu,%,$(sort $(wildcard kernel[0-9][0-9]_*/kernel.cu)))
STAGES       := $(foreach d,$(STAGE_DIRS),$(patsubst kernel%,%,$(firstword $(subst _, ,$(d)))))
STAGE_DIR     = $(filter kernel$(1)_%,$(STAGE_DIRS))
$(foreach s,$(STAGES),$(eval STAGE_ARCH_$(s) := $(shell sed -n 's/^ \* Needs: *\(sm_[0-9][0-9]*a\{0,1\}\).*/\1/p' \
                                                         $(call STAGE_DIR,$(s))/kernel.cu | head -n 1)))
STAGE_ARCH    = $(STAGE_ARCH_$(1))
# 1 for a stage that takes e4m3 inputs: its kernel.cu defines the fp8 entry point (common/flash_internal.h).
STAGE_FP8     = $(if $(shell grep -l 'flash_forward_fp8_kernel$(1)' $(call STAGE_DIR,$(1))/kernel.cu 2>/dev/null),1,0)
# The one architecture an "a" target is built for: sm_90a -> -gencode arch=compute_90a,code=sm_90a.
ARCH_GENCODE  = -gencode arch=compute_$(patsubst sm_%,%,$(1))$(comma)code=$(1)
STAGE_GENCODE = $(if $(filter %a,$(call STAGE_ARCH,$(1))),$(call ARCH_GENCODE,$(call STAGE_ARCH,$(1))),$(ARCH))
$(foreach s,$(STAGES),$(if $(call STAGE_ARCH,$(s)),,$(error $(call STAGE_DIR,$(s))/kernel.cu: its header has no "Needs: sm_XX" line)))
# NN:dir:arch per stage, for the scripts under tests/ and tools/.
STAGE_TABLE  := $(foreach s,$(STAGES),$(s):$(call STAGE_DIR,$(s)):$(call STAGE_ARCH,$(s)))
ifneq ($(STAGES),$(shell seq -f '%02g' 1 $(words $(STAGES))))
$(error the stage directories must be numbered 01, 02, ... without gaps or repeats; found: $(STAGE_DIRS))
endif

# -- flags: the one definition every build of the project uses, tools included --------------------
BUILD   := build
GEN     := $(BUILD)/gen
# The commit stamped into CSV rows; a copy of the tree without .git passes COMMIT=... by hand.
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
CFLAGS  := -std=c11 -O2 -Wall -Wextra -Icommon -I$(CUDA_HOME)/include -fPIC
NVFLAGS := -O3 -std=c++17 -Icommon -Xcompiler -fPIC -Xptxas -warn-spills --expt-relaxed-constexpr
LDLIBS  := -lcudart -lm
# The scripts under tests/ and tools/ run from these recipes and take the definitions from here.
export NVCC CUDA_HOME CC PYTHON ARCH ARCH_HERE BUILD NVFLAGS LDLIBS COMMIT STAGE_TABLE

COMMON_HEADERS := $(wildcard common/*.h common/*.cuh)
HEADERS        := $(COMMON_HEADERS) $(wildcard harness/*.h)
HARNESS_OBJ    := $(patsubst harness/%.c,$(BUILD)/harness/%.o,$(wildcard harness/*.c)) \
                  $(patsubst harness/%.cu,$(BUILD)/harness/%.o,$(wildcard harness/*.cu))
API_OBJ        := $(BUILD)/common/flash_api.o $(BUILD)/common/flash_arch.o $(BUILD)/common/flash_tma.o \
                  $(BUILD)/common/flash_counter.o
STAGE_OBJ       = $(foreach s,$(STAGES),$(BUILD)/kernel$(s).o)

.PHONY: help all lib test bench reference rounds rounds-nosettle rounds-shapes plot tune ab clean have-nvcc FORCE $(addprefix kernel,$(STAGES))
# A stage's directory name is a target too (the README's table names the stages so), also with the
# slash that a shell's file-name completion adds: phony, or make would find the directory and call
# it up to date.
.PHONY: $(STAGE_DIRS) $(addsuffix /,$(STAGE_DIRS))

help:
	@echo "Flash attention from scratch: targets"
	@echo "  make kernelNN       build build/kernelNN (stage NN) and point ./run at it, e.g. make kernel05 && ./run"
	@echo "  make kernelNN_name  the same by the stage's directory name, e.g. make $(word 5,$(STAGE_DIRS))"
	@echo "  make all            every stage binary, build/allstages and build/libflash.so"
	@echo "  make lib            build/libflash.so with every stage (the C API of common/flash.h)"
	@echo "  make test           CPU tests, instruction checks, and with a GPU the correctness matrix and sanitizer"
	@echo "  make bench          every stage on the headline problem and the sweep (bf16; e4m3 where taken) -> plots/<gpu>.csv"
	@echo "  make reference      time FA2, cuDNN and FA3 through PyTorch (optional) -> plots/<gpu>.csv"
	@echo "  make rounds         stages and references timed in alternating rounds (PyTorch) -> plots/rounds/"
	@echo "  make rounds-nosettle  the headline rounds without the settling work -> plots/rounds/*_nosettle.csv"
	@echo "  make rounds-shapes  the same kernels on the shapes off the sweep (GQA, tails, Sq != Sk, 32k) -> plots/shapes/"
	@echo "  make fp8-error      the e4m3 error of the last fp8 stage and of FA3 against float64 -> plots/fp8_error/"
	@echo "  make plot           draw plots/*.png from the CSVs under plots/"
	@echo "  make tune [K=10]    time candidate tile shapes of stage 08 (or K) on this GPU"
	@echo "  make ab K=13 AB='name=MACRO=VALUE;...'  builds of stage K timed against it in turn -> plots/ab/"
	@echo "  make diff A=04 B=05  what stage B changed in kernel.cu relative to stage A"
	@echo "  make sass K=05       registers/smem/spills, PTX and SASS instruction histograms (sass-table: every stage;"
	@echo "                       SASS needs cuobjdump)"
	@echo "  make profile K=05    ncu: tensor pipe, smem bank conflicts, occupancy, DRAM (needs ncu + GPU)"
	@echo "  make sanitize        compute-sanitizer memcheck/racecheck/synccheck/initcheck on every stage (needs"
	@echo "                       compute-sanitizer + GPU)"
	@echo "  make xu-pipe         sm_90a: the exponentials' and the e4m3 conversions' pipes (docs/15; needs a Hopper GPU)"
	@echo "  make grade K=05 SRC=f.cu  grade a student's stage (docs/assignments.md)"
	@echo "  make clean          remove build/ and ./run"
	@echo "A target that needs a GPU or a program it does not find here stops with exit 2, naming it."
	@echo "Variables: ARCH (nvcc -gencode flags, or 'here'; default sm_80 + sm_90), NVCC, PYTHON"
	@echo "Stages: $(STAGE_DIRS)"

have-nvcc:
	@test -n "$(NVCC)" || { echo "error: nvcc not found, neither on PATH nor in /usr/local/cuda/bin: install the" \
	    "CUDA Toolkit, add its bin/ to PATH, or name it: make NVCC=/path/to/nvcc" >&2; exit 2; }

# -- generated: the dispatcher's stage table and the library's export list -----------------------
# Rewritten only when the text changes, so that editing a kernel does not rebuild the dispatcher.
$(GEN)/stages.h: FORCE
	@mkdir -p $(GEN)
	@printf '%s\n' '/* Generated by the Makefile from the kernelNN_name directories: do not edit. */' \
	    '#define FLASH_STAGE_LIST \' \
	    $(foreach s,$(STAGES),'    FLASH_STAGE($(s), "$(call STAGE_DIR,$(s))", "$(call STAGE_ARCH,$(s))", $(call STAGE_FP8,$(s))) \') '' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# build/libflash.so exports the functions that common/flash.h declares and nothing else.
$(GEN)/libflash.map: common/flash.h
	@mkdir -p $(GEN)
	@{ echo '{ global:'; sed -n 's/^[a-z ]*[ *]\(flash_[a-z0-9_]*\)(.*/    \1;/p' $<; echo '  local: *; };'; } >$@

# -- objects ---------------------------------------------------------------------------------------
$(BUILD)/common/flash_api.o: common/flash_api.c $(GEN)/stages.h $(COMMON_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(GEN) -c $< -o $@

$(BUILD)/common/%.o: common/%.c $(COMMON_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The commit stamped into CSV rows lives in the harness objects, so they are rebuilt when it
# changes: otherwise a rebuild with another COMMIT=... (or after a commit) would relink the old
# stamp into rows timed on new code.
$(GEN)/commit.txt: FORCE
	@mkdir -p $(GEN)
	@echo '$(COMMIT)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(BUILD)/harness/%.o: harness/%.c $(HEADERS) $(GEN)/commit.txt
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFLASH_COMMIT=\"$(COMMIT)\" -c $< -o $@

$(BUILD)/harness/%.o: harness/%.cu $(HEADERS) | have-nvcc
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $(ARCH) -c $< -o $@

# The wgmma ceiling: wgmma exists in the sm_90a target alone, so this one harness object is built
# for exactly that, whatever ARCH says, like a Hopper stage. It links into every binary all the
# same (no -rdc: each object carries its own device code, and the CUDA runtime loads the sm_90a
# code only on an sm_90 GPU); wgmma_peak checks the GPU before it launches anything. The ptxas
# report is kept, as for the stages, for the spill check of tests/test_instructions.sh.
$(BUILD)/harness/peak_wgmma.o: harness/peak_wgmma.cu $(HEADERS) | have-nvcc
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $(call ARCH_GENCODE,sm_90a) -Xptxas -v -c $< -o $@ 2>$(BUILD)/harness/peak_wgmma.ptxas.txt \
	  || { cat $(BUILD)/harness/peak_wgmma.ptxas.txt; exit 1; }
	@grep -v -e '^ptxas info' -e 'bytes stack frame' -e 'Used [0-9]* registers' -e 'Compiling entry' \
	    -e 'Function properties' -e '^ *$$' $(BUILD)/harness/peak_wgmma.ptxas.txt >&2 || true

# One object per stage; ptxas -v output is kept beside it for the spill check and `make sass`.
define STAGE_RULES
$(BUILD)/kernel$(1).o: $(call STAGE_DIR,$(1))/kernel.cu $(COMMON_HEADERS) | have-nvcc
	@mkdir -p $(BUILD)
	$(NVCC) $(NVFLAGS) $(call STAGE_GENCODE,$(1)) -Xptxas -v -c $$< -o $$@ 2>$(BUILD)/kernel$(1).ptxas.txt \
	  || { cat $(BUILD)/kernel$(1).ptxas.txt; exit 1; }
	@grep -v -e '^ptxas info' -e 'bytes stack frame' -e 'Used [0-9]* registers' -e 'Compiling entry' \
	    -e 'Function properties' -e '^ *$$$$' $(BUILD)/kernel$(1).ptxas.txt >&2 || true
	@grep -E 'C75(0[8]|1[0-9])' $(BUILD)/kernel$(1).ptxas.txt >&2 || true

$(BUILD)/kernel$(1): $(BUILD)/kernel$(1).o $(HARNESS_OBJ) $(API_OBJ)
	$(NVCC) $(ARCH) $$^ -o $$@ $(LDLIBS)

kernel$(1): $(BUILD)/kernel$(1)
	ln -sf $(BUILD)/kernel$(1) run
	@echo "./run now runs stage $(1) ($(call STAGE_DIR,$(1))); try ./run --help"

$(call STAGE_DIR,$(1)) $(call STAGE_DIR,$(1))/: kernel$(1)
endef
$(foreach s,$(STAGES),$(eval $(call STAGE_RULES,$(s))))

$(BUILD)/allstages: $(STAGE_OBJ) $(HARNESS_OBJ) $(API_OBJ)
	$(NVCC) $(ARCH) $^ -o $@ $(LDLIBS)

$(BUILD)/libflash.so: $(STAGE_OBJ) $(API_OBJ) $(GEN)/libflash.map
	$(NVCC) $(ARCH) -shared $(STAGE_OBJ) $(API_OBJ) -Xlinker --version-script=$(GEN)/libflash.map -o $@ $(LDLIBS)

# The GPU unit test of common/hopper.cuh's wrappers (tests/hopper_units.cu): Hopper only, like the
# stages that use them.
$(BUILD)/hopper_units: tests/hopper_units.cu $(API_OBJ) $(COMMON_HEADERS) | have-nvcc
	$(NVCC) $(NVFLAGS) $(call ARCH_GENCODE,sm_90a) $< $(API_OBJ) -o $@ $(LDLIBS)

all: $(foreach s,$(STAGES),$(BUILD)/kernel$(s)) $(BUILD)/allstages $(BUILD)/libflash.so $(BUILD)/hopper_units

lib: $(BUILD)/libflash.so

# -- test, bench, plot -----------------------------------------------------------------------------
test: all
	bash tests/run_tests.sh

GPU_SLUG = $(shell $(BUILD)/allstages --gpu-slug 2>/dev/null || echo unknown)

bench: $(BUILD)/allstages
	$(BUILD)/allstages --stage all --bench --csv plots/$(GPU_SLUG).csv

reference: $(BUILD)/allstages
	FLASH_COMMIT=$(COMMIT) $(PYTHON) harness/reference.py --csv plots/$(GPU_SLUG).csv

# The rows every ratio of README and docs comes from (harness/rounds.py), in bf16 and, for the stages
# that take fp8 inputs, in e4m3 beside FA3's fp8 forward, in the same rounds. ROUNDS_TAG=_again writes a
# second measurement of the same commit beside the first (the reproducibility table of
# docs/measuring.md). ROUNDS_ALSO="kernel13" times those stages over the sweep too, beside the last
# of each track.
ROUNDS ?= 4
rounds: $(BUILD)/libflash.so $(BUILD)/allstages
	@mkdir -p plots/rounds
	FLASH_COMMIT=$(COMMIT) $(PYTHON) harness/rounds.py --lib $(BUILD)/libflash.so --rounds $(ROUNDS) \
	    --csv plots/rounds/$(GPU_SLUG)_$(COMMIT)$(ROUNDS_TAG).csv $(if $(ROUNDS_ALSO),--sweep-also $(ROUNDS_ALSO))

# The headline rounds again without each kernel's settling work before its timed calls (and three
# warm-up calls): the timing method under which a kernel meets the clock the one before it left
# (docs/measuring.md), beside make rounds' own file as <gpu>_<commit>_nosettle.csv. ROUNDS_SET=fp8
# times the e4m3 problems alone.
rounds-nosettle: $(BUILD)/libflash.so $(BUILD)/allstages
	@mkdir -p plots/rounds
	FLASH_COMMIT=$(COMMIT) $(PYTHON) harness/rounds.py --lib $(BUILD)/libflash.so --rounds $(ROUNDS) --set $(or $(ROUNDS_SET),headline) \
	    --settle-ms 0 --warmup 3 --csv plots/rounds/$(GPU_SLUG)_$(COMMIT)_nosettle.csv

# The same kernels on the shapes off the sweep (harness/contract.py's SHAPES_BASE: a tail, GQA,
# seqlen_q != seqlen_k, 32k), in a file of their own: the ladder and the README read plots/rounds/.
rounds-shapes: $(BUILD)/libflash.so $(BUILD)/allstages
	@mkdir -p plots/shapes
	FLASH_COMMIT=$(COMMIT) $(PYTHON) harness/rounds.py --lib $(BUILD)/libflash.so --rounds $(ROUNDS) --set shapes \
	    --csv plots/shapes/$(GPU_SLUG)_$(COMMIT).csv $(if $(ROUNDS_ALSO),--sweep-also $(ROUNDS_ALSO))

# The e4m3 error of the last stage that takes fp8 inputs and of FA3 against float64, on the same
# quantized inputs (harness/fp8_error.py): the FP8ERR block of the docs reads the file.
.PHONY: fp8-error
fp8-error: $(BUILD)/libflash.so $(BUILD)/allstages
	@mkdir -p plots/fp8_error
	FLASH_COMMIT=$(COMMIT) $(PYTHON) harness/fp8_error.py --lib $(BUILD)/libflash.so \
	    --csv plots/fp8_error/$(GPU_SLUG)_$(COMMIT).csv

plot:
	$(PYTHON) plots/plot.py plots/*.csv

# Tuning times candidates on the GPU: without one it stops before compiling anything.
tune:
	$(call need_gpu,it times candidate tile shapes on the GPU)
	@$(MAKE) --no-print-directory $(HARNESS_OBJ) $(API_OBJ)
	TUNE_STAGE='$(or $(K_NN),08)' bash tools/tune.sh

# Variants of one stage against its base build, their sweeps in turn (tools/ab.sh).
ab:
	@test -n "$(K_NN)" || { echo "make ab: name the stage, K=NN" >&2; exit 2; }
	$(call need_gpu,it times builds of a stage on the GPU)
	@$(MAKE) --no-print-directory $(HARNESS_OBJ) $(API_OBJ)
	AB_STAGE='$(K_NN)' bash tools/ab.sh

clean:
	rm -rf $(BUILD) run

FORCE:

include mk/tools.mk
