# tests/lib.sh: the few helpers every test script shares. Source it, report with ok / bad / skip,
# and end with `finish`:
#
#   . "$(dirname "$0")/lib.sh"
#   ok "name"                 -> PASS: name
#   bad "name" "why"          -> FAIL: name: why
#   skip "name" "why"         -> SKIP: name: why
#   finish                    -> "<script>: N passed, N failed, N skipped"; status 1 if any failed
#
# tests/run_tests.sh counts the PASS:/FAIL:/SKIP: lines of every suite.

n_pass=0 n_fail=0 n_skip=0
ok()   { echo "PASS: $1"; n_pass=$((n_pass + 1)); }
bad()  { echo "FAIL: $1: $2"; n_fail=$((n_fail + 1)); }
skip() { echo "SKIP: $1: $2"; n_skip=$((n_skip + 1)); }
finish() {
    echo "$(basename "$0"): $n_pass passed, $n_fail failed, $n_skip skipped"
    [ "$n_fail" -eq 0 ]
}
