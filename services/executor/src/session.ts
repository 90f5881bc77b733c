/**
 * Agent mode's sessions: one sandbox container kept for one task attempt, and a
 * host-side copy of the candidate tree beside it.
 *
 * - **The container** has the verdict run's confinement (`createOptions`: no network, the
 *   memory, CPU and pids limits, seccomp, no capabilities, read-only root file system with
 *   tmpfs `/workspace` and `/tmp`, the setup layer mounted read-only when the base has a
 *   setup command). Its main process is `cat`, run as `nobody` (uid 65534) and reading the
 *   executor's attach connection: when the executor dies, the engine closes that stdin, `cat`
 *   ends and so does the container, which any executor's leftovers sweep then removes
 *   (leftovers.ts) as a stopped container of another executor.
 *   Each `run` is a `docker exec` of `sh -c <command>` as the sandbox user (uid 10001) at
 *   `/workspace`, with the verdict run's environment allowlist (and the layer's variables).
 * - **A run's slot**: each `run` holds one of the executor's slots (`deps.slots`, the limiter
 *   verdict runs take, `executor.concurrency`) while its command runs; it waits for one past
 *   the queue bound, and the wait counts against the run's timeout.
 * - **A run's end**: when the command exits, every other process of the sandbox user is
 *   killed (`kill -9 -1`), as a verdict run's supervisor does: nothing a run starts in the
 *   background outlives it. A run past its timeout is ended the same way, from a second exec;
 *   `cat` (another uid) survives, so the container and its workspace stay.
 * - **The host copy** (`<sessions dir>/<id>-…/x/workspace`) is the candidate: the base tree,
 *   the candidate's files over it, its deletions gone, then every `write`. `list`, `read` and
 *   `search` read it (session-tools.ts), never the container, so what a `run` wrote there
 *   (build output, an edited file) is not seen by them: the candidate is what gets judged, in
 *   a fresh container, and the model must `edit` to change it.
 * - **Life**: `open` replaces a session of the same id (an architect that resumed); a session
 *   with no call for {@link SESSION_IDLE_MS} is closed; `closeAll` (the executor's stop) closes
 *   every one. A killed executor closes nothing: its containers end with its attach connection
 *   and its host copies stay until an executor's sweep (`removeLeftovers`, `removeSessionDirs`
 *   in leftovers.ts) removes both.
 */
import { mkdir, mkdtemp, realpath, rm, unlink, writeFile, lstat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { LoopsmithError, busyError, hasCode, type Config } from "@loopsmith/shared/runtime";
import { extractTar } from "@loopsmith/shared/bus";
import {
  type ExecutorToolName,
  type SessionCall,
  type SessionObservation,
  type SessionOpen,
  type SessionOpened,
} from "@loopsmith/shared/contracts";
import { workspaceArchive } from "./archive.js";
import { RESULT_PATH, type ImageKind } from "./commands.js";
import { LABEL_SESSION } from "./leftovers.js";
import type { Limiter } from "./limiter.js";
import { NEVER_FROM_TREE } from "./repo.js";
import { planRun, type PlanContext, type RunPlan } from "./repo-run.js";
import { WORKSPACE, type SandboxSpec } from "./sandbox.js";
import type { TaskImages } from "./task-images.js";
import { execIn, startSessionContainer, type ExecOutcome } from "./session-exec.js";
import { extractArgv } from "./bootstrap.js";
import { shellArgv } from "./shell.js";
import { limitsOf } from "./result.js";
import { listTree, readLines, resolveInside, searchTree, ToolRefusal, type ToolAnswer } from "./session-tools.js";

/** A session with no call for this long is closed, ms (30 min). */
export const SESSION_IDLE_MS = 30 * 60_000;
/** How often idle sessions are looked for, ms. */
const EXPIRY_EVERY_MS = 60_000;
/** Where a session's extraction puts the JUnit directory (as a verdict run's archive does). */
const RESULT_DIR = dirname(RESULT_PATH);
const MiB = 1024 * 1024;

/** What {@link SessionManager} needs from its executor. */
export interface SessionDeps extends Omit<PlanContext, "specFor"> {
  config: Config;
  log: Logger;
  /** The executor's instance id: the replica's subject token, named in {@link SessionOpened.executorId}. */
  instanceId: string;
  /** The executor's labels (`LABEL` = its instance id, host, pid). */
  labels: Record<string, string>;
  /** The sandbox spec of an image kind (the verdict run's). */
  specFor: (kind: ImageKind) => SandboxSpec;
  /** Where the host copies live (this executor's own directory; removed on `closeAll`). */
  dir: string;
  /** @defaultValue SESSION_IDLE_MS */
  idleMs?: number;
  /** Most sessions held at once; one more is refused busy. @defaultValue 4 × executor.concurrency */
  maxSessions?: number;
  /**
   * The executor's slots (the limiter verdict runs take, `executor.concurrency`): each `run`
   * holds one while its command runs, so agents cannot oversubscribe the machine. Absent: runs
   * are not limited (tests of the manager alone).
   */
  slots?: Pick<Limiter, "acquire">;
  /** Brings a task's own image onto the engine (the executor's, shared with verdict runs). */
  images: Pick<TaskImages, "ensure">;
}

/** One open session. */
interface Session {
  id: string;
  container: Docker.Container;
  /** The attach connection whose end ends the container. */
  attach: Duplex;
  /** The session's host directory (removed on close). */
  dir: string;
  /** The host copy of the candidate tree (a real path). */
  root: string;
  env: string[];
  /** Where the workspace is in the container (`/workspace`, or the image's own workdir). */
  workdir: string;
  /** The image's shell lines before each `run` (`SandboxImage.prologue`), run by bash. */
  prologue?: string;
  timeoutMs: number;
  /** The container's spec (its limits: {@link limitsOf}). */
  spec: SandboxSpec;
  lastUsed: number;
  /** Calls run one at a time, in arrival order. */
  queue: Promise<unknown>;
  closed: boolean;
}

/** The call of one session tool. */
type CallOf<T extends SessionCall["call"]["tool"]> = Extract<SessionCall["call"], { tool: T }>;

/** What a session tool answers: the observation but its duration (and `totalBytes`, the output's own length by default). */
type Answer = ToolAnswer & Partial<Omit<SessionObservation, "durationMs" | "output" | "ok">>;

const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number }).statusCode;

/**
 * The sessions of one executor replica. Calls to an id it does not hold throw `not_found`.
 */
/**
 * Extracts the workspace archive in a session container, as the sandbox user, at `workdir`.
 * @throws LoopsmithError `sandbox_error` when the extraction fails (its output's last 2,000 characters)
 */
async function putWorkspace(
  deps: SessionDeps,
  container: Docker.Container,
  env: string[],
  archive: Buffer,
  workdir: string,
): Promise<void> {
  const put = await execIn(
    deps.docker,
    container,
    env,
    extractArgv(workdir),
    { stdin: archive, timeoutMs: 120_000, workdir },
    deps.log,
  );
  if (put.exitCode !== 0)
    throw new LoopsmithError(
      "sandbox_error",
      `cannot put the workspace in the session container: ${put.output.toString("utf8").slice(-2_000)}`,
    );
}

export class SessionManager {
  private readonly sessions = new Map<string, Session>();
  private readonly opening = new Map<string, Promise<SessionOpened>>();
  private readonly idleMs: number;
  private readonly maxSessions: number;
  private expiry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly deps: SessionDeps) {
    this.idleMs = deps.idleMs ?? SESSION_IDLE_MS;
    this.maxSessions = deps.maxSessions ?? 4 * deps.config.executor.concurrency;
  }

  /** Sessions open now. */
  get size(): number {
    return this.sessions.size;
  }

  /** Starts closing idle sessions (every minute, or sooner for a short `idleMs`). */
  start(): void {
    if (this.expiry || this.stopped) return;
    this.expiry = setInterval(() => void this.expire(), Math.min(EXPIRY_EVERY_MS, Math.max(50, this.idleMs / 4)));
    this.expiry.unref();
  }

  /** Closes the sessions idle for longer than `idleMs`. */
  async expire(now = Date.now()): Promise<void> {
    const idle = [...this.sessions.values()].filter((s) => now - s.lastUsed > this.idleMs);
    await Promise.all(
      idle.map(async (s) => {
        this.deps.log.info({ sessionId: s.id }, "closing an idle session");
        await this.close(s.id);
      }),
    );
  }

  /**
   * Opens a session (replacing one of the same id): the workspace materialized on the host and
   * extracted into a new session container.
   * @throws LoopsmithError `unavailable` (busy `full`) when this replica holds its most
   *   sessions, `unavailable` when it is stopping, `workspace_invalid` when a path escapes the
   *   workspace or it passes the tmpfs, `sandbox_error` when the base tree cannot be read or
   *   the engine fails
   */
  async open(req: SessionOpen): Promise<SessionOpened> {
    const running = this.opening.get(req.sessionId);
    if (running) await running.catch(() => undefined);
    const work = this.openOnce(req);
    this.opening.set(req.sessionId, work);
    try {
      return await work;
    } finally {
      if (this.opening.get(req.sessionId) === work) this.opening.delete(req.sessionId);
    }
  }

  private async openOnce(req: SessionOpen): Promise<SessionOpened> {
    if (this.stopped) throw new LoopsmithError("unavailable", "the executor is stopping: open the session elsewhere");
    const started = performance.now();
    await this.close(req.sessionId);
    if (this.sessions.size >= this.maxSessions)
      throw busyError(`this executor holds ${this.sessions.size} sessions, its most`, "full");
    const { deps } = this;
    const plan = await planSession(req, deps);
    const archive = plan.archive as Buffer;
    // The host copy: the same archive the container gets, extracted (links out of the tree are already dropped).
    await mkdir(deps.dir, { recursive: true });
    const dir = await mkdtemp(join(deps.dir, `${req.sessionId}-`));
    let container: Docker.Container | undefined;
    let attach: Duplex | undefined;
    try {
      const extracted = await extractTar(archive, join(dir, "x"));
      const top = join(dir, "x", "workspace");
      await mkdir(top, { recursive: true });
      const root = await realpath(top);
      if (plan.ownImage) {
        const missing = await deps.images.ensure(plan.spec.image);
        if (missing) throw new LoopsmithError("sandbox_error", missing, { retryable: false });
      }
      const workdir = plan.spec.workdir ?? WORKSPACE;
      const spec: SandboxSpec = {
        ...plan.spec,
        memoryBytes: req.memoryMb * MiB,
        labels: { ...deps.labels, [LABEL_SESSION]: req.sessionId },
        ...(plan.mounts ? { mounts: plan.mounts } : {}),
      };
      ({ container, attach } = await startSessionContainer(deps.docker, spec));
      const env = Object.entries(plan.env).map(([k, v]) => `${k}=${v}`);
      await putWorkspace(deps, container, env, archive, workdir);
      const session: Session = {
        id: req.sessionId,
        container,
        attach,
        dir,
        root,
        env,
        workdir,
        ...(req.image?.prologue ? { prologue: req.image.prologue } : {}),
        timeoutMs: req.timeoutMs,
        spec,
        lastUsed: Date.now(),
        queue: Promise.resolve(),
        closed: false,
      };
      this.sessions.set(req.sessionId, session);
      if (this.stopped) {
        await this.close(req.sessionId);
        throw new LoopsmithError("unavailable", "the executor is stopping: open the session elsewhere");
      }
      deps.log.info(
        { sessionId: req.sessionId, container: container.id.slice(0, 12), files: extracted.files.length },
        "session opened",
      );
      return {
        sessionId: req.sessionId,
        executorId: deps.instanceId,
        files: extracted.files.length,
        durationMs: performance.now() - started,
      };
    } catch (err) {
      if (!this.sessions.has(req.sessionId)) {
        attach?.destroy();
        await container?.remove({ force: true, v: true }).catch(() => undefined);
        await rm(dir, { recursive: true, force: true });
      }
      if (err instanceof LoopsmithError) throw err;
      throw new LoopsmithError("sandbox_error", `cannot open the session: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * One call in a session; calls of one session run one after another.
   * @throws LoopsmithError `not_found` when this replica holds no session of that id (or its
   *   container ended: the caller opens it again), `sandbox_error` when the engine fails
   */
  async call(req: SessionCall): Promise<SessionObservation> {
    const session = this.sessions.get(req.sessionId);
    if (!session) throw notFound(req.sessionId);
    session.lastUsed = Date.now();
    const work = session.queue.then(() => this.callNow(session, req.call));
    session.queue = work.catch(() => undefined);
    try {
      return await work;
    } finally {
      session.lastUsed = Date.now();
    }
  }

  private async callNow(session: Session, call: SessionCall["call"]): Promise<SessionObservation> {
    if (session.closed) throw notFound(session.id);
    const started = performance.now();
    const handler = this.tools[call.tool] as (s: Session, c: SessionCall["call"], t0: number) => Promise<Answer>;
    const { total, ...a } = await handler(session, call, started);
    return {
      totalBytes: Buffer.byteLength(a.output, "utf8"),
      ...(total !== undefined ? { total } : {}),
      ...a,
      durationMs: performance.now() - started,
    };
  }

  /**
   * The session's tools: every `executor` tool of the tool table (`AGENT_TOOLS`), and `write`.
   * `list`, `read` and `search` answer from the host copy (session-tools.ts); `run` is an exec
   * in the container.
   */
  private readonly tools: {
    [T in ExecutorToolName | "write"]: (s: Session, c: CallOf<T>, t0: number) => Promise<Answer>;
  } = {
    list: (session, call) => listTree(session.root, call.path, call.depth),
    read: (session, call) => readLines(session.root, call.path, call.startLine, call.endLine),
    search: (session, call) => searchTree(session.root, call.pattern, call.glob, call.maxResults),
    run: (session, call, started) => this.run(session, call, started),
    write: (session, call) => this.write(session, call.files, call.deleted),
  };

  /** `run`: the command in the container, holding one of the executor's slots (see the module comment). */
  private async run(session: Session, call: CallOf<"run">, started: number): Promise<Answer> {
    const timeoutMs = Math.min(call.timeoutMs ?? session.timeoutMs, session.timeoutMs);
    // One of the executor's slots, as a verdict run takes: the wait counts against the timeout.
    const release = await this.slot(timeoutMs);
    if (!release) {
      const output = `[not run: every slot of this executor stayed taken for the command's timeout of ${timeoutMs} ms; run it again]`;
      return { output, ok: false, exitCode: null, timedOut: true };
    }
    let r: ExecOutcome;
    const left = Math.max(1, Math.round(timeoutMs - (performance.now() - started)));
    try {
      // The command, then every other process of the sandbox user killed (the wrapper is spared).
      // In an image with a prologue (conda's activation) the command runs after it, in bash.
      const inner = session.prologue ? shellArgv(call.command, session.prologue) : ["sh", "-c", call.command];
      const argv = ["sh", "-c", '"$@"; s=$?; kill -9 -1 2>/dev/null; exit $s', "sh", ...inner];
      r = await this.execIn(session, argv, { timeoutMs: left });
    } finally {
      release();
    }
    const output = r.output.toString("utf8");
    const killed = r.timedOut || r.exitCode === 137;
    const note = r.timedOut ? `\n[killed: the command passed its timeout of ${timeoutMs} ms]` : "";
    return {
      output: output + note,
      ok: !killed && r.exitCode === 0,
      exitCode: killed ? null : r.exitCode,
      timedOut: r.timedOut,
      totalBytes: r.totalBytes,
      limits: limitsOf(session.spec, session.spec.memoryBytes, timeoutMs),
    };
  }

  /**
   * One of the executor's slots for a `run` (`deps.slots`), waited for at most `timeoutMs`
   * past the executor's queue bound (the session's container is here; it cannot go elsewhere,
   * and a session's calls run one at a time, so `maxSessions` bounds these waiters).
   * @returns the slot's release, or undefined when none came free within `timeoutMs`
   * @throws LoopsmithError `unavailable` when the executor is stopping (the caller opens the
   *   session elsewhere)
   */
  private async slot(timeoutMs: number): Promise<(() => void) | undefined> {
    const { slots } = this.deps;
    if (!slots) return () => undefined;
    try {
      return await slots.acquire(AbortSignal.timeout(timeoutMs), { pastQueueLimit: true });
    } catch (err) {
      if (hasCode(err, "cancelled")) return undefined;
      throw err;
    }
  }

  /**
   * `write`: the files and deletions into the container (first: a failure there leaves the
   * host copy as it was), then into the host copy. Paths under `.git/` or `node_modules/` are
   * left out (as from every workspace).
   */
  private async write(
    session: Session,
    files: readonly { path: string; content: string }[],
    deleted: readonly string[],
  ): Promise<ToolAnswer> {
    const skipped = (p: string): boolean => p.split("/").some((seg) => NEVER_FROM_TREE.has(seg));
    const kept = files.filter((f) => !skipped(f.path));
    const gone = deleted.filter((p) => !skipped(p));
    const left = [...files.filter((f) => skipped(f.path)).map((f) => f.path), ...deleted.filter(skipped)];
    for (const p of [...kept.map((f) => f.path), ...gone]) {
      if (p.split("/").includes("..") || p.startsWith("/"))
        return { output: `the path "${p}" leaves the workspace`, ok: false };
    }
    if (gone.length) {
      const r = await this.execIn(session, ["rm", "-rf", "--", ...gone.map((p) => `${session.workdir}/${p}`)], {
        timeoutMs: 60_000,
      });
      if (r.exitCode !== 0) return { output: `cannot remove: ${r.output.toString("utf8")}`, ok: false };
    }
    if (kept.length) {
      const archive = await workspaceArchive(kept, RESULT_DIR);
      const r = await this.execIn(session, extractArgv(session.workdir), { stdin: archive, timeoutMs: 60_000 });
      if (r.exitCode !== 0) return { output: `cannot write the files: ${r.output.toString("utf8")}`, ok: false };
    }
    for (const p of gone) await rm(join(session.root, p), { recursive: true, force: true });
    for (const f of kept) {
      const target = join(session.root, f.path);
      await mkdir(dirname(target), { recursive: true });
      try {
        await resolveInside(session.root, dirname(f.path));
      } catch (err) {
        if (err instanceof ToolRefusal) return { output: err.message, ok: false };
        throw err;
      }
      // A link at the path is replaced, never written through (tar does the same in the container).
      const info = await lstat(target).catch(() => undefined);
      if (info?.isDirectory()) return { output: `"${f.path}" is a directory in the workspace`, ok: false };
      if (info) await unlink(target);
      await writeFile(target, f.content, "utf8");
    }
    const parts = [`wrote ${kept.length} file(s)`, `removed ${gone.length} path(s)`];
    if (left.length) parts.push(`left out (under .git/ or node_modules/): ${left.join(", ")}`);
    return { output: parts.join("; "), ok: true };
  }

  /** {@link execIn} in a session's container; a container that ended closes the session. */
  private async execIn(
    session: Session,
    argv: string[],
    opts: { stdin?: Buffer; timeoutMs: number },
  ): Promise<ExecOutcome> {
    try {
      return await execIn(
        this.deps.docker,
        session.container,
        session.env,
        argv,
        { ...opts, workdir: session.workdir },
        this.deps.log,
      );
    } catch (err) {
      const status = statusOf(err);
      if (status === 409 || status === 404) {
        this.deps.log.warn({ sessionId: session.id, err }, "the session container ended; the session is closed");
        await this.close(session.id);
        throw new LoopsmithError(
          "not_found",
          `the container of session ${session.id} ended (out of memory, or removed): open the session again`,
          { cause: err },
        );
      }
      throw new LoopsmithError(
        "sandbox_error",
        `the engine failed in session ${session.id}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  }

  /**
   * Closes a session: its container removed (a run in progress ends with it), its host
   * directory deleted.
   * @returns false when no session of that id is open here
   */
  async close(sessionId: string): Promise<boolean> {
    const session = this.sessions.get(sessionId);
    if (!session) return false;
    this.sessions.delete(sessionId);
    session.closed = true;
    session.attach.destroy();
    await session.container.remove({ force: true, v: true }).catch((err: unknown) => {
      if (statusOf(err) !== 404) this.deps.log.warn({ err, sessionId }, "could not remove a session container");
    });
    await rm(session.dir, { recursive: true, force: true });
    this.deps.log.info({ sessionId }, "session closed");
    return true;
  }

  /** Closes every session and refuses new ones (the executor's stop); the sessions directory is removed. */
  async closeAll(): Promise<void> {
    this.stopped = true;
    clearInterval(this.expiry);
    await Promise.all([...this.opening.values()].map((p) => p.catch(() => undefined)));
    await Promise.all([...this.sessions.keys()].map((id) => this.close(id)));
    await rm(this.deps.dir, { recursive: true, force: true });
  }
}

/**
 * The session's workspace and environment, planned as a repo run's (repo-run.ts): the base
 * tree with `files` over it and `deleted` gone, packed under the tmpfs limits, and the setup
 * layer (built once per key) when the base has a setup command.
 * @throws LoopsmithError `workspace_invalid` (a path escapes, the tmpfs is passed),
 *   `sandbox_error` (the base tree cannot be read)
 */
async function planSession(req: SessionOpen, deps: SessionDeps): Promise<RunPlan> {
  const prepared = await planRun(
    {
      v: 1,
      taskId: req.taskId,
      iteration: req.iteration,
      idempotencyKey: req.idempotencyKey,
      language: req.language,
      files: req.files,
      base: {
        snapshot: req.base.snapshot,
        commit: req.base.commit,
        deleted: req.deleted,
        ...(req.owner ? { owner: req.owner } : {}),
        ...(req.base.setupCommand !== undefined ? { setupCommand: req.base.setupCommand } : {}),
      },
      command: ["true"],
      timeoutMs: req.timeoutMs,
      memoryMb: req.memoryMb,
      ...(req.image ? { image: req.image } : {}),
    },
    deps,
  );
  if ("blocked" in prepared) throw new LoopsmithError("workspace_invalid", prepared.blocked);
  if ("error" in prepared) throw new LoopsmithError("sandbox_error", prepared.error);
  return prepared.plan;
}

/** The error of a call to a session this replica does not hold. */
function notFound(sessionId: string): LoopsmithError {
  return new LoopsmithError(
    "not_found",
    `no session ${sessionId} on this executor (it was closed, expired, or the executor restarted): open it again`,
  );
}
