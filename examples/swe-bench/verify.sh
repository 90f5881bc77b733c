#!/usr/bin/env bash
# Grades the instances in instances.jsonl offline, by the official SWE-bench rule, in the
# Python sandbox image with no network:
#   1. check out base_commit from repos/<owner>__<name>.bundle (only the history up to it:
#      the bundle's tag named after the instance, so later commits, the fix among them, are
#      not in the clone);
#   2. apply the gold `patch` (skipped with EMPTY=1: an empty model patch);
#   3. restore the files `test_patch` touches to base_commit, then apply `test_patch`;
#   4. run env.json's test_cmd for (repo, version) on those test files;
#   5. read per-test statuses from the `-rA` summary (a line "STATUS node-id", as the
#      official parse_log_pytest reads it) and call the instance resolved when every
#      FAIL_TO_PASS and every PASS_TO_PASS test is PASSED or XFAIL.
# Usage: verify.sh [IMAGE]        (default loopsmith/sandbox-python:local)
#        EMPTY=1 verify.sh [IMAGE]
# Prints one line per instance and a total; exits 0 when every instance resolves (gold) or
# none does (EMPTY=1), 1 otherwise. Needs bash, git, jq and docker on the host.
set -euo pipefail

image=${1:-loopsmith/sandbox-python:local}
here=$(cd "$(dirname "$0")" && pwd)
dataset=${DATASET:-$here/instances.jsonl}
repos=${REPOS:-$here/repos}
env_spec=${ENV_SPEC:-$here/env.json}
empty=${EMPTY:-0}

work=$(mktemp -d /tmp/swe-verify-XXXXXX)
trap 'rm -rf "$work"' EXIT

total=0 resolved=0
while IFS= read -r inst; do
  id=$(jq -r .instance_id <<<"$inst")
  repo=$(jq -r .repo <<<"$inst")
  base=$(jq -r .base_commit <<<"$inst")
  version=$(jq -r .version <<<"$inst")
  test_cmd=$(jq -r --arg r "$repo" --arg v "$version" '.[$r][$v].test_cmd // empty' "$env_spec")
  [ -n "$test_cmd" ] || { echo "$id: no test_cmd for ($repo, $version) in $env_spec" >&2; exit 2; }
  bundle="$repos/${repo/\//__}.bundle"

  tree="$work/$id"
  git init -q "$tree"
  git -C "$tree" fetch -q --no-tags "$bundle" "refs/tags/$id"
  git -C "$tree" -c advice.detachedHead=false checkout -q FETCH_HEAD
  [ "$(git -C "$tree" rev-parse HEAD)" = "$base" ] || { echo "$id: tag is not base_commit $base" >&2; exit 2; }

  if [ "$empty" != 1 ]; then
    jq -r .patch <<<"$inst" | git -C "$tree" apply -
  fi
  jq -r .test_patch <<<"$inst" >"$work/$id.test.diff"
  mapfile -t test_files < <(sed -n 's|^diff --git a/\([^ ]*\) b/.*|\1|p' "$work/$id.test.diff" | sort -u)
  for f in "${test_files[@]}"; do
    if git -C "$tree" cat-file -e "HEAD:$f" 2>/dev/null; then
      git -C "$tree" checkout -q HEAD -- "$f"
    else
      rm -f "$tree/$f"
    fi
  done
  git -C "$tree" apply "$work/$id.test.diff"
  chmod -R a+rX "$work"

  start=$(date +%s%N)
  # shellcheck disable=SC2086 # test_cmd is a command line, split on purpose
  docker run --rm --network none -v "$tree:/w" -w /w "$image" $test_cmd "${test_files[@]}" \
    </dev/null >"$work/$id.log" 2>&1 || true
  secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')

  # STATUS node-id [- message]  →  node-id<TAB>STATUS (the last status a node gets wins)
  awk '/^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) / { print $2 "\t" $1 }' "$work/$id.log" >"$work/$id.status"
  if [ ! -s "$work/$id.status" ]; then
    echo "$id: the test run reported no per-test status; its output:" >&2
    tail -n 20 "$work/$id.log" >&2
    exit 2
  fi
  check() { # FAIL_TO_PASS | PASS_TO_PASS → "passing/listed"
    jq -r ".$1 | fromjson | .[]" <<<"$inst" | awk -F'\t' '
      NR == FNR { s[$1] = $2; next }
      NF { n++; if (s[$0] == "PASSED" || s[$0] == "XFAIL") ok++ }
      END { print ok + 0 "/" n + 0 }' "$work/$id.status" -
  }
  f2p=$(check FAIL_TO_PASS) p2p=$(check PASS_TO_PASS)
  status=unresolved
  if [ "${f2p%/*}" = "${f2p#*/}" ] && [ "${p2p%/*}" = "${p2p#*/}" ]; then
    status=resolved resolved=$((resolved + 1))
  fi
  total=$((total + 1))
  printf '%s: %s (FAIL_TO_PASS %s, PASS_TO_PASS %s, tests %s s)\n' "$id" "$status" "$f2p" "$p2p" "$secs"
done <"$dataset"

mode=gold
[ "$empty" = 1 ] && mode=empty
echo "$mode patches: $resolved/$total resolved"
if [ "$mode" = gold ]; then [ "$resolved" = "$total" ]; else [ "$resolved" = 0 ]; fi
