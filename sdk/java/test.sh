#!/bin/sh
# Builds the jar, compiles the tests against it, and runs unit, wire-vector
# and end-to-end tests (the latter against the local stack in .run/env).
# Prints "ok  sdk/java" or "FAIL sdk/java"; exits non-zero on failure.
# Arguments go to the runner: -unit (no stack), -run SUBSTRING, -bench.
cd "$(dirname "$0")" || exit 1
fail() {
	echo "FAIL sdk/java"
	exit 1
}
./build.sh || fail
if [ -z "${THREATVIEW_COLLECTOR_URL:-}" ] && [ -f ../../.run/env ]; then
	set -a
	. ../../.run/env
	set +a
fi
rm -rf build/test-classes
mkdir -p build/test-classes
javac --release 8 -encoding UTF-8 -cp build/threatview-sdk.jar -d build/test-classes $(find test -name '*.java' | sort) || fail
java -Xmx256m -cp build/threatview-sdk.jar:build/test-classes -Dthreatview.testdata=../testdata \
	com.threatview.sdk.TestMain "$@" || fail
echo "ok  sdk/java"
