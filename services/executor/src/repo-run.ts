/**
 * What a run executes, decided before a container is taken: the command (default, argv, or
 * a `shell` line), its environment, and in repo mode the workspace archive built from the
 * base tree and the setup layer to mount.
 */
import { readFileSync } from "node:fs";
import { posix } from "node:path";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { assetPath, hasCode, type Config } from "@loopsmith/shared/runtime";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { type ExecutionRequest, type ExecutionResult } from "@loopsmith/shared/contracts";
import {
  commandEnv,
  customCommand,
  defaultCommand,
  kindOf,
  nodeTestFiles,
  RESULT_PATH,
  type ImageKind,
  type Runner,
} from "./commands.js";
import { isManifest, repoArchive, type ArchiveLimits } from "./repo.js";
import { inodesFor, WORKSPACE, type SandboxSpec } from "./sandbox.js";
import type { ExtraEntry } from "./archive.js";
import { layerEnv, layerMount, setupKey } from "./layer.js";
import type { SetupLayers, SetupOutcome } from "./setup.js";
import { PYTEST_ADDOPTS, shellArgv } from "./shell.js";
import { integrityEnv, planIntegrity, tripwireEntries, type IntegrityPlan } from "./integrity.js";

const MiB = 1024 * 1024;
/** The setup container's workspace tmpfs is at least this big, MiB (setup.ts gives it as much). */
const SETUP_TMPFS_MB = 512;

/** How one run goes. */
export interface RunPlan {
  argv: string[];
  runner: Runner;
  /** The command's whole environment (the allowlist, plus what repo mode adds). */
  env: Record<string, string>;
  /** Repo mode: the workspace archive, built from disk. Absent: built from the request's files. */
  archive?: Buffer;
  /** The setup layer's mount; a run with mounts needs a container of its own (not a warm one). */
  mounts?: Docker.MountSettings[];
  /** The `shell` line of a shell run (its outcome is adjusted by `shellOutcome`). */
  shell?: string;
  /** The setup layer's outcome, when the request has a setup command. */
  setup?: SetupOutcome;
  /**
   * The run's verdict key and tripwires (integrity.ts), when its runner reports through the
   * verdict channel: loopsmith's own pytest and node commands, and a shell line (for any
   * pytest it runs). The tripwire file is already in `archive` when there is one.
   */
  integrity?: IntegrityPlan;
  /** A session must report (loopsmith's own commands); false for a shell line. */
  integrityRequired?: boolean;
  /**
   * Files written outside the workspace with it: the tripwires, and in an image of the task's
   * own the verdict plugin (`shippedEntries`). Already in `archive` when there is one.
   */
  extra?: ExtraEntry[];
  /** The container's spec: the warm pool's, or for a task's own image ({@link specOfRequest}) its own. */
  spec: SandboxSpec;
  /** The request names an image other than the pool's: its run needs a container of its own. */
  ownImage?: boolean;
}

/** Where loopsmith's pytest plugin goes in a task's own image (on `PYTHONPATH`, outside the workspace). */
export const SHIPPED_PY_DIR = "/tmp/.loopsmith/py";

/** loopsmith's pytest plugin, as installed with the application (deploy/rootfs). */
const VERDICT_PLUGIN = assetPath("deploy", "rootfs", "sandbox-python", "loopsmith_verdict.py");
let pluginSource: Buffer | undefined;

/**
 * What a run in a task's own image brings with it, since the image has none of loopsmith's
 * parts: the pytest verdict plugin, written beside the tripwires, found through `PYTHONPATH`.
 * @throws Error when the installation lacks the plugin file
 */
export function shippedEntries(): ExtraEntry[] {
  pluginSource ??= readFileSync(VERDICT_PLUGIN);
  return [{ path: `${SHIPPED_PY_DIR}/loopsmith_verdict.py`, content: pluginSource, mode: 0o444 }];
}

/**
 * The sandbox spec of a request: the warm pool's of its language, or, when the request names
 * an image other than the pool's, that image with its workdir (a container of its own).
 */
export function specOfRequest(
  req: Pick<ExecutionRequest, "language" | "image">,
  pool: SandboxSpec,
): { spec: SandboxSpec; own: boolean } {
  if (!req.image || (req.image.name === pool.image && req.image.workdir === WORKSPACE))
    return { spec: pool, own: false };
  return { spec: { ...pool, image: req.image.name, workdir: req.image.workdir }, own: true };
}

/**
 * Adds the verdict channel and tripwires to a plan whose runner reports through it: the
 * default pytest and node commands (a session is then required) and a Python shell line
 * (any pytest it runs reports; a line that runs none has no session). Node's tripwire module
 * wrappers replace the test files in the argv; pytest's plugin finds its module through the
 * environment.
 */
function withIntegrity(plan: RunPlan, req: ExecutionRequest): RunPlan {
  const runner =
    plan.shell !== undefined
      ? req.language === "python"
        ? "pytest"
        : undefined
      : plan.runner === "custom"
        ? undefined
        : plan.runner;
  if (!runner) return plan;
  // node: the files the default command gives the runner (commands.ts).
  const integrity = planIntegrity(
    runner,
    runner === "node" ? (req.tests ?? nodeTestFiles(req.files, req.language)) : [],
  );
  return {
    ...plan,
    // node: the runner is given each test file's wrapper instead of the file (the argv's tail).
    argv:
      runner === "node"
        ? [...plan.argv.slice(0, plan.argv.length - integrity.testFiles.length), ...integrity.files.map((f) => f.path)]
        : plan.argv,
    env: { ...plan.env, ...integrityEnv(integrity) },
    integrity,
    integrityRequired: plan.shell === undefined,
  };
}

/** A plan, or why the run cannot happen: `blocked` (the request's fault) or `error` (infrastructure). */
export type Prepared = { plan: RunPlan } | { blocked: string } | { error: string };

/** What {@link planRun} needs from the executor. */
export interface PlanContext {
  docker: Docker;
  config: Config;
  log: Logger;
  layers: SetupLayers;
  /** The sandbox spec of an image kind (the warm pool's). */
  specFor: (kind: ImageKind) => SandboxSpec;
  /** The extracted base tree of a snapshot; absent when the executor has no snapshot store. */
  loadBase?: (snapshot: string, owner: string) => Promise<string>;
}

/** The workspace tmpfs of `tmpfsMb` as archive limits (bytes in pages, and inodes). */
export function limitsOf(tmpfsMb: number): ArchiveLimits {
  return { maxBytes: tmpfsMb * MiB, maxEntries: inodesFor(tmpfsMb) };
}

/** The result's `setup` field: the outcome without the volume name. */
export function setupField(s: SetupOutcome): NonNullable<ExecutionResult["setup"]> {
  return { key: s.key, status: s.status, durationMs: s.durationMs, ...(s.message ? { message: s.message } : {}) };
}

/**
 * The plan of a request before its workspace: the command (a shell script, a custom
 * command, or the language's test runner), its environment, its integrity checks, and the
 * files shipped beside the workspace (tripwires; for a task's own Python image, the shipped
 * modules).
 */
function commandPlan(req: ExecutionRequest, kind: ImageKind, spec: SandboxSpec, own: boolean): RunPlan {
  const plan: RunPlan = withIntegrity(
    req.shell
      ? {
          argv: shellArgv(req.shell, req.image?.prologue),
          runner: "custom",
          env: {
            ...commandEnv(req.language),
            PYTEST_ADDOPTS,
            LOOPSMITH_JUNIT: RESULT_PATH,
            ...(own && kind === "python" ? { PYTHONPATH: SHIPPED_PY_DIR } : {}),
          },
          shell: req.shell,
          spec,
        }
      : req.command
        ? { argv: customCommand(req.language, req.command), runner: "custom", env: commandEnv(req.language), spec }
        : { ...defaultCommand(req.language, req.files, req.tests, { wholeWorkspace: !req.base }), spec },
    req,
  );
  if (own) plan.ownImage = true;
  plan.extra = [
    ...(plan.integrity ? tripwireEntries(plan.integrity) : []),
    ...(own && kind === "python" ? shippedEntries() : []),
  ];
  return plan;
}

/**
 * Plans a run. Without `base`: the request's files, and `shell` (as `sh -c`, pytest writing
 * JUnit through `PYTEST_ADDOPTS`; any other runner may write it to `$LOOPSMITH_JUNIT`), `command` or the language's default command. With
 * `base`: the base tree from `loadBase`, minus `deleted`, overlaid by `files`, packed from
 * disk under the workspace tmpfs's limits; then, when `base.setupCommand` is not blank, the
 * setup layer of its key (built once; a failure leaves the run without it).
 * @throws LoopsmithError `cancelled` when `signal` aborts while a setup layer is awaited;
 *   engine errors (inspecting the image)
 */
export async function planRun(req: ExecutionRequest, ctx: PlanContext, signal?: AbortSignal): Promise<Prepared> {
  const kind = kindOf(req.language);
  const { spec, own } = specOfRequest(req, ctx.specFor(kind));
  if (own && kind !== "python" && spec.workdir !== WORKSPACE)
    return { blocked: `an image's own workdir (${spec.workdir}) is supported for Python tasks only` };
  const plan = commandPlan(req, kind, spec, own);
  const base = req.base;
  if (!base) return { plan };
  if (!ctx.loadBase)
    return {
      error:
        "this executor has no snapshot store (it was created without a NATS connection), so it cannot run over a repository's base tree",
    };
  let treeDir: string;
  try {
    treeDir = await ctx.loadBase(base.snapshot, ownerOfTask(base));
  } catch (err) {
    return { error: `cannot read the repository snapshot ${base.snapshot}: ${(err as Error).message}` };
  }
  const resultDir = posix.dirname(RESULT_PATH);
  const tmpfsMb = ctx.config.executor.tmpfsMb;
  try {
    const started = performance.now();
    const extra = plan.extra;
    const built = await repoArchive(
      { treeDir, deleted: base.deleted, files: req.files },
      { resultDir, limits: limitsOf(tmpfsMb), extra, log: ctx.log },
    );
    ctx.log.debug(
      { files: built.files, bytes: built.bytes, ms: Math.round(performance.now() - started) },
      "repo workspace packed",
    );
    plan.archive = built.archive;
    const setupCommand = base.setupCommand ?? "";
    if (!setupCommand.trim()) return { plan };
    const imageId = (await ctx.docker.getImage(spec.image).inspect()).Id;
    const key = setupKey({ imageId, commit: base.commit, setupCommand, manifests: built.manifests });
    // The layer is a function of its key: the base tree with the changed manifests only.
    const manifestsOnly = {
      treeDir,
      deleted: base.deleted.filter(isManifest),
      files: req.files.filter((f) => isManifest(f.path)),
    };
    const setupLimits = limitsOf(Math.max(tmpfsMb, SETUP_TMPFS_MB));
    plan.setup = await ctx.layers.ensure({
      key,
      kind,
      spec,
      setupCommand,
      memoryMb: req.memoryMb,
      ...(signal ? { signal } : {}),
      archive: async (extra) =>
        (await repoArchive(manifestsOnly, { resultDir, limits: setupLimits, extra, log: ctx.log })).archive,
    });
    if (plan.setup.volume) {
      plan.mounts = [layerMount(kind, plan.setup.volume, true)];
      plan.env = { ...plan.env, ...layerEnv(kind) };
    }
    return { plan };
  } catch (err) {
    if (hasCode(err, "workspace_invalid")) return { blocked: err.message };
    throw err;
  }
}
