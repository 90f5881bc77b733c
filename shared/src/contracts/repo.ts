/**
 * Repo mode: a task that changes an existing git repository. The client resolves the base
 * commit and puts a snapshot of its tracked files (a tar, no `.git`, nothing ignored) in the
 * `loopsmith-repos` object store; every service reads the tree from there, so the stack never
 * needs the user's checkout. The builder answers with search/replace edits, not whole files.
 */
import { z } from "zod";
import { FileChange, RelativePath } from "./common.js";
import { ProjectInstructions } from "./instructions.js";
import { RepoApprovals } from "./approval.js";
import { DEPENDENCY_POLICIES, REPO_MODES } from "./values.js";

/** A full git object id (SHA-1, 40 hex; SHA-256, 64 hex), lower case. */
export const CommitId = z
  .string()
  .regex(/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/, "a full commit id (40 or 64 lower-case hex digits)");
export type CommitId = z.infer<typeof CommitId>;

/**
 * What to do with a candidate that changes a dependency manifest (`requirements*.txt`,
 * `pyproject.toml`, `setup.py`, `setup.cfg`, `package.json`, lock files):
 * `reject` blocks it at the gate (the builder is told why); `ask` stops the task with the
 * change shown (`needs_approval`) so a person decides; `allow` runs it, with a setup layer
 * built for the changed manifests.
 */
export const DependencyPolicy = z.enum(DEPENDENCY_POLICIES);
export type DependencyPolicy = z.infer<typeof DependencyPolicy>;

/** Name of the object that holds the snapshot of `commit` in the `loopsmith-repos` store. */
export function snapshotName(commit: string): string {
  return `tree-${commit}.tar`;
}

/** How a repo task's model works: agent mode's tool loop, or one-shot edits. */
export type RepoMode = (typeof REPO_MODES)[number];

/**
 * The mode a repo task runs in: its `repo.mode` when set; otherwise `agent` (the default for
 * repo tasks), except for a task whose script replays one-shot builds (`build`
 * replies and no `agent` turns, in `replies` or any `tasks` entry): a script written for
 * one-shot mode replays in it, so recorded runs and examples keep their meaning.
 */
export function repoModeOf(task: {
  repo?: { mode?: RepoMode | undefined } | undefined;
  script?: { kind: string; replies?: object; tasks?: Record<string, object> } | undefined;
}): RepoMode {
  if (task.repo?.mode) return task.repo.mode;
  const script = task.script;
  if (!script) return "agent";
  if (script.kind !== "loopsmith-script") return "oneshot";
  const sets = [script.replies ?? {}, ...Object.values(script.tasks ?? {})] as { build?: unknown; agent?: unknown }[];
  const builds = sets.some((r) => r.build !== undefined);
  const turns = sets.some((r) => r.agent !== undefined);
  return builds && !turns ? "oneshot" : "agent";
}

/**
 * An image reference as Docker names one: `[registry[:port]/]name[:tag][@digest]`, lower-case
 * path components (`swebench/sweb.eval.x86_64.django_1776_django-11099:latest`).
 */
export const ImageRef = z
  .string()
  .max(255)
  .regex(
    /^(?:[a-z0-9.-]+(?::\d+)?\/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$/,
    "an image reference such as loopsmith/sandbox-python:local or swebench/sweb.eval.x86_64.<id>:latest",
  );

/**
 * The sandbox image a repo task (and each of its runs and session containers) runs in, when it
 * is not loopsmith's image of the language (`images.python` / `images.node`): the same
 * hardening, in a container of its own.
 * - `name`: the image; a missing one is pulled where the engine reaches a registry, else
 *   loaded from the archive `LOOPSMITH_SANDBOX_IMAGES` names, else the run fails naming it.
 * - `workdir`: where the workspace is mounted (an empty tmpfs that hides whatever the image
 *   has there, its `.git` included) and commands start. @defaultValue "/workspace"
 * - `prologue`: shell lines run before the test command, in the same `bash -c` (the SWE-bench
 *   images' `source /opt/miniconda3/bin/activate && conda activate testbed`).
 * Python only for a `workdir` other than `/workspace`.
 */
export const SandboxImage = z.object({
  name: ImageRef,
  workdir: z
    .string()
    .regex(/^\/[A-Za-z0-9._-]+$/, "one directory under / such as /testbed")
    .refine((p) => !["/tmp", "/proc", "/sys", "/dev", "/etc", "/opt", "/usr", "/bin", "/lib"].includes(p), {
      message: "a directory the sandbox needs as it is",
    })
    .default("/workspace"),
  prologue: z.string().min(1).max(2_000).optional(),
});
export type SandboxImage = z.infer<typeof SandboxImage>;

/** The repository a task works on. */
export const RepoSpec = z.object({
  /** The commit the task starts from, resolved by the client (never a branch name). */
  baseCommit: CommitId,
  /**
   * Object in the `loopsmith-repos` object store: a POSIX tar of the tracked files at
   * `baseCommit`, paths relative to the repository root. By convention {@link snapshotName}.
   */
  snapshot: z.string().min(1).max(255),
  /** A label for reports: the repository's directory name or URL. */
  name: z.string().max(500).optional(),
  /**
   * The repository's own test command, run with `sh -c` at the workspace root in the sandbox,
   * network off. Absent: detected from the tree (`pytest -q` / `npm test`).
   */
  testCommand: z.string().min(1).max(4_000).optional(),
  /**
   * Installs the dependencies, once per base commit (and manifest content), network limited
   * to the package registries. Absent: detected (`pip install -e .` / `npm ci`); `""` skips it.
   */
  setupCommand: z.string().max(4_000).optional(),
  /** @defaultValue "reject" */
  dependencies: DependencyPolicy.default("reject"),
  /** With `dependencies: "ask"`: who answers, and the allowlists that approve ahead of time (`approval.ts`). */
  approvals: RepoApprovals.optional(),
  /** Token budget of the repo map in a prompt (about 4 characters a token). @defaultValue 2048 */
  mapTokens: z.number().int().min(256).max(32_000).default(2_048),
  /**
   * How the model works on the repository: `agent` explores with tools in a bounded loop
   * (list, read, search, symbol, run, edit, submit) before the verdict; `oneshot` answers with
   * edits in one call from the files picked up front (cheaper on small fixes). Absent: see
   * {@link repoModeOf} (agent, unless the task's script was written for one-shot builds).
   */
  mode: z.enum(REPO_MODES).optional(),
  /**
   * Wall-clock limit of one run of the repository's tests, in ms, as the user gave it
   * (`solve --test-timeout`). Absent: PREPARE times the baseline run and derives the limit
   * from it ({@link runLimitFromBaseline}), with `limits.runTimeoutMs` as the floor.
   */
  testTimeoutMs: z.number().int().min(100).max(600_000).optional(),
  /** The image its runs and session containers run in; absent: loopsmith's image of the language. */
  image: SandboxImage.optional(),
});
export type RepoSpec = z.infer<typeof RepoSpec>;

/** Limit of the baseline run when the user gave no test timeout, in ms (the SWE-bench harness's test run limit). */
export const BASELINE_LIMIT_MS = 300_000;

/** The run limit is this many times the baseline run's wall time (headroom for a loaded machine and a slower candidate). */
export const RUN_LIMIT_MULTIPLE = 3;

/**
 * A repo task's run limit from its baseline run: {@link RUN_LIMIT_MULTIPLE} times the
 * baseline's wall time, rounded up to a whole second, never under `floorMs` (the task's
 * `limits.runTimeoutMs`, 30 s by default) nor over 600 s (the contract's largest run). A
 * baseline that timed out, or did not run, says nothing about the suite: the limit is then
 * the baseline's own limit (at least the floor).
 * @param baseline.durationMs - the baseline command's wall time, ms
 * @param baseline.timedOut - the baseline run ended `timeout`
 * @param baselineLimitMs - the limit the baseline ran under, ms
 * @param floorMs - the smallest limit, ms
 * @returns the limit of every later run of the task, ms
 */
export function runLimitFromBaseline(
  baseline: { durationMs: number; timedOut: boolean },
  baselineLimitMs: number,
  floorMs: number,
): number {
  const ceiling = 600_000;
  if (baseline.timedOut || !(baseline.durationMs > 0)) return Math.min(ceiling, Math.max(floorMs, baselineLimitMs));
  const derived = Math.ceil((baseline.durationMs * RUN_LIMIT_MULTIPLE) / 1000) * 1000;
  return Math.min(ceiling, Math.max(floorMs, derived));
}

/**
 * One search/replace edit. `search` is exact text of the file that must occur exactly once;
 * it becomes `replace`. An empty `search` creates the file (which must not exist) with
 * `replace` as its content; `delete: true` removes the file.
 */
export const Edit = z.object({
  path: RelativePath,
  search: z.string().max(200_000).default(""),
  replace: z.string().max(500_000).default(""),
  delete: z.boolean().default(false),
});
export type Edit = z.infer<typeof Edit>;

/** The builder's reply in repo mode. `summary` becomes the commit message's first line. */
export const EditReply = z.object({
  summary: z.string().min(1).max(500),
  edits: z.array(Edit).min(1).max(50),
  notes: z.string().max(4_000).default(""),
});
export type EditReply = z.infer<typeof EditReply>;

/** Why an edit could not be applied. */
export const EditFailureReason = z.enum([
  "not_found", // `search` is not in the file
  "ambiguous", // `search` occurs more than once
  "missing_file", // the file to edit or delete does not exist
  "file_exists", // an empty `search` names a file that exists
  "path_escape", // the path leaves the repository (`..`, absolute, through a symlink) or enters `.git`
]);
export type EditFailureReason = z.infer<typeof EditFailureReason>;

/** A typed edit failure, fed back to the builder. `nearest` quotes the closest lines of the file. */
export const EditFailure = z.object({
  index: z.number().int().nonnegative(),
  path: z.string(),
  reason: EditFailureReason,
  message: z.string(),
  nearest: z.string().optional(),
});
export type EditFailure = z.infer<typeof EditFailure>;

/** The repository as a prompt sees it: the map, and the files the planner picked, in full. */
export const RepoBrief = z.object({
  name: z.string().optional(),
  /** The ranked repo map, cut to the task's `mapTokens`. */
  map: z.string(),
  /** Full text of the picked files (and of the failing tests' files). */
  files: z.array(FileChange),
  testCommand: z.string(),
  /** Tests failing at the base commit, before any change. */
  failingAtBase: z.array(z.string()).default([]),
  /**
   * The repository's project instructions (`AGENTS.md`, else `CONVENTIONS.md`, at its root
   * in the base commit), bounded; absent when it has neither. Every prompt that shows the
   * task shows them (`renderInstructions`).
   */
  instructions: ProjectInstructions.optional(),
});
export type RepoBrief = z.infer<typeof RepoBrief>;

/** The change a repo-mode task made, in its result. */
export const RepoChange = z.object({
  baseCommit: CommitId,
  /** Unified diff against `baseCommit` (`git apply` reads it), `a/` and `b/` prefixes. */
  patch: z.string(),
  /** The model's one-line summary of the change (the commit message's subject). */
  summary: z.string(),
  changed: z.array(z.string()),
  deleted: z.array(z.string()),
});
export type RepoChange = z.infer<typeof RepoChange>;
