#!/bin/sh
# The check of examples/self-improve: node:test tests of what services/memory/src/signature.ts
# must keep doing (check.test.ts). Spec report on stdout; when LOOPSMITH_JUNIT is set (the
# sandbox sets it), a JUnit report at that path too, so loopsmith can count the tests.
# The TypeScript loader is the sandbox's; outside it, e.g. LOOPSMITH_TS_LOADER=tsx.
set -eu
cd "$(dirname "$0")/../.."
loader="${LOOPSMITH_TS_LOADER:-/opt/loopsmith/ts-register.mjs}"
test_file=examples/self-improve/check.test.ts
if [ -n "${LOOPSMITH_JUNIT:-}" ]; then
  exec node --import "$loader" --test \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=junit --test-reporter-destination="$LOOPSMITH_JUNIT" \
    "$test_file"
fi
exec node --import "$loader" --test --test-reporter=spec --test-reporter-destination=stdout "$test_file"
