/*
 * cli.c: argument parsing for ./run. "--key value" or "--key=value" flags; every error names the
 * flag at fault and exits with status 2 before any CUDA call, so bad input is reported the same way
 * with or without a GPU.
 */
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flash_internal.h"
#include "problems.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./run [flags]     (flags are --key value; all optional; each at most once)\n"
            "                         (--key=value works too: --seqlen=512, --causal=0; a flag that takes\n"
            "                          no value takes none either way)\n"
            "\n"
            "modes (default: check and time one problem, the one the problem flags describe)\n"
            "  --sweep            the benchmark problems: seqlen 512..16384, batch*seqlen = 65536,\n"
            "                     heads*head-dim = 2048, head-dim 64/128, causal 0/1; in bf16, then in\n"
            "                     e4m3 on the stages that take it (with --dtype: in that dtype alone)\n"
            "  --bench            --sweep with checks always on (make bench: --stage all --bench)\n"
            "  --matrix           the correctness matrix: small cases over the whole contract (e4m3 on\n"
            "                     the stages that take it), no timing, no CSV\n"
            "  --peak             measure the bf16 tensor-core ceilings of this GPU: mma.sync m16n8k16,\n"
            "                     and on Hopper wgmma m64n128k16; alone, or with --matrix / --sweep /\n"
            "                     --bench (the ceilings are measured first)\n"
            "  --gpu-slug         print the GPU name as a file-name slug and exit\n"
            "  --help             this text\n"
            "\n"
            "problem (default: the chapters' headline problem)\n"
            "  --batch N          batch size                                   (default 16)\n"
            "  --seqlen N         sets both --seqlen-q and --seqlen-k          (default 4096)\n"
            "  --seqlen-q N       query length                                 (default: --seqlen)\n"
            "  --seqlen-k N       key/value length                             (default: --seqlen)\n"
            "  --heads N          query heads                                  (default 16)\n"
            "  --kv-heads N       key/value heads, must divide --heads (GQA)   (default: --heads)\n"
            "  --head-dim N       64 or 128                                    (default 128)\n"
            "  --dtype T          bf16, fp16 or e4m3                           (default bf16)\n"
            "                     e4m3: q, k, v in fp8 with a scale per tensor, O in bf16; only the\n"
            "                     stages that take fp8 inputs run it (stage 16 on), the others are refused\n"
            "                     (--stage N) or skipped (--stage all; without --stage, the highest\n"
            "                     stage that takes it runs)\n"
            "  --causal [0|1]     bottom-right aligned causal mask; bare = 1   (default 0)\n"
            "  --scale F          softmax scale, 0 = 1/sqrt(head-dim)          (default 0)\n"
            "\n"
            "how to run\n"
            "  --stage N|all      stage N, or all: every stage linked in that this GPU runs (a stage\n"
            "                     that needs another GPU is skipped, or with --stage N refused, naming\n"
            "                     what it needs)                        (default: the highest it runs)\n"
            "  --seed N           input seed                                   (default 0)\n"
            "  --warmup N         untimed launches before timing               (default 3)\n"
            "  --iters N          timed launches (a slow stage stops after ~2 s, never under 5)\n"
            "                                                                  (default 20)\n"
            "  --no-check         skip the correctness check\n"
            "  --csv FILE         append result rows to FILE (header written when new or empty)\n"
            "\n"
            "what each mode takes (a flag that no mode of the run would use is refused, not ignored)\n"
            "  default            problem flags, --stage --seed --warmup --iters --no-check --csv\n"
            "  --sweep            --dtype --stage --seed --warmup --iters --no-check --csv\n"
            "  --bench            --dtype --stage --seed --warmup --iters --csv  (not with --sweep)\n"
            "  --matrix           --stage --seed\n"
            "  --peak             --csv (an mma_peak row, and on Hopper a wgmma_peak row); with another\n"
            "                     mode, also what that one takes\n"
            "  --gpu-slug         nothing else\n"
            "\n"
            "exit status: 0 pass, 1 check failed, 2 bad usage or unsupported, 3 CUDA error or no device\n");
}

/* Integer value of `flag`, in [lo, hi]. Rejects empty strings, trailing junk, and overflow. */
static int parse_ll(const char *flag, const char *s, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] == '\0' || s[0] == ' ' || *end != '\0') {
        fprintf(stderr, "error: %s expects an integer, got '%s'\n", flag, s);
        return CLI_ERROR;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "error: %s %s out of range (%lld..%lld)\n", flag, s, lo, hi);
        return CLI_ERROR;
    }
    *out = v;
    return CLI_OK;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    long long v;
    int rc = parse_ll(flag, s, lo, hi, &v);
    if (rc == CLI_OK) *out = (int)v;
    return rc;
}

/* The softmax scale: a float, 0 meaning 1/sqrt(head_dim). The value is parsed as a double, so a
 * number outside float's range would otherwise turn silently into inf, or into 0 (the default); and
 * one that becomes a subnormal float would be flushed to zero by the kernels. */
static int parse_scale(const char *val, float *out) {
    char *end = NULL;
    errno = 0;
    const double v = strtod(val, &end);
    const int range = errno == ERANGE;  /* beyond double itself: huge, or tiny (|v| <= DBL_MIN) */
    if (val[0] == '\0' || *end != '\0') {
        fprintf(stderr, "error: --scale expects a number, got '%s'\n", val);
        return CLI_ERROR;
    }
    if (isnan(v) || (isinf(v) && !range)) {
        fprintf(stderr, "error: --scale %s must be a finite number (> 0, or 0 for 1/sqrt(head-dim))\n", val);
        return CLI_ERROR;
    }
    if (v < 0.0 || (range && signbit(v))) {  /* "-0" is 0; "-1e-400" is negative */
        fprintf(stderr, "error: --scale %s out of range (must be > 0, or 0 for 1/sqrt(head-dim))\n", val);
        return CLI_ERROR;
    }
    if (v > FLT_MAX) {
        fprintf(stderr, "error: --scale %s overflows a float (the largest is about 3.4e38)\n", val);
        return CLI_ERROR;
    }
    if ((float)v == 0.0f && (v != 0.0 || range)) {
        fprintf(stderr,
                "error: --scale %s underflows a float: it would round to 0, which means the default "
                "1/sqrt(head-dim) (the smallest positive float is about 1.4e-45)\n",
                val);
        return CLI_ERROR;
    }
    /* A float below FLT_MIN but above 0 is subnormal: representable, but the kernels flush
     * subnormals to zero (e.g. ex2.approx.ftz in common/ptx.cuh), so it would silently not be the
     * scale given. flash_validate refuses it too, for callers of the API. */
    if ((float)v < FLT_MIN && (float)v > 0.0f) {
        fprintf(stderr,
                "error: --scale %s is subnormal as a float: below the smallest normal float (about 1.2e-38), "
                "and the kernels flush subnormals to zero\n",
                val);
        return CLI_ERROR;
    }
    *out = (float)v;
    return CLI_OK;
}

/* The modes of a run, as bits: which of them would use a flag. A flag that no running mode uses
 * would be silently ignored, so it is refused instead (the user meant something by it). */
enum { M_SINGLE = 1, M_PEAK = 2, M_MATRIX = 4, M_SWEEP = 8, M_BENCH = 16 };

typedef struct {
    const char *name;
    int used_by;     /* the modes that use it; 0 for the mode flags themselves */
    int refused_by;  /* modes that contradict it even when another mode of the run would use it */
} flag_spec;

/* Every flag ./run knows (--help aside). The problem flags describe the single problem of the
 * default mode; the other modes bring their own problems, and --peak alone runs none. */
static const flag_spec flags[] = {
    {"--batch", M_SINGLE, 0},    {"--seqlen", M_SINGLE, 0},   {"--seqlen-q", M_SINGLE, 0},
    {"--seqlen-k", M_SINGLE, 0}, {"--heads", M_SINGLE, 0},    {"--kv-heads", M_SINGLE, 0},
    {"--head-dim", M_SINGLE, 0}, {"--causal", M_SINGLE, 0},   {"--scale", M_SINGLE, 0},
    /* The sweep runs its problems in each of the benchmark's dtypes; --dtype runs them in one. */
    {"--dtype", M_SINGLE | M_SWEEP | M_BENCH, 0},
    {"--seed", M_SINGLE | M_MATRIX | M_SWEEP | M_BENCH, 0},
    {"--stage", M_SINGLE | M_MATRIX | M_SWEEP | M_BENCH, 0},
    {"--warmup", M_SINGLE | M_SWEEP | M_BENCH, 0},
    {"--iters", M_SINGLE | M_SWEEP | M_BENCH, 0},
    /* The matrix and the bench always check: with them --no-check is a contradiction, not just
     * unused, even beside --sweep, which would take it. */
    {"--no-check", M_SINGLE | M_SWEEP, M_MATRIX | M_BENCH},
    {"--csv", M_SINGLE | M_PEAK | M_SWEEP | M_BENCH, 0},  /* --peak writes the ceilings' rows */
    {"--sweep", 0, 0},
    {"--bench", 0, 0},
    {"--matrix", 0, 0},
    {"--peak", 0, 0},
    {"--gpu-slug", 0, 0},
};
#define N_FLAGS ((int)(sizeof flags / sizeof flags[0]))

static int find_flag(const char *name) {
    for (int k = 0; k < N_FLAGS; k++)
        if (strcmp(name, flags[k].name) == 0) return k;
    return -1;
}

static const char *mode_name(int mode) {
    return mode == M_MATRIX ? "--matrix" : mode == M_SWEEP ? "--sweep" : mode == M_BENCH ? "--bench" : "--peak";
}

/* Why `mode` has no use for `f` (the end of "--matrix would ignore it (...)"). */
static const char *why_unused(const flag_spec *f, int mode) {
    if (mode == M_PEAK)
        return "alone, it only measures the mma.sync ceiling: it runs no attention problem, so no stage, seed, "
               "timing or check";
    if (f->used_by == M_SINGLE) return "it runs its own fixed problems";
    if (strcmp(f->name, "--dtype") == 0) return "it runs its own fixed problems, in every dtype";
    if (strcmp(f->name, "--no-check") == 0) return "it always checks";
    if (strcmp(f->name, "--warmup") == 0 || strcmp(f->name, "--iters") == 0) return "it only checks, it times nothing";
    if (strcmp(f->name, "--csv") == 0) return "it writes no CSV rows";
    return "it does not use it";
}

int parse_args(int argc, char **argv, run_options *o) {
    memset(o, 0, sizeof *o);
    flash_problem *p = &o->problem;
    *p = headline_problem();  /* the defaults: the chapters' problem */
    o->warmup = 3;
    o->iters = 20;
    o->check = 1;
    int seqlen = p->seqlen_q, seqlen_q = 0, seqlen_k = 0, heads_kv = 0;  /* 0: not given, use the default */
    /* The flags given, in command-line order (each at most once), so that a refusal names the
     * first offender as the user typed it. */
    int given[N_FLAGS] = {0}, order[N_FLAGS], n_given = 0;

    for (int i = 1; i < argc; i++) {
        /* "--key=value" is "--key value": split at the first '='. `flag` is the name alone (as the
         * user wrote it, for the messages), `eq` the value after the '=', or NULL. */
        const char *arg = argv[i], *eq = NULL;
        char name[32];
        const char *flag = arg;
        if (strncmp(arg, "--", 2) == 0 && strchr(arg, '=') != NULL) {
            const size_t len = (size_t)(strchr(arg, '=') - arg);
            if (len >= sizeof name) {  /* longer than any flag: unknown */
                fprintf(stderr, "error: unknown argument '%s' (see --help)\n", arg);
                return CLI_ERROR;
            }
            memcpy(name, arg, len);
            name[len] = '\0';
            flag = name;
            eq = arg + len + 1;
        }
        const int is_help = strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0;
        const int k = is_help ? -1 : find_flag(flag);
        if (!is_help && k < 0) {
            fprintf(stderr, "error: unknown argument '%s' (see --help)\n", eq ? arg : flag);
            return CLI_ERROR;
        }
        /* A flag without a value: "--no-check=1", or "--no-check 1" (the next argument is not a
         * flag; "-1" is a value, "-h" a flag), would otherwise be refused as an unknown '1' or
         * silently drop the value. Says which flag, and what was given to it. */
        const int no_value = is_help || flags[k].used_by == 0 /* a mode flag */ || strcmp(flag, "--no-check") == 0;
        if (no_value) {
            const char *next = i + 1 < argc ? argv[i + 1] : NULL;
            const char *got = eq ? eq
                              : (next && strncmp(next, "--", 2) != 0 && strcmp(next, "-h") != 0) ? next
                                                                                                   : NULL;
            if (got) {
                fprintf(stderr, "error: %s takes no value, got '%s'\n", flag, got);
                return CLI_ERROR;
            }
        }
        if (is_help) {
            usage(stdout);
            return CLI_HELP;
        }
        /* A repeat would silently override the first (--batch 8 --batch 4 runs batch 4), which
         * hides a typo or a half-edited command line: refuse it. "--seqlen 5 --seqlen=6" is a
         * repeat too: the flag, not its spelling, counts. */
        if (given[k]) {
            fprintf(stderr, "error: %s given twice; give each flag once (otherwise the last would silently win)\n",
                    flag);
            return CLI_ERROR;
        }
        given[k] = 1;
        order[n_given++] = k;
        if (eq && eq[0] == '\0') {
            fprintf(stderr, "error: %s= has an empty value (write %s=VALUE or %s VALUE; see --help)\n", flag, flag,
                    flag);
            return CLI_ERROR;
        }

        /* Flags without a value. */
        if (strcmp(flag, "--no-check") == 0) { o->check = 0; continue; }
        if (strcmp(flag, "--sweep") == 0) { o->sweep = 1; continue; }
        if (strcmp(flag, "--bench") == 0) { o->bench = 1; continue; }
        if (strcmp(flag, "--peak") == 0) { o->peak = 1; continue; }
        if (strcmp(flag, "--matrix") == 0) { o->matrix = 1; continue; }
        if (strcmp(flag, "--gpu-slug") == 0) { o->gpu_slug = 1; continue; }
        if (strcmp(flag, "--causal") == 0) {
            /* The value is optional: "--causal" alone means 1; "--causal=V" always has one. */
            p->causal = 1;
            const char *cv = eq ? eq
                             : (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) ? argv[++i]
                                                                                     : NULL;
            if (cv && (strcmp(cv, "0") == 0 || strcmp(cv, "1") == 0))
                p->causal = cv[0] - '0';
            else if (cv) {
                fprintf(stderr, "error: --causal expects 0 or 1, got '%s'\n", cv);
                return CLI_ERROR;
            }
            continue;
        }

        /* Everything else takes a value: after the '=', or the next argument. */
        if (!eq && i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value (see --help)\n", flag);
            return CLI_ERROR;
        }
        const char *val = eq ? eq : argv[++i];
        int rc = CLI_OK;

        if (strcmp(flag, "--batch") == 0) rc = parse_int(flag, val, 1, 65535, &p->batch);
        else if (strcmp(flag, "--seqlen") == 0) rc = parse_int(flag, val, 1, 2147483647, &seqlen);
        else if (strcmp(flag, "--seqlen-q") == 0) rc = parse_int(flag, val, 1, 2147483647, &seqlen_q);
        else if (strcmp(flag, "--seqlen-k") == 0) rc = parse_int(flag, val, 1, 2147483647, &seqlen_k);
        else if (strcmp(flag, "--heads") == 0) rc = parse_int(flag, val, 1, 65535, &p->heads_q);
        else if (strcmp(flag, "--kv-heads") == 0) rc = parse_int(flag, val, 1, 65535, &heads_kv);
        else if (strcmp(flag, "--head-dim") == 0) {
            rc = parse_int(flag, val, 1, 2147483647, &p->head_dim);
            if (rc == CLI_OK && p->head_dim != 64 && p->head_dim != 128) {
                fprintf(stderr, "error: --head-dim %s unsupported (supported: 64, 128)\n", val);
                rc = CLI_ERROR;
            }
        } else if (strcmp(flag, "--dtype") == 0) {
            o->dtype_given = 1;
            if (strcmp(val, "bf16") == 0) p->dtype = FLASH_BF16;
            else if (strcmp(val, "fp16") == 0) p->dtype = FLASH_FP16;
            else if (strcmp(val, "e4m3") == 0) p->dtype = FLASH_E4M3;
            else {
                fprintf(stderr, "error: --dtype %s unsupported (supported: bf16, fp16, e4m3)\n", val);
                rc = CLI_ERROR;
            }
        } else if (strcmp(flag, "--scale") == 0) rc = parse_scale(val, &p->softmax_scale);
        else if (strcmp(flag, "--seed") == 0) {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(val, &end, 10);
            if (val[0] < '0' || val[0] > '9' || *end != '\0') {
                fprintf(stderr, "error: --seed expects a non-negative integer, got '%s'\n", val);
                rc = CLI_ERROR;
            } else if (errno == ERANGE) {
                fprintf(stderr, "error: --seed %s out of range (0..18446744073709551615)\n", val);
                rc = CLI_ERROR;
            } else {
                o->seed = (uint64_t)v;
            }
        } else if (strcmp(flag, "--warmup") == 0) rc = parse_int(flag, val, 0, 100000, &o->warmup);
        else if (strcmp(flag, "--iters") == 0) rc = parse_int(flag, val, 1, 100000, &o->iters);
        else if (strcmp(flag, "--csv") == 0) {
            if (val[0] == '\0' || strncmp(val, "--", 2) == 0) {
                fprintf(stderr, "error: --csv needs a file name, got '%s'\n", val);
                rc = CLI_ERROR;
            }
            o->csv_path = val;  /* whether it can be written: csv_preflight, also before the device */
        } else if (strcmp(flag, "--stage") == 0) {
            o->stage_given = 1;
            if (strcmp(val, "all") == 0) o->stage = 0;
            else {
                char *end = NULL;
                long v = strtol(val, &end, 10);
                if (val[0] < '0' || val[0] > '9' || *end != '\0' || v < 1 || v > flash_stage_count()) {
                    fprintf(stderr, "error: --stage %s invalid (expected 1..%d or all)\n", val, flash_stage_count());
                    rc = CLI_ERROR;
                } else {
                    o->stage = (int)v;
                }
            }
        }
        if (rc != CLI_OK) return rc;
    }

    /* Cross-flag rules: every flag given must be used by some mode of this run. */
    if (o->gpu_slug && n_given > 1) {
        const int other = order[0] == find_flag("--gpu-slug") ? order[1] : order[0];
        fprintf(stderr, "error: --gpu-slug takes no other flag (it prints the GPU's slug and exits), got %s\n",
                flags[other].name);
        return CLI_ERROR;
    }
    if (o->sweep && o->bench) {
        fprintf(stderr, "error: --sweep and --bench run the same problems (--bench is --sweep with checks forced "
                        "on); give one of them\n");
        return CLI_ERROR;
    }
    if (given[find_flag("--seqlen")] && given[find_flag("--seqlen-q")] && given[find_flag("--seqlen-k")]) {
        fprintf(stderr, "error: --seqlen would be ignored: --seqlen-q and --seqlen-k are both given; "
                        "give --seqlen alone, or --seqlen-q and --seqlen-k\n");
        return CLI_ERROR;
    }
    const int running = (o->peak ? M_PEAK : 0) | (o->matrix ? M_MATRIX : 0) | (o->sweep ? M_SWEEP : 0) |
                        (o->bench ? M_BENCH : 0);
    const int modes = running ? running : M_SINGLE;
    for (int n = 0; n < n_given; n++) {
        const flag_spec *f = &flags[order[n]];
        if (f->used_by == 0) continue;  /* a mode flag */
        int against = f->refused_by & modes;       /* a mode that contradicts it, */
        if (!against && !(f->used_by & modes)) against = modes;  /* or no mode that uses it */
        if (!against) continue;
        /* Name the mode at fault: the fixed-problem mode when there is one (--peak beside it would
         * ignore the flag too, but the other mode is what the user is thinking of). */
        const int mode = (against & M_MATRIX)  ? M_MATRIX
                         : (against & M_BENCH) ? M_BENCH
                         : (against & M_SWEEP) ? M_SWEEP
                                               : M_PEAK;
        fprintf(stderr, "error: %s cannot be combined with %s: %s would ignore it (%s)\n", f->name,
                mode_name(mode), mode_name(mode), why_unused(f, mode));
        return CLI_ERROR;
    }

    p->seqlen_q = seqlen_q ? seqlen_q : seqlen;
    p->seqlen_k = seqlen_k ? seqlen_k : seqlen;
    p->heads_kv = heads_kv ? heads_kv : p->heads_q;
    if (p->heads_q % p->heads_kv != 0) {
        fprintf(stderr, "error: --kv-heads %d must divide --heads %d\n", p->heads_kv, p->heads_q);
        return CLI_ERROR;
    }
    /* The library's own contract check, as the stages will see it (it names the parameter). */
    if (flash_validate(p, 0) != FLASH_OK) {
        fprintf(stderr, "error: %s\n", flash_strerror(flash_validate(p, 0)));
        return CLI_ERROR;
    }

    /* The stage: one that is linked into this binary. */
    if (o->stage_given && o->stage > 0 && !flash_stage_available(o->stage)) {
        fprintf(stderr,
                "error: --stage %d: %s is not linked into this binary (make kernel%02d, or use build/allstages)\n",
                o->stage, flash_stage_name(o->stage), o->stage);
        return CLI_ERROR;
    }
    int linked = 0, last_linked = 0, fp8_linked = 0;
    for (int s = 1; s <= flash_stage_count(); s++) {
        if (!flash_stage_available(s)) continue;
        linked++;
        last_linked = s;
        fp8_linked += flash_stage_takes_fp8(s) != 0;
    }
    if (linked == 0) {
        fprintf(stderr, "error: --stage: no stage is linked into this binary\n");
        return CLI_ERROR;
    }
    /* e4m3 inputs: the stage asked for must take them; with --stage all, or without --stage, at
     * least one stage linked in must. The refusal is the API's own message, which names the first
     * stage that takes fp8 inputs (the stage table knows it without a device). */
    if (p->dtype == FLASH_E4M3) {
        if (o->stage_given && o->stage > 0 && flash_stage_supports_dtype(o->stage, FLASH_E4M3) != FLASH_OK) {
            fprintf(stderr, "error: --stage %d --dtype e4m3: %s\n", o->stage,
                    flash_strerror(flash_stage_supports_dtype(o->stage, FLASH_E4M3)));
            return CLI_ERROR;
        }
        if (fp8_linked == 0) {
            fprintf(stderr, "error: --dtype e4m3: no stage linked into this binary takes e4m3 inputs: %s\n",
                    flash_strerror(flash_stage_supports_dtype(last_linked, FLASH_E4M3)));
            return CLI_ERROR;
        }
    }
    return CLI_OK;
}
