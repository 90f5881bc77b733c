#!/usr/bin/env python3
"""Checks examples/rest-api/script.json against repo/ without loopsmith.

It replays the DAG the way a scripted `loopsmith solve --decompose` run would, with the
script's own replies, and runs the tests itself (pytest, or unittest when pytest is
missing) in temporary copies of repo/:

- each subtask, in dependency order, starts from repo/ plus the changes of its
  dependencies plus its acceptance tests; those tests must fail there (nothing is built yet);
- each attempt is the task id <parent>--<subtask>-a<N>, and its replies are picked from
  `tasks` as the scripted provider picks them (a key equal to the id or to its tail
  `-<key>`, then the subtask id); build n of an attempt is the n-th entry, the last
  repeating; edits apply cumulatively, all or nothing (an empty search creates a file);
- an iteration passes when the subtask's acceptance tests pass; a failed one is followed by
  a reflection; the attempt stops after --max-iterations, or when the same failure comes
  back --stuck-after times in a row (approximating the loop's circuit breaker);
- every edit stays inside the files the subtask owns;
- at the end the whole suite (`python3 -m pytest -q`) runs on the merged tree.

Exit 0 when the story holds: every subtask passes, storage needs a second attempt, and the
merged tree passes. Standard library only: `python3 examples/rest-api/verify.py`.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def entries_for(script, task_id, role):
    """(where, entries) answering `role` for `task_id`, as shared/src/llm/scripted.ts picks them."""
    tasks = [(k, r) for k, r in (script.get("tasks") or {}).items() if r.get(role)]
    for key, replies in tasks:
        if task_id == key or task_id.endswith("-" + key):
            return f"tasks.{key}", replies[role]
    m = re.search(r"--([a-z][a-z0-9_-]{0,23})-a\d+$", task_id)
    if m:
        for key, replies in tasks:
            if key == m.group(1):
                return f"tasks.{key}", replies[role]
    return "replies", script["replies"].get(role) or []


def apply_edits(tree, edits):
    """The tree with `edits` applied (all or nothing), or (None, the first failure)."""
    out = dict(tree)
    for i, e in enumerate(edits, 1):
        path, search, replace = e["path"], e.get("search", ""), e.get("replace", "")
        if e.get("delete"):
            if path not in out:
                return None, f"edit {i} ({path}): missing_file"
            del out[path]
        elif search == "":
            if path in out:
                return None, f"edit {i} ({path}): file_exists"
            out[path] = replace
        else:
            if path not in out:
                return None, f"edit {i} ({path}): missing_file"
            n = out[path].count(search)
            if n != 1:
                return None, f"edit {i} ({path}): {'not_found' if n == 0 else 'ambiguous'}"
            out[path] = out[path].replace(search, replace)
    return out, None


def read_tree(root):
    tree = {}
    for d, _, names in os.walk(root):
        for name in names:
            full = os.path.join(d, name)
            with open(full, encoding="utf-8") as f:
                tree[os.path.relpath(full, root).replace(os.sep, "/")] = f.read()
    return tree


def has_pytest():
    return subprocess.run([sys.executable, "-c", "import pytest"], capture_output=True).returncode == 0


def run_tests(tree, paths):
    """(passed, last line of the output) of the tests at `paths` (all of them when None) in a copy of `tree`."""
    with tempfile.TemporaryDirectory(prefix="rest-api-verify-") as root:
        for path, content in tree.items():
            full = os.path.join(root, *path.split("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(content)
        if PYTEST:
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(paths or [])]
        elif paths:
            cmd = [sys.executable, "-m", "unittest", *[p[:-3].replace("/", ".") for p in paths]]
        else:
            cmd = [sys.executable, "-m", "unittest", "discover", "-s", "tests"]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=300)
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        return proc.returncode == 0, (lines[-1] if lines else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", default=os.path.join(HERE, "script.json"))
    ap.add_argument("--repo", default=os.path.join(HERE, "repo"))
    ap.add_argument("--parent", default="todo-api", help="the parent task id (--task-id of the solve command)")
    ap.add_argument("--max-iterations", type=int, default=5)
    ap.add_argument("--stuck-after", type=int, default=3)
    ap.add_argument("--attempts", type=int, default=3)
    args = ap.parse_args()

    with open(args.script, encoding="utf-8") as f:
        script = json.load(f)
    base = read_tree(args.repo)
    plan = script["replies"]["plan"][0]
    subtasks = {s["id"]: s for s in plan["subtasks"]}
    problems = []

    # The parent's own plan call must get the DagPlan, not a subtask's plan.
    where, _ = entries_for(script, args.parent, "plan")
    if where != "replies":
        problems.append(f"the parent task {args.parent} takes its plan from {where}, not replies.plan")

    order, done = [], set()
    while len(order) < len(subtasks):
        ready = [i for i, s in subtasks.items() if i not in done and all(d in done for d in s.get("dependsOn", []))]
        if not ready:
            sys.exit("the plan has a cycle or an unknown dependency")
        order.extend(ready)
        done.update(ready)

    print(f"test runner: {'pytest' if PYTEST else 'unittest (pytest is not installed)'}")
    changes, attempts_used = {}, {}
    for sid in order:
        s = subtasks[sid]
        owned = set(s["files"]) | {t["path"] for t in s.get("acceptanceTests", [])}
        start = dict(base)
        for dep in order:
            if dep in changes and dep in ancestors(subtasks, sid):
                start.update(changes[dep])
        for t in s.get("acceptanceTests", []):
            start[t["path"]] = t["content"]
        tests = [t["path"] for t in s.get("acceptanceTests", [])]
        ok, line = run_tests(start, tests)
        print(f"{sid}: before any build, {' '.join(tests)}: {line}")
        if ok:
            problems.append(f"{sid}: its acceptance tests pass before anything is built")
        for attempt in range(1, args.attempts + 1):
            task_id = f"{args.parent}--{sid}-a{attempt}"
            where, plans = entries_for(script, task_id, "plan")
            if where == "replies":
                problems.append(f"{task_id}: no tasks entry answers plan; it would get the top-level plan (the DagPlan)")
            tree, builds, reflects, last, same = start, 0, 0, None, 0
            passed = False
            for it in range(1, args.max_iterations + 1):
                where, entries = entries_for(script, task_id, "build")
                if not entries:
                    problems.append(f"{task_id}: no build replies")
                    break
                reply = entries[min(builds, len(entries) - 1)]
                label = f"{where}.build[{min(builds, len(entries) - 1)}]"
                builds += 1
                for e in reply["edits"]:
                    if e["path"] not in owned:
                        problems.append(f"{task_id}: {label} edits {e['path']}, which {sid} does not own")
                new, failure = apply_edits(tree, reply["edits"])
                if failure:
                    signature = f"edit_failed {failure}"
                    print(f"  {task_id} iteration {it}: {label} edit_failed: {failure}")
                else:
                    tree = new
                    ok, line = run_tests(tree, tests)
                    print(f"  {task_id} iteration {it}: {label} applied; {line}")
                    if ok:
                        passed = True
                        break
                    signature = f"tests_failed {line}"
                same = same + 1 if signature == last else 1
                last = signature
                if same >= args.stuck_after:
                    print(f"  {task_id}: stuck (the same failure {same} times in a row)")
                    break
                if it == args.max_iterations:
                    print(f"  {task_id}: max_iterations")
                    break
                if not failure:
                    where, entries = entries_for(script, task_id, "reflect")
                    if where == "replies":
                        problems.append(f"{task_id}: the reflection after iteration {it} would come from replies.reflect (the integration reflection)")
                    elif entries:
                        print(f"  {task_id}: {where}.reflect[{min(reflects, len(entries) - 1)}]: {entries[min(reflects, len(entries) - 1)]['rootCause'][:100]}…")
                    reflects += 1
            if passed:
                changes[sid] = {p: c for p, c in tree.items() if base.get(p) != c}
                attempts_used[sid] = attempt
                print(f"{sid}: passed on attempt {attempt}")
                break
        else:
            problems.append(f"{sid}: failed every attempt")
            break

    if len(changes) == len(subtasks):
        merged = dict(base)
        for sid in order:
            merged.update(changes[sid])
        ok, line = run_tests(merged, None)
        print(f"integration, the whole suite on the merged tree: {line}")
        if not ok:
            problems.append("the whole suite fails on the merged tree")
        reflection = (script["replies"].get("reflect") or [None])[0]
        if not reflection or reflection.get("subtaskId") not in subtasks:
            problems.append("replies.reflect[0] is not an integration reflection naming a subtask of the plan")
    if attempts_used.get("storage") != 2 or any(n != 1 for sid, n in attempts_used.items() if sid != "storage"):
        problems.append(f"expected storage to pass on attempt 2 and every other subtask on attempt 1, got {attempts_used}")

    for p in problems:
        print(f"PROBLEM: {p}")
    print("verify: ok" if not problems else f"verify: {len(problems)} problem(s)")
    return 0 if not problems else 1


def ancestors(subtasks, sid):
    seen, stack = set(), list(subtasks[sid].get("dependsOn", []))
    while stack:
        d = stack.pop()
        if d not in seen:
            seen.add(d)
            stack.extend(subtasks[d].get("dependsOn", []))
    return seen


PYTEST = has_pytest()

if __name__ == "__main__":
    sys.exit(main())
