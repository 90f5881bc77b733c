/**
 * A repo-mode task's tree as its run sees it, from the task's state and the base tree on
 * disk (`Steps.tree`): the sandbox request over the base, what a prompt sees (map and files),
 * the builder's edits applied, the policy decision before the gate, and the change (patch) a
 * task ends with. No events and no checkpoints: the phases (`repo/phases.ts`, `phases.ts`)
 * and the run (`run.ts`) call these and report.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { applyEdits, renderEditFailures, unifiedPatch } from "@loopsmith/shared/workspace";
import { ownerOfTask } from "@loopsmith/shared/bus";
import {
  type Candidate,
  type ExecutionRequest,
  type RepoBrief,
  type RepoChange,
  type Task,
} from "@loopsmith/shared/contracts";
import { executionRequest } from "../requests.js";
import type { TaskState } from "../state.js";
import type { Steps } from "../steps.js";
import { currentReader, listTree, pathsIn, promptFiles, readBaseFile } from "./context.js";
import { readInstructions } from "./instructions.js";
import { buildRepoMap } from "./map.js";
import { decide, policyFindings, type PolicyDecision } from "./policy.js";

/** Where the base trees come from (`Steps.tree`), and where the repo map's tags are cached. */
export type TreeSource = Pick<Steps, "tree" | "cacheDir">;

/** Token budget of the files a repo-mode prompt sees in full (besides the map). */
export const REPO_FILES_TOKENS = 24_000;

/** The repository part of a task (asserting it is a repo-mode task). */
export function repoOf(task: Task): NonNullable<Task["repo"]> {
  if (!task.repo) throw new LoopsmithError("internal", `task ${task.taskId} is not a repo-mode task`);
  return task.repo;
}

/** The task's base tree on disk: its snapshot from its owner's store (fetched once per owner and commit). */
export function baseTree(s: TaskState, trees: TreeSource): Promise<string> {
  return trees.tree(repoOf(s.task).snapshot, ownerOfTask(s.task));
}

/** A reader of the task's base tree: a file's text at the base commit, undefined when it is not there. */
export async function baseReader(s: TaskState, trees: TreeSource): Promise<(path: string) => string | undefined> {
  const root = await baseTree(s, trees);
  return (path) => readBaseFile(root, path);
}

/** A verdict's request: the candidate's changed files over the base tree, the repository's command. */
export function repoExecution(
  s: TaskState,
  step: string,
  candidate: Candidate | undefined,
  attempt: number,
): ExecutionRequest {
  const repo = repoOf(s.task);
  return {
    ...executionRequest(s, step, candidate?.files ?? [], undefined, attempt),
    base: {
      snapshot: repo.snapshot,
      owner: ownerOfTask(s.task),
      commit: repo.baseCommit,
      deleted: candidate?.deleted ?? [],
      setupCommand: s.repo?.setupCommand ?? "",
    },
    shell: s.repo?.testCommand ?? repo.testCommand ?? "",
    ...(repo.image ? { image: repo.image } : {}),
  };
}

/**
 * What a repo-mode prompt sees: the repo map ranked toward the goal, the failing tests and
 * the plan's files, and those files in full (with the files the last failure's output names),
 * and the project instructions of the base commit (`AGENTS.md`, else `CONVENTIONS.md`,
 * bounded: `readInstructions`).
 */
export async function repoBrief(s: TaskState, trees: TreeSource): Promise<RepoBrief> {
  const repo = repoOf(s.task);
  const root = await baseTree(s, trees);
  const files = listTree(root);
  const failing = s.failure?.failingTests.length ? s.failure.failingTests : (s.repo?.failingAtBase ?? []);
  const named = pathsIn([...failing, s.failure?.output ?? "", s.task.goal], files);
  const focusFiles = [...(s.plan?.files ?? []), ...named];
  const focusSymbols = failing
    .flatMap((t) => t.split(/[^A-Za-z0-9_]+/))
    .filter((w) => w.length > 2 && !/^test_?$/.test(w));
  const instructions = readInstructions(root);
  const map = await buildRepoMap({
    root,
    commit: repo.baseCommit,
    files,
    goal: s.task.goal,
    focusFiles,
    focusSymbols,
    maxTokens: repo.mapTokens,
    cacheDir: trees.cacheDir,
  });
  return {
    ...(repo.name ? { name: repo.name } : {}),
    map: map.text,
    files: promptFiles(currentReader(root, s.candidate), focusFiles, REPO_FILES_TOKENS),
    testCommand: s.repo?.testCommand ?? repo.testCommand ?? "",
    failingAtBase: s.repo?.failingAtBase ?? [],
    ...(instructions ? { instructions } : {}),
  };
}

/**
 * Applies a repo-mode builder reply (its `edits`) to the current tree (the base with the
 * previous candidate's changes: edits are cumulative, as the prompt shows the files). The
 * new candidate holds every file changed against the base, in full, and the deleted paths.
 * When any edit fails nothing is applied: the candidate keeps the previous tree (with the
 * failed edits, for the builder to see) and the failures come back rendered.
 */
export async function applyCandidate(
  s: TaskState,
  trees: TreeSource,
  reply: Candidate,
): Promise<{ ok: boolean; candidate: Candidate; message?: string }> {
  const root = await baseTree(s, trees);
  const previous = s.candidate;
  const read = currentReader(root, previous);
  const applied = applyEdits(reply.edits ?? [], read, { root });
  const kept = { files: previous?.files ?? [], deleted: previous?.deleted ?? [] };
  if (!applied.ok)
    return { ok: false, candidate: { ...reply, ...kept, tests: [] }, message: renderEditFailures(applied.failures) };
  // Against the base: the previous changes, this reply's on top; a file back to its base text is no change.
  const files = new Map(kept.files.map((f) => [f.path, f.content]));
  const deleted = new Set(kept.deleted);
  for (const f of applied.changed) {
    files.set(f.path, f.content);
    deleted.delete(f.path);
  }
  for (const p of applied.deleted) {
    files.delete(p);
    if (readBaseFile(root, p) !== undefined) deleted.add(p);
  }
  const changed = [...files]
    .filter(([p, c]: [string, string]) => readBaseFile(root, p) !== c)
    .map(([path, content]) => ({ path, content }));
  return {
    ok: true,
    candidate: {
      ...reply,
      files: changed.sort((a, b) => a.path.localeCompare(b.path)),
      deleted: [...deleted].sort(),
      tests: [],
    },
  };
}

/**
 * The policy decision on the current candidate (runner configuration, dependencies), and the
 * diff of the files it is about (what a person approving, or the builder, is shown).
 */
export async function policyOf(s: TaskState, trees: TreeSource): Promise<{ decision: PolicyDecision; diff: string }> {
  const repo = repoOf(s.task);
  const root = await baseTree(s, trees);
  const c = s.candidate;
  const read = (p: string): string | undefined => readBaseFile(root, p);
  const decision = decide(policyFindings(c?.files ?? [], c?.deleted ?? [], read), repo.dependencies);
  if (decision.action === "run") return { decision, diff: "" };
  const about = new Set(decision.paths);
  return {
    decision,
    diff: unifiedPatch(
      read,
      (c?.files ?? []).filter((f) => about.has(f.path)),
      (c?.deleted ?? []).filter((p) => about.has(p)),
    ),
  };
}

/** The change of the current candidate against the base commit (undefined before any candidate was applied). */
export async function repoChange(s: TaskState, trees: TreeSource): Promise<RepoChange | undefined> {
  const repo = repoOf(s.task);
  const c = s.candidate;
  if (!c || (c.files.length === 0 && (c.deleted?.length ?? 0) === 0)) return undefined;
  const root = await baseTree(s, trees);
  const deleted = c.deleted ?? [];
  return {
    baseCommit: repo.baseCommit,
    patch: unifiedPatch((p) => readBaseFile(root, p), c.files, deleted),
    summary: c.summary ?? c.notes.split("\n")[0] ?? "",
    changed: c.files.map((f) => f.path),
    deleted,
  };
}
