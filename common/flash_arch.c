/*
 * flash_arch.c: the rule that says which GPUs a stage runs on. Pure C, no CUDA calls, so that the
 * CPU tests can check it without a GPU (tests/test_cpu.c); flash_api.c applies it to the device.
 *
 * A stage declares the architecture it is built for in the "Needs:" line of its kernel.cu header.
 * "sm_80" means that architecture or any newer one: stages 01-08 use mma.sync, ldmatrix and
 * cp.async, which every GPU since Ampere has. A trailing "a" ("sm_90a") means that architecture
 * and no other: wgmma, TMA and setmaxnreg are Hopper's alone, and code compiled for sm_90a runs on
 * compute capability 9.0 only.
 */
#include "flash_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The family name of a compute capability, for messages. */
static const char *arch_family(int cc) {
    if (cc >= 120) return "Blackwell (consumer)";
    if (cc >= 100) return "Blackwell";
    if (cc >= 90) return "Hopper";
    if (cc == 89) return "Ada";
    if (cc >= 80) return "Ampere";
    if (cc >= 75) return "Turing";
    if (cc >= 70) return "Volta";
    return "pre-Volta";
}

int flash_arch_runs_on(const char *arch, int cc, char *need, size_t n) {
    int required = 0, exact = 0, len = 0;
    if (arch && sscanf(arch, "sm_%d%n", &required, &len) == 1 && required > 0) {
        if (arch[len] == 'a' && arch[len + 1] == '\0') exact = 1;
        else if (arch[len] != '\0') required = 0;
    }
    if (required == 0) {
        snprintf(need, n, "a valid architecture (the stage declares '%s')", arch ? arch : "(none)");
        return 0;
    }
    if (exact) {
        snprintf(need, n, "a%s %s GPU (sm_%d)", strchr("AEIOU", arch_family(required)[0]) ? "n" : "",
                 arch_family(required), required);
        return cc == required;
    }
    snprintf(need, n, "a%s %s or newer GPU (sm_%d or newer)", strchr("AEIOU", arch_family(required)[0]) ? "n" : "",
             arch_family(required), required);
    return cc >= required;
}

int flash_stage_refused(int stage, const char *name, const char *arch, int cc, char *msg, size_t n) {
    char need[96];
    if (flash_arch_runs_on(arch, cc, need, sizeof need)) return 0;
    snprintf(msg, n, "stage %02d (%s) needs %s, this one is sm_%d", stage, name, need, cc);
    return 1;
}
