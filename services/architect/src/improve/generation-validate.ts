/**
 * What a generation works in and its VALIDATE phase: the parent tree with its check command,
 * protected paths and judging code ({@link prepareWorkspace}); then the candidate's change
 * screened for tampering and a failed check ({@link screenChange}) and held to the guards and
 * the parent's test counts ({@link validateCandidate}).
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { isTestFile } from "@loopsmith/shared/workspace";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { type CheckCounts, type GenerationReport, type Hypothesis, type TaskResult } from "@loopsmith/shared/contracts";
import { detectCommands, listTree, readBaseFile } from "../repo/context.js";
import { checkCounts, runCommand, type CommandContext, type Overlay } from "./commands.js";
import { protectedGlobs, testCountViolation, validateChange } from "./guards.js";
import { judgingCode } from "./judging-code.js";
import { candidateFiles } from "../tree.js";
import { diffStat } from "./tree.js";
import { evaluationNames } from "../tampering.js";
import { changeTampering } from "./tampering.js";
import { rejected, type GenerationOutcome, type GenerationRun } from "./generation-record.js";

/** The parent tree a generation works in, and what it is checked by. */
export interface Workspace {
  /** The directory holding the parent's tree. */
  root: string;
  /** The tree's files, and every directory above one. */
  files: string[];
  fileSet: ReadonlySet<string>;
  dirs: ReadonlySet<string>;
  /** A file of the parent tree (undefined: absent). */
  read(path: string): string | undefined;
  /** The run's check command (given, or detected in the tree). */
  check: string;
  /** The paths a generation may not change. */
  globs: string[];
  /** On loopsmith itself, its judging code in the parent tree: path → text. */
  code: Map<string, string>;
  ctx: CommandContext;
}

/** The candidate's change as a report shows it, with the hypothesis. */
export type ChangePart = Pick<GenerationReport, "change" | "hypothesis">;

/** A candidate that passed VALIDATE: its change, its overlay on the parent, the check's counts. */
export interface Validated {
  change: NonNullable<TaskResult["repo"]>;
  /** The report's parts so far: the change, the hypothesis and the check on both sides. */
  checkPart: ChangePart & Pick<GenerationReport, "check">;
  parentCheck: CheckCounts;
  overlay: Overlay;
}

/**
 * Existing test files the check runs that the candidate changed. The check runs the test
 * files under the paths its command line names (`pytest -q tests` → `tests/`), or every
 * test file when it names none (`npm test`, `python3 -m pytest -q`).
 */
export function checkedTestsEdited(
  changed: readonly string[],
  check: string,
  files: ReadonlySet<string>,
  dirs: ReadonlySet<string>,
): string[] {
  const named = check
    .split(/\s+/)
    .map((w) => w.replace(/^['"]|['"]$/g, "").replace(/^\.\//, ""))
    .filter((w) => files.has(w) || dirs.has(w));
  const isTest = (p: string): boolean =>
    isTestFile(p, "python") || isTestFile(p, "javascript") || isTestFile(p, "typescript");
  return changed.filter(
    (p) => files.has(p) && isTest(p) && (named.length === 0 || named.some((n) => p === n || p.startsWith(`${n}/`))),
  );
}

/**
 * The parent tree with its check command, protected paths and (on loopsmith itself) judging
 * code. Ends the run (`fatal`, reason `error`) when there is no check command or the judging
 * code cannot be read.
 */
export async function prepareWorkspace(g: GenerationRun): Promise<{ ws: Workspace } | { outcome: GenerationOutcome }> {
  const { state, deps } = g;
  const { request } = state;
  const s = request.settings;
  const root = await deps.tree(state.parent.snapshot, ownerOfTask(request));
  const files = listTree(root);
  const read = (path: string): string | undefined => readBaseFile(root, path);
  const detected = detectCommands(files, read);
  const check = s.check ?? detected.testCommand;
  if (!check) {
    const message = "no check command: give --check (no pytest or npm test setup was found in the repository)";
    return { outcome: { ...rejected(g, "error", message), fatal: true } };
  }
  const fileSet = new Set(files);
  const dirs = new Set(
    files.flatMap((f) =>
      f
        .split("/")
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join("/")),
    ),
  );
  const globs = protectedGlobs({
    self: request.self,
    extra: s.protected,
    commands: s.bench !== undefined ? [s.bench, check] : [check],
    exists: (p) => (fileSet.has(p) ? "file" : dirs.has(p) ? "dir" : undefined),
  });
  // On loopsmith itself, the judging code and what it imports, in the parent tree: moved code stays protected.
  let code = new Map<string, string>();
  if (request.self) {
    try {
      code = judgingCode({ files, read });
    } catch (err) {
      if (!(err instanceof LoopsmithError)) throw err;
      return { outcome: { ...rejected(g, "error", err.message), fatal: true } };
    }
  }
  const ctx: CommandContext = {
    execute: deps.execute,
    request,
    taskId: g.taskId,
    generation: g.n,
    setupCommand: request.repo.setupCommand ?? detected.setupCommand ?? "",
  };
  return { ws: { root, files, fileSet, dirs, read, check, globs, code, ctx } };
}

/**
 * VALIDATE, first: the task's change, rejected when there is none (`no_change`,
 * `implement_failed`), when it tampers with the evaluation (whatever its check said), when the
 * sandbox saw the check's run forged (`tampering`) or when the check did not pass.
 * @returns the change with its report part, or the generation's outcome
 */
export async function screenChange(
  g: GenerationRun,
  ws: Workspace,
  hypothesis: Hypothesis,
  result: TaskResult,
): Promise<{ change: NonNullable<TaskResult["repo"]>; changePart: ChangePart } | { outcome: GenerationOutcome }> {
  const s = g.state.request.settings;
  const change = result.repo;
  if (!change || (!change.changed.length && !change.deleted.length)) {
    const passed = result.status === "passed";
    const what = passed ? "changed nothing" : `ended ${result.status} (${result.stopReason}) without a change`;
    const message = `the task ${what}: ${result.message}`;
    return { outcome: rejected(g, passed ? "no_change" : "implement_failed", message, { hypothesis }) };
  }
  const { summary, patch, changed, deleted } = change;
  const changePart = { change: { summary, patch, changed, deleted, stat: diffStat(patch) }, hypothesis };
  const tampered = await changeTampering(g.deps.gate, {
    taskId: g.taskId,
    generation: g.n,
    language: g.state.request.language,
    patch,
    deleted,
    read: ws.read,
    evaluation: evaluationNames([s.bench, ws.check], [s.benchJunit]),
  });
  if (tampered) return { outcome: rejected(g, tampered.reason, tampered.message, changePart) };
  // The sandbox saw the check's run forged (tripwires, an early exit, unsigned results: docs/SANDBOX.md).
  if (result.lastExecution?.status === "tampering") {
    const message = `the check's verdict on the candidate cannot be trusted (the sandbox saw its results forged): ${result.message}`;
    return { outcome: rejected(g, "tampering", message, changePart) };
  }
  if (result.status !== "passed") {
    const message = `the check \`${ws.check}\` did not pass on the candidate: ${result.message}`;
    return { outcome: rejected(g, "check_failed", message, changePart) };
  }
  return { change, changePart };
}

/**
 * VALIDATE: the guards on the change (protected paths, tests, thresholds, dependencies), the
 * check's tests left as they are, then the check's test counts on the candidate against the
 * parent's (measured once per parent: `state.parentCheck` when known).
 * @returns the validated candidate, or the generation's outcome
 * @throws LoopsmithError from the executor call measuring the parent's check
 */
export async function validateCandidate(
  g: GenerationRun,
  ws: Workspace,
  screened: { change: NonNullable<TaskResult["repo"]>; changePart: ChangePart },
  result: TaskResult,
): Promise<Validated | { outcome: GenerationOutcome }> {
  const { state } = g;
  const { change, changePart } = screened;
  const violation = validateChange(
    { patch: change.patch, changed: change.changed, deleted: change.deleted },
    { globs: ws.globs, code: ws.code, dependencies: state.request.settings.dependencies },
  );
  if (violation)
    return {
      outcome: {
        ...rejected(g, violation.reason, violation.message, changePart),
        ...(state.parentCheck ? { parentCheck: state.parentCheck } : {}),
      },
    };
  // The tests the check runs are its ground truth: a candidate may add tests, not rewrite them.
  const rewritten = checkedTestsEdited(change.changed, ws.check, ws.fileSet, ws.dirs);
  if (rewritten.length) {
    const message = `the candidate edits existing test files the check runs (${rewritten.slice(0, 5).join(", ")}); a generation may add tests but not change the ones it is checked by`;
    return { outcome: rejected(g, "protected", message, changePart) };
  }
  const parentCheck =
    state.parentCheck ?? checkCounts(await runCommand(ws.ctx, "check_parent", ws.check, state.parent, undefined, 0));
  const candidateCheck = result.lastExecution ? checkCounts(result.lastExecution) : undefined;
  const checkPart = {
    ...changePart,
    check: { command: ws.check, parent: parentCheck, ...(candidateCheck ? { candidate: candidateCheck } : {}) },
  };
  const counted = candidateCheck ? testCountViolation(parentCheck, candidateCheck) : undefined;
  if (counted) return { outcome: { ...rejected(g, counted.reason, counted.message, checkPart), parentCheck } };
  return { change, checkPart, parentCheck, overlay: candidateFiles(change, ws.read) };
}
