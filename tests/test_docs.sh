#!/usr/bin/env bash
# The prose and the data agree: tools/results_md.py --check regenerates every generated block,
# figure and kernel header from the committed CSVs and compares; tests/lint_docs.py finds figures
# typed by hand, words from how the project is run rather than for its readers, and chapters that
# do not link the blog series.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
PYTHON=${PYTHON:-python3}
if "$PYTHON" tools/results_md.py --check >"$BUILD/docs_check.log" 2>&1; then
    ok "README, docs and kernel headers match the committed CSVs (tools/results_md.py --check)"
else
    bad "README, docs and kernel headers match the committed CSVs" "$(head -5 "$BUILD/docs_check.log" | tr '\n' ' ')"
fi
"$PYTHON" tests/lint_docs.py
finish
