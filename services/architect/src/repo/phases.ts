/**
 * Repo mode's parts of the loop: PREPARE (the base tree, the commands, the baseline run of
 * the repository's own checks), applying the builder's edits, the policy check before the
 * gate, the verdict's request over the base tree, and the change (patch) a task ends with.
 */
import { LoopsmithError, applyEdits, ownerOfTask, renderEditFailures, testSummary, unifiedPatch, type Candidate, type ExecutionRequest, type RepoBrief, type RepoChange, type Task } from "@loopsmith/shared";
import { failingTests } from "../failure.js";
import { MAX_SANDBOX_ERRORS, type TaskRun } from "../run.js";
import type { PhaseOutcome } from "../phases.js";
import { currentReader, detectCommands, listTree, pathsIn, promptFiles, readBaseFile } from "./context.js";
import { buildRepoMap } from "./map.js";
import { decide, policyFindings, type PolicyDecision } from "./policy.js";

/** Token budget of the files a repo-mode prompt sees in full (besides the map). */
export const REPO_FILES_TOKENS = 24_000;

/** The repository part of a task (asserting it is a repo-mode task). */
export function repoOf(task: Task): NonNullable<Task["repo"]> {
  if (!task.repo) throw new LoopsmithError("internal", `task ${task.taskId} is not a repo-mode task`);
  return task.repo;
}

/** The task's base tree on disk: its snapshot from its owner's store (fetched once per owner and commit). */
function baseTree(run: TaskRun): Promise<string> {
  return run.steps.tree(repoOf(run.s.task).snapshot, ownerOfTask(run.s.task));
}

/** A reader of the task's base tree: a file's text at the base commit, undefined when it is not there. */
export async function baseReader(run: TaskRun): Promise<(path: string) => string | undefined> {
  const root = await baseTree(run);
  return (path) => readBaseFile(root, path);
}

/** A verdict's request: the candidate's changed files over the base tree, the repository's command. */
export function repoExecution(run: TaskRun, step: string, candidate: Candidate | undefined, attempt = run.s.sandboxErrors): ExecutionRequest {
  const s = run.s;
  const repo = repoOf(s.task);
  return {
    ...run.executionRequest(step, candidate?.files ?? [], undefined, attempt),
    base: { snapshot: repo.snapshot, owner: ownerOfTask(s.task), commit: repo.baseCommit, deleted: candidate?.deleted ?? [], setupCommand: s.repo?.setupCommand ?? "" },
    shell: s.repo?.testCommand ?? repo.testCommand ?? "",
  };
}

/**
 * PREPARE: the base tree is fetched (once per commit), the commands detected when the task
 * did not give them, and the repository's checks run once on the base commit: the failing
 * tests there are what the task starts from. A command the sandbox does not have stops the
 * task before any model is called (`command_not_found`).
 */
export async function preparePhase(run: TaskRun): Promise<PhaseOutcome> {
  const repo = repoOf(run.s.task);
  await run.emit("phase", `preparing the repository at ${repo.baseCommit.slice(0, 12)}`, { phase: "prepare" });
  let root: string;
  try {
    root = await baseTree(run);
  } catch (err) {
    const e = err instanceof LoopsmithError ? err : new LoopsmithError("internal", (err as Error).message, { cause: err });
    if (e.retryable) throw err;
    return run.stop("error", `stopped: ${e.message}`, e);
  }
  const files = listTree(root);
  const detected = detectCommands(files, (p) => readBaseFile(root, p));
  const testCommand = repo.testCommand ?? detected.testCommand;
  if (!testCommand) {
    return run.stop("error", "stopped: no test command was given and none was detected (no pytest configuration or test_*.py files, no package.json test script); give one with --test-cmd", new LoopsmithError("bad_request", "no test command"));
  }
  const setupCommand = repo.setupCommand ?? detected.setupCommand;
  await run.emit("step", `${files.length} files; tests: ${testCommand}${repo.testCommand ? "" : ` (detected: ${detected.why})`}; setup: ${setupCommand || "none"}`, { phase: "prepare", data: { files: files.length, testCommand, setupCommand } });
  run.s = { ...run.s, repo: { testCommand, setupCommand, failingAtBase: [], baseStatus: "unknown" } };
  let result = await run.steps.execute(repoExecution(run, "baseline", undefined, 0));
  for (let attempt = 1; result.status === "sandbox_error" && attempt < MAX_SANDBOX_ERRORS; attempt++) {
    await run.emit("warning", `the sandbox failed on the baseline run (${result.reason ?? "unknown"}); trying again`, { phase: "prepare" });
    result = await run.steps.execute(repoExecution(run, "baseline", undefined, attempt));
  }
  if (result.status === "sandbox_error") return run.stop("error", `stopped: the sandbox failed ${MAX_SANDBOX_ERRORS} times on the baseline run: ${result.reason ?? ""}`, new LoopsmithError("sandbox_error", result.reason ?? "sandbox failure"));
  if (result.status === "command_not_found") {
    return run.stop("error", `stopped: the test command is not found in the sandbox: ${result.reason ?? testCommand}`, new LoopsmithError("command_not_found", `${testCommand}: ${result.reason ?? "command not found"}`));
  }
  if (result.setup?.status === "failed") await run.emit("warning", `the setup command failed; the tests run without it: ${result.setup.message ?? ""}`, { phase: "prepare" });
  const failing = failingTests(result);
  const counts = testSummary(result);
  await run.emit("step", `baseline at ${repo.baseCommit.slice(0, 12)}: ${result.status} (${counts.total} tests, ${failing.length} failing${failing.length ? `: ${failing.slice(0, 10).join(", ")}` : ""}; ${Math.round(result.durationMs)} ms)`, {
    phase: "prepare",
    data: { status: result.status, failingTests: failing.slice(0, 100), summary: counts, setup: result.setup },
  });
  await run.go("recall", { repo: { testCommand, setupCommand, failingAtBase: failing.slice(0, 200), baseStatus: result.status } });
  return undefined;
}

/**
 * What a repo-mode prompt sees: the repo map ranked toward the goal, the failing tests and
 * the plan's files, and those files in full (with the files the last failure's output names).
 */
export async function repoBrief(run: TaskRun): Promise<RepoBrief> {
  const s = run.s;
  const repo = repoOf(s.task);
  const root = await baseTree(run);
  const files = listTree(root);
  const failing = s.failure?.failingTests.length ? s.failure.failingTests : (s.repo?.failingAtBase ?? []);
  const named = pathsIn([...failing, s.failure?.output ?? "", s.task.goal], files);
  const focusFiles = [...(s.plan?.files ?? []), ...named];
  const focusSymbols = failing.flatMap((t) => t.split(/[^A-Za-z0-9_]+/)).filter((w) => w.length > 2 && !/^test_?$/.test(w));
  const map = await buildRepoMap({ root, commit: repo.baseCommit, files, goal: s.task.goal, focusFiles, focusSymbols, maxTokens: repo.mapTokens, cacheDir: run.steps.cacheDir });
  return {
    ...(repo.name ? { name: repo.name } : {}),
    map: map.text,
    files: promptFiles(currentReader(root, s.candidate), focusFiles, REPO_FILES_TOKENS),
    testCommand: s.repo?.testCommand ?? repo.testCommand ?? "",
    failingAtBase: s.repo?.failingAtBase ?? [],
  };
}

/**
 * Applies a repo-mode builder reply (its `edits`) to the current tree (the base with the
 * previous candidate's changes: edits are cumulative, as the prompt shows the files). The
 * new candidate holds every file changed against the base, in full, and the deleted paths.
 * When any edit fails nothing is applied: the candidate keeps the previous tree (with the
 * failed edits, for the builder to see) and the failures come back rendered.
 */
export async function applyCandidate(run: TaskRun, reply: Candidate): Promise<{ ok: boolean; candidate: Candidate; message?: string }> {
  const root = await baseTree(run);
  const previous = run.s.candidate;
  const read = currentReader(root, previous);
  const applied = applyEdits(reply.edits ?? [], read, { root });
  const kept = { files: previous?.files ?? [], deleted: previous?.deleted ?? [] };
  if (!applied.ok) return { ok: false, candidate: { ...reply, ...kept, tests: [] }, message: renderEditFailures(applied.failures) };
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
  const changed = [...files].filter(([p, c]: [string, string]) => readBaseFile(root, p) !== c).map(([path, content]) => ({ path, content }));
  return { ok: true, candidate: { ...reply, files: changed.sort((a, b) => a.path.localeCompare(b.path)), deleted: [...deleted].sort(), tests: [] } };
}

/**
 * The policy decision on the current candidate (runner configuration, dependencies), and the
 * diff of the files it is about (what a person approving, or the builder, is shown).
 */
export async function policyOf(run: TaskRun): Promise<{ decision: PolicyDecision; diff: string }> {
  const repo = repoOf(run.s.task);
  const root = await baseTree(run);
  const c = run.s.candidate;
  const read = (p: string): string | undefined => readBaseFile(root, p);
  const decision = decide(policyFindings(c?.files ?? [], c?.deleted ?? [], read), repo.dependencies);
  if (decision.action === "run") return { decision, diff: "" };
  const about = new Set(decision.paths);
  return { decision, diff: unifiedPatch(read, (c?.files ?? []).filter((f) => about.has(f.path)), (c?.deleted ?? []).filter((p) => about.has(p))) };
}

/** The change of the current candidate against the base commit (undefined before any candidate was applied). */
export async function repoChange(run: TaskRun): Promise<RepoChange | undefined> {
  const repo = repoOf(run.s.task);
  const c = run.s.candidate;
  if (!c || (c.files.length === 0 && (c.deleted?.length ?? 0) === 0)) return undefined;
  const root = await baseTree(run);
  const deleted = c.deleted ?? [];
  return {
    baseCommit: repo.baseCommit,
    patch: unifiedPatch((p) => readBaseFile(root, p), c.files, deleted),
    summary: c.summary ?? c.notes.split("\n")[0] ?? "",
    changed: c.files.map((f) => f.path),
    deleted,
  };
}
