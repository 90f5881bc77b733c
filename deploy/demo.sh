#!/usr/bin/env bash
# The main job, right after `git clone`: solve the bundled example task end to end
# (examples/roman). With ANTHROPIC_API_KEY set it asks Claude; without it, the scripted
# provider replays examples/roman/script.json, and every line of output says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/prepare.sh >&2
args=(solve --file examples/roman/task.json)
if [ -z "${ANTHROPIC_API_KEY:-}" ] && [ -z "${LOOPSMITH_PROVIDER:-}" ]; then
  echo "demo: no ANTHROPIC_API_KEY set, so this run is SCRIPTED: replies come from examples/roman/script.json, not from a model." >&2
  args+=(--provider scripted --script examples/roman/script.json)
fi
exec node cli/bin/loopsmith.js "${args[@]}" "$@"
