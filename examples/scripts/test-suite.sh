#!/bin/sh
# test-suite.sh [TESTS] [EXIT]: a "test suite" of TESTS tests (default 5)
# that prints a progress line per test ("[3/5] test_3 ... ok"), then a
# summary, and exits with status EXIT (default 0; non-zero marks the last
# test failed), so that a caller can make it fail.
set -eu
tests=${1:-5} code=${2:-0}

echo "running $tests tests"
failed=0
i=1
while [ "$i" -le "$tests" ]; do
	verdict=ok
	if [ "$i" -eq "$tests" ] && [ "$code" -ne 0 ]; then
		verdict=FAIL failed=1
		echo "test_$i: expected 42, got 41" >&2
	fi
	echo "[$i/$tests] test_$i ... $verdict"
	i=$((i + 1))
done
echo "$((tests - failed)) passed, $failed failed"
exit "$code"
