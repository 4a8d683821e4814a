# Flash attention from scratch, in CUDA C: build, test, benchmark, plot.
# `make help` lists the targets.

NVCC    ?= nvcc
CC      ?= gcc
PYTHON  ?= python3
# Ampere (sm_80) for readers on A100/RTX 30xx, Hopper (sm_90) for the H100/H200 measurements.
# Override, e.g. `make ARCH="-gencode arch=compute_89,code=sm_89"`.
# With a GPU present, its own compute capability is added (e.g. sm_86 on an RTX 3090).
comma   := ,
GPU_CC  := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
ARCH    ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
           $(if $(filter-out 80 90,$(GPU_CC)),-gencode arch=compute_$(GPU_CC)$(comma)code=sm_$(GPU_CC))

BUILD   := build
# The commit stamped into CSV rows; a copy of the tree without .git passes COMMIT=... by hand.
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
STAGES  := 01 02 03 04 05 06 07 08
STAGE_DIR = $(firstword $(wildcard kernel$(1)_*))
EXISTING := $(foreach s,$(STAGES),$(if $(call STAGE_DIR,$(s)),$(s)))

CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC) 2>/dev/null)))
CFLAGS    := -std=c11 -O2 -Wall -Wextra -Icommon -I$(CUDA_HOME)/include -fPIC
NVFLAGS   := -O3 -std=c++17 $(ARCH) -Icommon -Xcompiler -fPIC -Xptxas -warn-spills --expt-relaxed-constexpr
LDLIBS    := -lcudart -lm

HARNESS_C  := $(wildcard harness/*.c)
HARNESS_CU := $(wildcard harness/*.cu)
HARNESS_OBJ := $(patsubst harness/%.c,$(BUILD)/harness/%.o,$(HARNESS_C)) \
               $(patsubst harness/%.cu,$(BUILD)/harness/%.o,$(HARNESS_CU))
API_OBJ := $(BUILD)/common/flash_api.o
HEADERS := $(wildcard common/*.h common/*.cuh harness/*.h)

.PHONY: help all lib test bench reference plot clean tune sanitize diff sass sass-table profile grade \
        $(addprefix kernel,$(STAGES))

help:
	@echo "Flash attention from scratch: targets"
	@echo "  make kernelNN       build build/kernelNN (stage NN) and point ./run at it, e.g. make kernel05 && ./run"
	@echo "  make all            every stage binary, build/allstages and build/libflash.so"
	@echo "  make lib            build/libflash.so with every stage (the C API of common/flash.h)"
	@echo "  make test           CPU tests, instruction checks, and with a GPU the correctness matrix"
	@echo "  make bench          every stage on the headline problem and the sweep -> plots/<gpu>.csv"
	@echo "  make reference      time FA2 and cuDNN through PyTorch (optional) -> plots/<gpu>.csv"
	@echo "  make plot           draw plots/*.png from the CSVs under plots/"
	@echo "  make tune           time candidate tile shapes of stage 08 on this GPU (winner per head_dim, causal)"
	@echo "  make diff A=04 B=05  what stage B changed in kernel.cu relative to stage A"
	@echo "  make sass K=05       registers/smem/spills, PTX and SASS instruction histograms (sass-table: every stage)"
	@echo "  make profile K=05    ncu: tensor pipe, smem bank conflicts, occupancy, DRAM (needs ncu + GPU)"
	@echo "  make sanitize        compute-sanitizer memcheck/racecheck/synccheck/initcheck on every stage"
	@echo "  make grade K=05 SRC=f.cu  grade a student's stage (docs/assignments.md); make help-tools for details"
	@echo "  make clean          remove build/ and ./run"
	@echo "Variables: ARCH (nvcc -gencode flags; default sm_80 + sm_90), NVCC, PYTHON"

$(BUILD)/common/%.o: common/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/harness/%.o: harness/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFLASH_COMMIT=\"$(COMMIT)\" -c $< -o $@

$(BUILD)/harness/%.o: harness/%.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# One object per stage; ptxas -v output is kept beside it for the spill check and `make sass`.
$(BUILD)/kernel%.o: $(HEADERS)
	@mkdir -p $(BUILD)
	$(NVCC) $(NVFLAGS) -Xptxas -v -c $(call STAGE_DIR,$*)/kernel.cu -o $@ 2> $(BUILD)/kernel$*.ptxas.txt \
	  || { cat $(BUILD)/kernel$*.ptxas.txt; exit 1; }
	@grep -v -e '^ptxas info' -e '^ptxas info *:' $(BUILD)/kernel$*.ptxas.txt | grep -v '^ *$$' | grep -v -e 'bytes stack frame' -e 'Used [0-9]* registers' -e 'Compiling entry' -e 'Function properties' >&2 || true

# Stage objects depend on their own source too (the pattern rule above cannot name it).
$(foreach s,$(EXISTING),$(eval $(BUILD)/kernel$(s).o: $(call STAGE_DIR,$(s))/kernel.cu))

$(BUILD)/kernel%: $(BUILD)/kernel%.o $(HARNESS_OBJ) $(API_OBJ)
	$(NVCC) $(ARCH) $^ -o $@ $(LDLIBS)

$(BUILD)/allstages: $(foreach s,$(EXISTING),$(BUILD)/kernel$(s).o) $(HARNESS_OBJ) $(API_OBJ)
	$(NVCC) $(ARCH) $^ -o $@ $(LDLIBS)

$(BUILD)/libflash.so: $(foreach s,$(EXISTING),$(BUILD)/kernel$(s).o) $(API_OBJ)
	$(NVCC) $(ARCH) -shared $^ -o $@ $(LDLIBS)

$(addprefix kernel,$(STAGES)): kernel%: $(BUILD)/kernel%
	ln -sf $(BUILD)/kernel$* run
	@echo "./run now runs stage $* ($(call STAGE_DIR,$*)); try ./run --help"

all: $(foreach s,$(EXISTING),$(BUILD)/kernel$(s)) $(BUILD)/allstages $(BUILD)/libflash.so

lib: $(BUILD)/libflash.so

test: all
	bash tests/run_tests.sh

GPU_SLUG = $(shell $(BUILD)/allstages --gpu-slug 2>/dev/null || echo unknown)

bench: $(BUILD)/allstages
	$(BUILD)/allstages --stage all --bench --csv plots/$(GPU_SLUG).csv

tune: all
	ARCH="$(ARCH)" NVCC="$(NVCC)" bash tests/tune.sh

reference: $(BUILD)/allstages
	FLASH_COMMIT=$(COMMIT) $(PYTHON) harness/reference.py --csv plots/$(GPU_SLUG).csv

plot:
	$(PYTHON) plots/plot.py plots/*.csv

clean:
	rm -rf $(BUILD) run
include mk/tools.mk
