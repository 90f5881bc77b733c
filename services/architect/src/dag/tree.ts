/**
 * The trees of a DAG task. A subtask starts from the base tree with, in dependency order,
 * each passed dependency's contribution: its acceptance tests (files it added to its own
 * start tree) and its change (the child task's unified patch against that tree). The
 * integration run checks the base with every subtask's contribution. Start trees are new
 * snapshots in the owner's object store, named by tree id like an improvement run's trees.
 */
import {
  snapshotName,
  type DagPlan,
  type FileChange,
  type Subtask,
  type SubtaskState,
} from "@loopsmith/shared/contracts";
import { candidateFiles, candidateSnapshot } from "../tree.js";

/** Files changed against the base, in full, and the base paths removed. */
export interface TreeChange {
  files: FileChange[];
  deleted: string[];
}

/**
 * The base tree plus the contributions of `passed` (in the order given, dependencies first)
 * and, last, `extra` files (a subtask's own acceptance tests).
 * @param read - the base tree's file text, or undefined when it has no such file
 * @throws LoopsmithError `internal` when a subtask's patch does not apply (it was made against another tree)
 */
export function composeTree(
  plan: DagPlan,
  passed: readonly SubtaskState[],
  read: (path: string) => string | undefined,
  extra: readonly FileChange[] = [],
): TreeChange {
  const files = new Map<string, string>();
  const deleted = new Set<string>();
  const current = (p: string): string | undefined => (deleted.has(p) ? undefined : (files.get(p) ?? read(p)));
  const put = (f: FileChange): void => {
    files.set(f.path, f.content);
    deleted.delete(f.path);
  };
  const planned = new Map(plan.subtasks.map((s) => [s.id, s]));
  for (const state of passed) {
    for (const t of planned.get(state.id)?.acceptanceTests ?? []) put(t);
    if (!state.change?.patch && !state.change?.deleted.length) continue;
    const applied = candidateFiles({ patch: state.change.patch, deleted: state.change.deleted }, current);
    for (const f of applied.files) put(f);
    for (const p of applied.deleted) {
      files.delete(p);
      if (read(p) !== undefined) deleted.add(p);
    }
  }
  for (const f of extra) put(f);
  // A file back to its base text is no change.
  const changed = [...files].filter(([p, c]) => read(p) !== c).map(([path, content]) => ({ path, content }));
  return { files: changed.sort((a, b) => a.path.localeCompare(b.path)), deleted: [...deleted].sort() };
}

/**
 * The start tree of a subtask as a snapshot: the base tar with its dependencies' contributions
 * and its own acceptance tests. `put` stores it (kept when a tree of that id exists).
 * @returns the tree id (64 hex digits, a `CommitId`) and the snapshot's name
 */
export async function subtaskTree(
  plan: DagPlan,
  subtask: Subtask,
  base: readonly SubtaskState[],
  io: {
    baseTar: Uint8Array;
    read: (path: string) => string | undefined;
    put: (name: string, tar: Uint8Array) => Promise<void>;
  },
): Promise<{ commit: string; snapshot: string }> {
  const change = composeTree(plan, base, io.read, subtask.acceptanceTests);
  const { tar, id } = await candidateSnapshot(io.baseTar, change.files, change.deleted);
  const name = snapshotName(id);
  await io.put(name, tar);
  return { commit: id, snapshot: name };
}

/** Quotes a path for `sh -c`. */
function shellQuote(path: string): string {
  return /^[A-Za-z0-9_./-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`;
}

/**
 * The test command of a subtask's child task: its own acceptance tests only (the rest of the
 * project may not exist yet), with the runner of the language: `python3 -m pytest -q <tests>`,
 * `node --test <tests>` (JavaScript); the task's own command when the subtask has no tests,
 * and for TypeScript (how a repository runs its TypeScript tests is its own business).
 */
export function subtaskTestCommand(language: string, subtask: Subtask, taskCommand: string): string {
  const paths = subtask.acceptanceTests.map((t) => shellQuote(t.path));
  if (!paths.length) return taskCommand;
  if (language === "python") return `python3 -m pytest -q ${paths.join(" ")}`;
  if (language === "javascript") return `node --test ${paths.join(" ")}`;
  return taskCommand;
}
