/*
 * cli.c: argument parsing for ./run. "--key value" flags; every error names the flag at fault and
 * exits with status 2 before any CUDA call, so bad input is reported the same way with or without
 * a GPU.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flash_internal.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./run [flags]     (flags are --key value; all optional)\n"
            "\n"
            "problem (default: the chapters' headline problem)\n"
            "  --batch N          batch size                                   (default 16)\n"
            "  --seqlen N         sets both --seqlen-q and --seqlen-k          (default 4096)\n"
            "  --seqlen-q N       query length                                 (default: --seqlen)\n"
            "  --seqlen-k N       key/value length                             (default: --seqlen)\n"
            "  --heads N          query heads                                  (default 16)\n"
            "  --kv-heads N       key/value heads, must divide --heads (GQA)   (default: --heads)\n"
            "  --head-dim N       64 or 128                                    (default 128)\n"
            "  --dtype T          bf16 or fp16                                 (default bf16)\n"
            "  --causal [0|1]     bottom-right aligned causal mask; bare = 1   (default 0)\n"
            "  --scale F          softmax scale, 0 = 1/sqrt(head-dim)          (default 0)\n"
            "  --seed N           input seed                                   (default 0)\n"
            "\n"
            "what to run\n"
            "  --stage N|all      stage 1..8, or every stage linked in         (default: highest linked)\n"
            "  --warmup N         untimed launches before timing               (default 3)\n"
            "  --iters N          timed launches (a slow stage stops after ~2 s, never under 5)\n"
            "                                                                  (default 20)\n"
            "  --no-check         skip the correctness check\n"
            "  --sweep            the benchmark problems: seqlen 512..16384, batch*seqlen = 65536,\n"
            "                     heads*head-dim = 2048, head-dim 64/128, causal 0/1, bf16\n"
            "  --bench            --sweep with checks always on (make bench: --stage all --bench)\n"
            "  --matrix           the correctness matrix: 256 small cases per stage, no timing\n"
            "  --peak             measure the mma.sync m16n8k16 bf16 ceiling of this GPU; alone, or\n"
            "                     before --matrix / --sweep / --bench\n"
            "  --csv FILE         append result rows to FILE (header written when new or empty)\n"
            "  --gpu-slug         print the GPU name as a file-name slug and exit\n"
            "  --help             this text\n"
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

/* The flags that describe the single problem; the sweep and matrix modes bring their own. */
static int is_problem_flag(const char *flag) {
    static const char *const names[] = {"--batch",    "--seqlen", "--seqlen-q", "--seqlen-k", "--heads",
                                        "--kv-heads", "--head-dim", "--dtype",  "--causal",   "--scale"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(flag, names[i]) == 0) return 1;
    return 0;
}

int parse_args(int argc, char **argv, run_options *o) {
    memset(o, 0, sizeof *o);
    flash_problem *p = &o->problem;
    p->batch = 16;
    p->heads_q = 16;
    p->head_dim = 128;
    p->dtype = FLASH_BF16;
    o->warmup = 3;
    o->iters = 20;
    o->check = 1;
    int seqlen = 4096, seqlen_q = 0, seqlen_k = 0, heads_kv = 0;  /* 0: not given, use the default */
    const char *problem_flag = NULL;  /* the first problem flag seen, for the mode conflict check */

    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        /* Flags without a value. */
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            usage(stdout);
            return CLI_HELP;
        }
        if (strcmp(flag, "--no-check") == 0) { o->check = 0; continue; }
        if (strcmp(flag, "--sweep") == 0) { o->sweep = 1; continue; }
        if (strcmp(flag, "--bench") == 0) { o->bench = 1; continue; }
        if (strcmp(flag, "--peak") == 0) { o->peak = 1; continue; }
        if (strcmp(flag, "--matrix") == 0) { o->matrix = 1; continue; }
        if (strcmp(flag, "--gpu-slug") == 0) { o->gpu_slug = 1; continue; }
        if (strcmp(flag, "--causal") == 0) {
            /* The value is optional: "--causal" alone means 1. */
            problem_flag = problem_flag ? problem_flag : flag;
            p->causal = 1;
            if (i + 1 < argc && (strcmp(argv[i + 1], "0") == 0 || strcmp(argv[i + 1], "1") == 0))
                p->causal = argv[++i][0] - '0';
            else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                fprintf(stderr, "error: --causal expects 0 or 1, got '%s'\n", argv[i + 1]);
                return CLI_ERROR;
            }
            continue;
        }

        /* Everything else takes a value. */
        static const char *const valued[] = {"--batch",    "--seqlen", "--seqlen-q", "--seqlen-k", "--heads",
                                             "--kv-heads", "--head-dim", "--dtype",  "--scale",    "--seed",
                                             "--warmup",   "--iters",  "--csv",      "--stage"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= strcmp(flag, valued[k]) == 0;
        if (!known) {
            fprintf(stderr, "error: unknown argument '%s' (see --help)\n", flag);
            return CLI_ERROR;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value (see --help)\n", flag);
            return CLI_ERROR;
        }
        const char *val = argv[++i];
        if (is_problem_flag(flag) && !problem_flag) problem_flag = flag;
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
            if (strcmp(val, "bf16") == 0) p->dtype = FLASH_BF16;
            else if (strcmp(val, "fp16") == 0) p->dtype = FLASH_FP16;
            else {
                fprintf(stderr, "error: --dtype %s unsupported (supported: bf16, fp16)\n", val);
                rc = CLI_ERROR;
            }
        } else if (strcmp(flag, "--scale") == 0) {
            char *end = NULL;
            errno = 0;
            double v = strtod(val, &end);
            if (val[0] == '\0' || *end != '\0') {
                fprintf(stderr, "error: --scale expects a number, got '%s'\n", val);
                rc = CLI_ERROR;
            } else if (errno == ERANGE || !isfinite(v) || v < 0.0 || v > 3.0e38) {
                fprintf(stderr, "error: --scale %s out of range (must be > 0, or 0 for 1/sqrt(head-dim))\n", val);
                rc = CLI_ERROR;
            } else {
                p->softmax_scale = (float)v;
            }
        } else if (strcmp(flag, "--seed") == 0) {
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
            o->csv_path = val;
        } else if (strcmp(flag, "--stage") == 0) {
            o->stage_given = 1;
            if (strcmp(val, "all") == 0) o->stage = 0;
            else {
                char *end = NULL;
                long v = strtol(val, &end, 10);
                if (val[0] < '0' || val[0] > '9' || *end != '\0' || v < 1 || v > FLASH_STAGES) {
                    fprintf(stderr, "error: --stage %s invalid (expected 1..%d or all)\n", val, FLASH_STAGES);
                    rc = CLI_ERROR;
                } else {
                    o->stage = (int)v;
                }
            }
        }
        if (rc != CLI_OK) return rc;
    }

    /* Cross-flag rules. */
    const int fixed_problems = o->sweep || o->bench || o->matrix;
    const char *mode = o->matrix ? "--matrix" : o->bench ? "--bench" : "--sweep";
    if (fixed_problems && problem_flag) {
        fprintf(stderr, "error: %s cannot be combined with %s (it runs its own fixed problems)\n", problem_flag, mode);
        return CLI_ERROR;
    }
    if (!o->check && (o->bench || o->matrix)) {
        fprintf(stderr, "error: --no-check cannot be combined with %s (it always checks)\n",
                o->matrix ? "--matrix" : "--bench");
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
    int stages[FLASH_STAGES];
    if (selected_stages(o, stages) == 0) {
        fprintf(stderr, "error: --stage: no stage is linked into this binary\n");
        return CLI_ERROR;
    }
    return CLI_OK;
}

int selected_stages(const run_options *o, int *stages) {
    int n = 0;
    if (o->stage_given && o->stage > 0) {
        stages[n++] = o->stage;
    } else if (o->stage_given) {
        for (int s = 1; s <= FLASH_STAGES; s++)
            if (flash_stage_available(s)) stages[n++] = s;
    } else {
        /* Default: the most advanced stage this binary has. */
        for (int s = FLASH_STAGES; s >= 1 && n == 0; s--)
            if (flash_stage_available(s)) stages[n++] = s;
    }
    return n;
}
