/*
 * csv.c: append-only CSV writing with a header check. C11 and stdio, plus POSIX stat/access for
 * the up-front check that the file can be written at all.
 */
#define _POSIX_C_SOURCE 200809L  /* stat, access, open: -std=c11 hides POSIX otherwise */

#include "csv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Reads the first line of `path` into line[linelen] (without its newline). Returns 1 when the file
 * exists and is non-empty, 0 when it is absent or empty, -1 when it cannot be read. */
static int first_line(const char *path, char *line, size_t linelen, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (!fgets(line, (int)linelen, f)) {
        fclose(f);
        return 0;  /* empty file */
    }
    fclose(f);
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    return 1;
}

/* A new file at `path` can be created when its directory exists and we may write into it. The
 * directory is everything before the last '/', or "." without one. 0, or -1 with err. */
static int can_create(const char *path, char *err, size_t errlen) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) >= sizeof dir) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    } else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);

    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            snprintf(err, errlen, "cannot create %s: no such directory %s", path, dir);
        else
            snprintf(err, errlen, "cannot create %s: directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot create %s: %s is not a directory", path, dir);
        return -1;
    }
    /* Write to add the entry, search (x) to reach it. root passes this on any permissions, as the
     * later fopen would; a read-only file system still fails (EROFS). */
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "cannot create %s in directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    return 0;
}

int csv_preflight(const char *path, char *err, size_t errlen) {
    /* Everything that would make the first append fail is checked here, before the run spends
     * minutes on the GPU: a directory, a missing directory, no permission, a foreign header. The
     * file itself is neither created nor changed. */
    const size_t len = strlen(path);
    if (len == 0) {
        snprintf(err, errlen, "the file name is empty");
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT) {  /* e.g. ENOTDIR: a file where the path needs a directory */
            snprintf(err, errlen, "cannot use %s: %s", path, strerror(errno));
            return -1;
        }
        if (path[len - 1] == '/') {  /* "out/": fopen could only ever make a directory of it */
            snprintf(err, errlen, "%s names a directory, not a file", path);
            return -1;
        }
        return can_create(path, err, errlen);
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is a directory, not a file", path);
        return -1;
    }
    /* An existing file: opening it for append (without O_CREAT, and closing it, writing nothing)
     * is the exact test of what csv_append will do; contents and modification time stay as they
     * are. */
    const int fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0) {
        snprintf(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        return -1;
    }
    close(fd);

    char line[1024];
    int rc = first_line(path, line, sizeof line, err, errlen);
    if (rc <= 0) return rc;  /* empty (0: fine) or unreadable (-1) */
    if (strcmp(line, CSV_HEADER) != 0) {
        snprintf(err, errlen,
                 "%s exists with a different header; refusing to append (expected: %s)", path, CSV_HEADER);
        return -1;
    }
    return 0;
}

/* Appends `s` to buf at *pos, quoted per RFC 4180 when it holds a comma, quote or newline. */
static int put_field(char *buf, size_t buflen, size_t *pos, const char *s, int first) {
    const int quote = strpbrk(s, ",\"\r\n") != NULL;
    size_t need = strlen(s) * 2 + 3 + (first ? 0 : 1);  /* worst case: every char a doubled quote */
    if (*pos + need >= buflen) return -1;
    if (!first) buf[(*pos)++] = ',';
    if (quote) buf[(*pos)++] = '"';
    for (const char *c = s; *c; c++) {
        if (*c == '"') buf[(*pos)++] = '"';
        buf[(*pos)++] = *c;
    }
    if (quote) buf[(*pos)++] = '"';
    buf[*pos] = '\0';
    return 0;
}

int csv_format_row(const csv_row *r, char *buf, size_t buflen) {
    /* The numeric fields, formatted first; an empty string leaves the column empty. */
    char f[12][32];
    for (int i = 0; i < 12; i++) f[i][0] = '\0';
    if (r->has_problem) {
        snprintf(f[0], sizeof f[0], "%d", r->batch);
        snprintf(f[1], sizeof f[1], "%d", r->heads_q);
        snprintf(f[2], sizeof f[2], "%d", r->heads_kv);
        snprintf(f[3], sizeof f[3], "%d", r->seqlen_q);
        snprintf(f[4], sizeof f[4], "%d", r->seqlen_k);
        snprintf(f[5], sizeof f[5], "%d", r->head_dim);
        snprintf(f[6], sizeof f[6], "%d", r->causal);
    }
    snprintf(f[7], sizeof f[7], "%d", r->iters);
    snprintf(f[8], sizeof f[8], "%.4f", r->ms_median);
    snprintf(f[9], sizeof f[9], "%.4f", r->ms_min);
    snprintf(f[10], sizeof f[10], "%.2f", r->tflops);
    char err_abs[32] = "", err_rel[32] = "";
    if (r->has_errors) {
        snprintf(err_abs, sizeof err_abs, "%.3e", r->max_abs_err);
        snprintf(err_rel, sizeof err_rel, "%.3e", r->rel_l2_err);
    }
    const char *fields[20] = {r->gpu,  r->kernel, r->name,  r->dtype, f[0],    f[1],    f[2],
                              f[3],    f[4],      f[5],     f[6],     f[7],    f[8],    f[9],
                              f[10],   err_abs,   err_rel,  r->check, r->commit, r->date};
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < 20; i++)
        if (put_field(buf, buflen, &pos, fields[i] ? fields[i] : "", i == 0) != 0) return -1;
    return (int)pos;
}

int csv_append(const char *path, const csv_row *row, char *err, size_t errlen) {
    char line[2048];
    if (csv_format_row(row, line, sizeof line) < 0) {
        snprintf(err, errlen, "CSV row for %s too long", path);
        return -1;
    }
    /* Check again right before writing: the file may have changed since the run started. */
    char first[1024];
    int has = first_line(path, first, sizeof first, err, errlen);
    if (has < 0) return -1;
    if (has && strcmp(first, CSV_HEADER) != 0) {
        snprintf(err, errlen, "%s exists with a different header; refusing to append", path);
        return -1;
    }
    /* A file whose last line lacks its newline (an editor, an interrupted write) would glue our
     * row onto it; give it the newline first. */
    int need_newline = 0;
    if (has) {
        FILE *r = fopen(path, "rb");
        if (r && fseek(r, -1, SEEK_END) == 0 && fgetc(r) != '\n') need_newline = 1;
        if (r) fclose(r);
    }
    FILE *f = fopen(path, "ab");
    if (!f) {
        snprintf(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        return -1;
    }
    int bad = 0;
    if (need_newline) bad |= fputc('\n', f) == EOF;
    if (!has) bad |= fprintf(f, "%s\n", CSV_HEADER) < 0;
    bad |= fprintf(f, "%s\n", line) < 0;
    bad |= fclose(f) != 0;
    if (bad) {
        snprintf(err, errlen, "writing %s failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void utc_now_iso8601(char buf[21]) {
    time_t now = time(NULL);
    struct tm *t = gmtime(&now);  /* one thread: the static buffer of gmtime is fine */
    if (!t || strftime(buf, 21, "%Y-%m-%dT%H:%M:%SZ", t) == 0) strcpy(buf, "1970-01-01T00:00:00Z");
}
