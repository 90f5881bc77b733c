/**
 * One hardened sandbox container. It is created, attached and started ahead of time (the
 * supervisor waits on stdin), used for exactly one run, then destroyed.
 */
import { randomBytes } from "node:crypto";
import { posix } from "node:path";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type FileChange } from "@loopsmith/shared/contracts";
import { workspaceArchive, type ExtraEntry } from "./archive.js";
import { encodeSpec, SANDBOX_UID, type BootSpec, type BootTrailer } from "./bootstrap.js";
import { Capture, type CaptureEvent } from "./capture.js";
import { supervisorCmd, type ImageKind } from "./commands.js";
import type { StopReason } from "./outcome.js";
import { prestartSpec } from "./prestart.js";

/** Label every executor container carries; its value is the executor's instance id. */
export const LABEL = "org.loopsmith.executor";
/** Labels naming the host and process that own a container (for people and tools; leftover cleanup does not use them, see leftovers.ts). */
export const LABEL_HOST = "org.loopsmith.executor.host";
export const LABEL_PID = "org.loopsmith.executor.pid";

/** The limits and identity of a sandbox container. */
export interface SandboxSpec {
  image: string;
  kind: ImageKind;
  /** Memory limit, bytes; swap is set equal (no swap use). */
  memoryBytes: number;
  /** CPUs (CPU quota), e.g. 1 or 0.5. */
  cpus: number;
  /** Processes and threads in the container (cgroup pids limit). */
  pidsLimit: number;
  /** Size of each tmpfs (`/workspace`, `/tmp`), MiB. */
  tmpfsMb: number;
  /** OCI runtime such as `runsc`; the engine's default when undefined. */
  runtime?: string;
  /** The seccomp profile as JSON text ({@link loadSeccompProfile}). */
  seccomp: string;
  labels: Record<string, string>;
  /**
   * A user-defined Docker network to join (repo mode's setup container only, setup.ts);
   * absent: no network at all (`NetworkMode: none`), as every sandbox run.
   */
  network?: string;
  /** Volume mounts (repo mode's dependency layer, setup.ts); absent: none. */
  mounts?: Docker.MountSettings[];
  /**
   * Where the workspace tmpfs is mounted and commands start (a task's `SandboxImage.workdir`,
   * e.g. `/testbed`: the tmpfs hides what the image has there); absent: {@link WORKSPACE}.
   */
  workdir?: string;
  /**
   * Start the pytest runner while the container waits (prestart.ts): for warm containers of
   * loopsmith's own Python image, where a run is the default pytest command. Absent: no runner.
   */
  prestart?: boolean;
}

/** The workspace directory of loopsmith's own images, and the archive's prefix for workspace files. */
export const WORKSPACE = "/workspace";

/**
 * The supervisor's capabilities: switch to the sandbox user (SETUID, SETGID), empty the
 * command's bounding set (SETPCAP), and kill the command's leftover processes (KILL).
 */
export const SUPERVISOR_CAPS = ["SETUID", "SETGID", "SETPCAP", "KILL"] as const;

/** Files per tmpfs (`nr_inodes`): bounded so many small files cannot exhaust the host. */
export function inodesFor(tmpfsMb: number): number {
  return Math.max(1024, tmpfsMb * 128);
}

/** The container's create options: every confinement in one place. */
export function createOptions(spec: SandboxSpec): Docker.ContainerCreateOptions {
  // Owned by the sandbox user, with the modes named: engines since Docker 27 copy the image
  // directory's mode onto a tmpfs (0755 /workspace, 1777 /tmp), older ones (Debian trixie's 26)
  // keep the option's, and 0700 there shuts the supervisor (root with no DAC override) out.
  const size = `size=${spec.tmpfsMb}m,nr_inodes=${inodesFor(spec.tmpfsMb)},uid=${SANDBOX_UID},gid=${SANDBOX_UID}`;
  const workdir = spec.workdir ?? WORKSPACE;
  const fileBytes = spec.tmpfsMb * 1024 * 1024;
  return {
    Image: spec.image,
    Cmd: supervisorCmd(spec.kind, spec.prestart && spec.kind === "python" ? prestartSpec(workdir) : undefined),
    Entrypoint: [],
    // The supervisor (PID 2, under docker-init) runs as root with four capabilities and no
    // others, so that the command it starts as SANDBOX_UID cannot reach it (bootstrap.ts).
    User: "0:0",
    WorkingDir: workdir,
    Hostname: "sandbox",
    // The supervisor's own environment (the command gets an allowlist, commands.ts).
    Env: ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"],
    Labels: spec.labels,
    NetworkDisabled: !spec.network,
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    HostConfig: {
      NetworkMode: spec.network ?? "none",
      // The host's resolver address is not shown to the sandbox; lookups go to its own loopback.
      ...(spec.network ? {} : { Dns: ["127.0.0.1"], DnsSearch: ["."] }),
      ...(spec.mounts?.length ? { Mounts: spec.mounts } : {}),
      Memory: spec.memoryBytes,
      MemorySwap: spec.memoryBytes,
      NanoCpus: Math.round(spec.cpus * 1e9),
      PidsLimit: spec.pidsLimit,
      ReadonlyRootfs: true,
      Tmpfs: {
        [workdir]: `rw,exec,nosuid,nodev,${size},mode=0755`,
        "/tmp": `rw,noexec,nosuid,nodev,${size},mode=1777`,
      },
      ShmSize: 16 * 1024 * 1024,
      CapDrop: ["ALL"],
      // Kept only by the supervisor: the command drops to SANDBOX_UID with empty sets.
      CapAdd: [...SUPERVISOR_CAPS],
      SecurityOpt: ["no-new-privileges", `seccomp=${spec.seccomp}`],
      Init: true,
      OomScoreAdj: 1000,
      Ulimits: [
        { Name: "nofile", Soft: 1024, Hard: 1024 },
        { Name: "fsize", Soft: fileBytes, Hard: fileBytes },
        { Name: "core", Soft: 0, Hard: 0 },
      ],
      LogConfig: { Type: "none", Config: {} },
      AutoRemove: false,
      ...(spec.runtime ? { Runtime: spec.runtime } : {}),
    },
  };
}

/** What one run produced, before it is turned into an `ExecutionResult`. */
export interface RawRun {
  trailer: BootTrailer | null;
  stdout: Buffer;
  stderr: Buffer;
  truncated: boolean;
  stopReason: StopReason | null;
  oomKilled: boolean;
  containerExitCode: number | null;
  /** Host wall time from sending the work to the report, ms. */
  wallMs: number;
}

/**
 * One run's work: the spec without its per-run secret, and the files of the workspace, or
 * (repo mode) the workspace archive already built from disk (`archive`, which then wins).
 */
export type SandboxWork = Omit<BootSpec, "marker" | "uid" | "deadlineMs" | "cwd"> & {
  files: readonly FileChange[];
  archive?: Buffer;
  extra?: readonly ExtraEntry[];
};

/** Options of {@link Sandbox.run}. */
export interface SandboxRunOptions {
  timeoutMs: number;
  outputLimitBytes: number;
  /** Memory for this run, bytes (updated on the container when it differs). */
  memoryBytes: number;
  signal?: AbortSignal;
}

/** The abort reason that means "the executor is stopping" rather than a cancel. */
export const STOPPED_REASON = "executor-stopped";

/** How much longer than the run's timeout the supervisor lets a command run on its own, ms. */
export const SUPERVISOR_GRACE_MS = 5_000;

/** How long to wait for a killed container's stream to end before giving up, ms. */
const KILL_GRACE_MS = 15_000;

function ignoreGone(err: unknown): void {
  const status = (err as { statusCode?: number }).statusCode;
  if (status === 404 || status === 409 || status === 304) return;
  throw err;
}

function parseTrailer(raw: string | null): BootTrailer | null {
  if (raw === null) return null;
  try {
    return JSON.parse(raw) as BootTrailer;
  } catch {
    return null;
  }
}

/** A started sandbox container whose supervisor waits for work. */
export class Sandbox {
  private ended = false;
  private readonly endedPromise: Promise<void>;
  private sink: ((data: Buffer) => void) | null = null;
  private used = false;

  private constructor(
    readonly container: Docker.Container,
    private readonly stream: Duplex,
    readonly spec: SandboxSpec,
  ) {
    this.endedPromise = new Promise((resolve) => {
      const done = (): void => {
        this.ended = true;
        resolve();
      };
      stream.on("end", done);
      stream.on("close", done);
      stream.on("error", done);
    });
    stream.on("data", (data: Buffer) => this.sink?.(data));
  }

  /** Container id. */
  get id(): string {
    return this.container.id;
  }

  /** False once the container has ended (it can no longer be used). */
  get alive(): boolean {
    return !this.ended && !this.used;
  }

  /**
   * Creates, attaches and starts a sandbox container. A container that is gone before it
   * started (another executor's sweep took it for the leftover of a dead owner: leftovers.ts)
   * is replaced by a new one, once.
   * @throws LoopsmithError `sandbox_error` when the engine refuses (missing image, bad runtime, …);
   *   the container is removed when it was created.
   */
  static async create(docker: Docker, spec: SandboxSpec): Promise<Sandbox> {
    for (let attempt = 1; ; attempt++) {
      let container: Docker.Container | undefined;
      try {
        container = await docker.createContainer(createOptions(spec));
        const stream = (await container.attach({
          stream: true,
          stdin: true,
          stdout: true,
          stderr: true,
          hijack: true,
        })) as unknown as Duplex;
        const sandbox = new Sandbox(container, stream, spec);
        try {
          await container.start();
        } catch (err) {
          stream.destroy();
          throw err;
        }
        return sandbox;
      } catch (err) {
        const goneBeforeStart = container !== undefined && (err as { statusCode?: number }).statusCode === 404;
        if (container) await container.remove({ force: true }).catch(() => undefined);
        if (goneBeforeStart && attempt === 1) continue;
        throw new LoopsmithError(
          "sandbox_error",
          `cannot start a sandbox container from ${spec.image}: ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
    }
  }

  /**
   * Runs one piece of work. Never throws for anything the command does.
   * @throws LoopsmithError `sandbox_error` when the engine fails (update, inspect) or the
   *   container never ends after being killed.
   */
  async run(work: SandboxWork, opts: SandboxRunOptions): Promise<RawRun> {
    if (this.used) throw new LoopsmithError("sandbox_error", "a sandbox container is used for one run only");
    this.used = true;
    if (this.ended) throw new LoopsmithError("sandbox_error", "the sandbox container ended before the run");
    const { files, archive: built, extra, ...boot } = work;
    const archive = built ?? (await workspaceArchive(files, posix.dirname(work.resultPath), extra));
    if (opts.memoryBytes !== this.spec.memoryBytes) {
      await this.container.update({ Memory: opts.memoryBytes, MemorySwap: opts.memoryBytes });
    }
    const marker = `\u0000LOOPSMITH-${randomBytes(16).toString("hex")}:`;
    let stopReason: StopReason | null = null;
    const stop = (reason: StopReason): void => {
      stopReason ??= reason;
      this.container.kill({ signal: "SIGKILL" }).catch(ignoreGone);
    };
    let reported: () => void = () => undefined;
    const reportedPromise = new Promise<void>((resolve) => (reported = resolve));
    const capture = new Capture(opts.outputLimitBytes, marker, (event: CaptureEvent) => {
      if (event === "output_limit") stop("output_limit");
      else if (event === "trailer_too_large") stop("trailer_too_large");
      else reported();
    });
    this.sink = (data) => capture.write(data);
    const onAbort = (): void => stop(opts.signal?.reason === STOPPED_REASON ? "stopped" : "cancelled");
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const started = performance.now();
    const timer = setTimeout(() => stop("timeout"), opts.timeoutMs);
    let trailer: BootTrailer | null = null;
    let early = false;
    try {
      if (!stopReason)
        this.stream.write(
          encodeSpec(
            {
              ...boot,
              marker,
              uid: SANDBOX_UID,
              deadlineMs: opts.timeoutMs + SUPERVISOR_GRACE_MS,
              ...(this.spec.workdir && this.spec.workdir !== WORKSPACE ? { cwd: this.spec.workdir } : {}),
            },
            archive,
            this.spec.kind,
          ),
        );
      let grace: NodeJS.Timeout | undefined;
      const deadline = new Promise<"stuck">((resolve) => {
        grace = setTimeout(() => resolve("stuck"), opts.timeoutMs + KILL_GRACE_MS);
      });
      const ended = this.endedPromise.then(() => "ended" as const);
      let how = await Promise.race([ended, reportedPromise.then(() => "reported" as const), deadline]);
      if (how === "reported") {
        trailer = parseTrailer(capture.trailer());
        // A command that ended by itself needs nothing from the engine: answer now and let
        // the container finish exiting while it is removed. A signal may be the OOM killer.
        early = stopReason === null && trailer !== null && (trailer.phase === "setup" || trailer.signal === null);
        if (!early) how = await Promise.race([ended, deadline]);
      }
      clearTimeout(grace);
      if (how === "stuck")
        throw new LoopsmithError("sandbox_error", "the sandbox container did not end after it was killed");
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
    }
    const wallMs = performance.now() - started;
    capture.end();
    trailer ??= parseTrailer(capture.trailer());
    const { oomKilled, containerExitCode } = early
      ? { oomKilled: false, containerExitCode: null }
      : await this.exitState();
    return {
      trailer,
      stdout: capture.stdout(),
      stderr: capture.stderr(),
      truncated: capture.truncated,
      stopReason,
      oomKilled,
      containerExitCode,
      wallMs,
    };
  }
  /**
   * How the stopped container ended, as the engine reports it. Another executor's sweep may
   * already have removed it (404): its state is then unknown (not OOM-killed, no exit code),
   * and the trailer (or its absence) decides.
   */
  private async exitState(): Promise<{ oomKilled: boolean; containerExitCode: number | null }> {
    const info = await this.container.inspect().catch((err: unknown) => {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw err;
    });
    return {
      oomKilled: info?.State.OOMKilled === true,
      containerExitCode: typeof info?.State.ExitCode === "number" ? info.State.ExitCode : null,
    };
  }

  /** Kills and removes the container; never throws for a container that is already gone. */
  async destroy(): Promise<void> {
    this.stream.destroy();
    await this.container.remove({ force: true, v: true }).catch(ignoreGone);
  }
}
