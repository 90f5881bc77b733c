/**
 * Repo mode's dependency layer. A setup command (`pip install -e .`, `npm ci`, …) runs once
 * per key — the image id, the commit, the command and the dependency manifests' content —
 * in a setup container that is a sandbox in every respect but one: it joins the
 * `loopsmith-setup` bridge network (layer.ts) so it can reach the package registries. What it
 * installs lands in a Docker named volume, `loopsmith-setup-<key prefix>`, which later runs
 * mount read-only: Python packages under `/opt/loopsmith-deps` (pip's user scheme,
 * `PYTHONUSERBASE`), Node packages at `/workspace/node_modules`.
 *
 * The volume carries its state in a marker file written from the host side (Docker's archive
 * API on a created, never-started helper container): `ready`, or `failed` with the time, so a
 * failed setup is not tried again for {@link SETUP_RETRY_MS}, across executor restarts too.
 * Volumes are kept (they are the cache); nothing prunes them yet.
 */
import { readFile } from "node:fs/promises";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { pack } from "tar-stream";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { readTar } from "@loopsmith/shared/workspace";
import { SANDBOX_UID } from "./bootstrap.js";
import { RESULT_PATH, type ImageKind } from "./commands.js";
import {
  CA_PATH,
  DEFAULT_SETUP_TIMEOUT_MS,
  LABEL_SETUP,
  layerMount,
  SETUP_NETWORK,
  SETUP_MARKER,
  SETUP_RETRY_MS,
  setupEnv,
  volumeName,
} from "./layer.js";
import type { ExtraEntry } from "./archive.js";
import { Sandbox, STOPPED_REASON, type RawRun, type SandboxSpec } from "./sandbox.js";

const MiB = 1024 * 1024;
const HELPER_MOUNT = "/layer";
/** Setup containers get at least this much memory and tmpfs (downloads and builds), MiB. */
const SETUP_MIN_MEMORY_MB = 1024;
const SETUP_MIN_TMPFS_MB = 512;
const SETUP_OUTPUT_LIMIT = 256 * 1024;
/** Largest marker file read back, bytes (the host writes a few KiB; anything bigger is not ours). */
const MARKER_LIMIT = 64 * 1024;

/** What a run learns about its layer (the result's `setup`, plus the volume to mount). */
export interface SetupOutcome {
  key: string;
  status: "built" | "reused" | "failed" | "skipped";
  /** Time this run spent on the layer, ms. */
  durationMs: number;
  message?: string;
  /** The volume to mount read-only; only when the layer is ready. */
  volume?: string;
}

/** One run's need of a layer. */
export interface SetupRequest {
  key: string;
  kind: ImageKind;
  /** The kind's sandbox spec (image, limits, seccomp, labels); network and mounts are set here. */
  spec: SandboxSpec;
  setupCommand: string;
  /** Builds the setup workspace's archive with `extra` entries first; called only for a build. */
  archive: (extra: ExtraEntry[]) => Promise<Buffer>;
  /** The run's memory, MiB (the setup gets at least 1 GiB). */
  memoryMb: number;
  /** The run's cancel: stops waiting (the build goes on for others). */
  signal?: AbortSignal;
}

/** Dependencies of {@link SetupLayers}. */
export interface SetupLayersDeps {
  docker: Docker;
  log: Logger;
  /** Called with every setup sandbox created, and when it is done (the executor's own tracking). */
  track: (sandbox: Sandbox) => void;
  dispose: (sandbox: Sandbox) => void;
  /** Longest a setup command runs, ms. @defaultValue {@link DEFAULT_SETUP_TIMEOUT_MS} */
  timeoutMs?: number;
  /** Where the variables of `PASSED_THROUGH` (layer.ts) and `NODE_EXTRA_CA_CERTS` are read. @defaultValue process.env */
  env?: NodeJS.ProcessEnv;
}

interface Marker {
  v: 1;
  status: "ready" | "failed";
  /** When the build ended, ms since the epoch. */
  at: number;
  key: string;
  durationMs: number;
  message?: string;
}

type Built = { status: "ready"; fresh: boolean } | { status: "failed" | "skipped"; message: string };

const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number }).statusCode;

/** Rejects with `cancelled` when `signal` aborts first. */
function abortable<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void =>
      reject(new LoopsmithError("cancelled", "the run was cancelled while its setup layer was being built"));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function failedAt(m: { at: number; message?: string }): string {
  const retry = new Date(m.at + SETUP_RETRY_MS).toISOString();
  return `the setup failed at ${new Date(m.at).toISOString()} and is not tried again before ${retry}: ${m.message ?? "unknown"}`;
}

/** What a finished setup run says, for the marker and the result. */
function describe(raw: RawRun, timeoutMs: number): string {
  const tail = (raw.stderr.toString("utf8").trim() || raw.stdout.toString("utf8").trim()).slice(-1500);
  let why: string;
  if (raw.stopReason === "timeout") why = `the setup command passed its ${timeoutMs} ms limit`;
  else if (raw.stopReason === "output_limit") why = "the setup command's output passed its cap";
  else if (raw.oomKilled) why = "the setup command ran out of memory";
  else if (raw.trailer?.phase === "setup") why = `the workspace could not be written: ${raw.trailer.error ?? ""}`;
  else if (raw.trailer?.signal) why = `the setup command was killed by signal ${raw.trailer.signal}`;
  else why = `the setup command exited with code ${raw.trailer?.exitCode ?? "?"}`;
  return tail ? `${why}\n${tail}` : why;
}

/**
 * Builds and finds setup layers; one per key, built once: concurrent runs of a key share one
 * build (a per-key promise), later runs reuse the volume, a failure is remembered (in memory
 * and on the volume) for {@link SETUP_RETRY_MS}.
 */
export class SetupLayers {
  private readonly states = new Map<string, { status: "ready" } | { status: "failed"; at: number; message?: string }>();
  private readonly building = new Map<string, Promise<Built>>();
  private readonly stopper = new AbortController();
  private network: Promise<void> | undefined;
  private readonly timeoutMs: number;
  private readonly env: NodeJS.ProcessEnv;

  constructor(private readonly deps: SetupLayersDeps) {
    this.timeoutMs = deps.timeoutMs ?? DEFAULT_SETUP_TIMEOUT_MS;
    this.env = deps.env ?? process.env;
  }

  /**
   * The layer of `req.key`: reused when ready, built when missing (or its failure is older
   * than {@link SETUP_RETRY_MS}), waited for when a build is under way. Never throws for
   * what the setup command does or for an engine failure: those give `failed`.
   * @throws LoopsmithError `cancelled` when `req.signal` aborts while waiting
   */
  async ensure(req: SetupRequest): Promise<SetupOutcome> {
    const started = performance.now();
    const name = volumeName(req.key);
    const done = (status: SetupOutcome["status"], message?: string): SetupOutcome => ({
      key: req.key,
      status,
      durationMs: Math.round(performance.now() - started),
      ...(message ? { message } : {}),
      ...(status === "built" || status === "reused" ? { volume: name } : {}),
    });
    const known = this.states.get(req.key);
    if (known?.status === "ready") {
      if (await this.volumeExists(name)) return done("reused");
      this.states.delete(req.key);
    } else if (known?.status === "failed" && Date.now() - known.at < SETUP_RETRY_MS) {
      return done("failed", failedAt(known));
    }
    let build = this.building.get(req.key);
    const mine = !build;
    if (!build) {
      build = this.build(req, name).catch((err: unknown): Built => {
        this.deps.log.warn({ err, key: req.key }, "the setup layer could not be built");
        return { status: "failed", message: `the setup layer could not be built: ${(err as Error).message}` };
      });
      const b = build;
      this.building.set(req.key, b);
      void b.finally(() => this.building.delete(req.key));
    }
    const r = await abortable(build, req.signal);
    if (r.status === "ready") return done(mine && r.fresh ? "built" : "reused");
    return done(r.status, r.message);
  }

  /** Stops builds under way (their setup containers are killed); later calls fail fast. */
  close(): void {
    this.stopper.abort(STOPPED_REASON);
  }

  private async volumeExists(name: string): Promise<boolean> {
    try {
      await this.deps.docker.getVolume(name).inspect();
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw err;
    }
  }

  /**
   * What an existing volume of the layer's name answers: its result when its marker says it
   * is ready for this key, or failed within {@link SETUP_RETRY_MS}; `skipped` when another
   * executor is building it; else the volume is removed, to be built again (undefined, as
   * when there is none).
   */
  private async existing(req: SetupRequest, name: string): Promise<Built | undefined> {
    const { docker, log } = this.deps;
    if (!(await this.volumeExists(name))) return undefined;
    const marker = await this.readMarker(req, name);
    if (marker?.status === "ready" && marker.key === req.key) {
      this.states.set(req.key, { status: "ready" });
      return { status: "ready", fresh: false };
    }
    if (marker?.status === "failed" && Date.now() - marker.at < SETUP_RETRY_MS) {
      this.states.set(req.key, {
        status: "failed",
        at: marker.at,
        ...(marker.message ? { message: marker.message } : {}),
      });
      return { status: "failed", message: failedAt(marker) };
    }
    if (!marker) {
      const others = await docker.listContainers({ filters: { label: [`${LABEL_SETUP}=${req.key}`] } });
      if (others.length) return { status: "skipped", message: "another executor is building this setup layer" };
    }
    log.info({ volume: name, marker: marker?.status ?? "none" }, "removing a setup layer to build it again");
    await docker.getVolume(name).remove({ force: true });
    return undefined;
  }

  private async build(req: SetupRequest, name: string): Promise<Built> {
    const { docker, log } = this.deps;
    if (this.stopper.signal.aborted) return { status: "skipped", message: "the executor is stopping" };
    const found = await this.existing(req, name);
    if (found) return found;
    const started = performance.now();
    // Not the executor's instance label: the volume outlives this executor (it is the cache).
    await docker.createVolume({
      Name: name,
      Labels: {
        [LABEL_SETUP]: req.key,
        "org.loopsmith.setup.image": req.spec.image,
        "org.loopsmith.setup.command": req.setupCommand.slice(0, 1000),
      },
    });
    await this.helper(req, name, false, ["chown", `${SANDBOX_UID}:${SANDBOX_UID}`, HELPER_MOUNT], async (c) => {
      await c.start();
      const { StatusCode } = (await c.wait()) as { StatusCode: number };
      if (StatusCode !== 0)
        throw new LoopsmithError(
          "sandbox_error",
          `could not give the setup volume to the sandbox user (chown exit ${StatusCode})`,
        );
    });
    await this.ensureNetwork();
    const ca = await this.caBundle();
    const archive = await req.archive(ca ? [{ path: CA_PATH, content: ca }] : []);
    const memoryBytes = Math.max(req.memoryMb, SETUP_MIN_MEMORY_MB) * MiB;
    const spec: SandboxSpec = {
      ...req.spec,
      labels: this.labels(req),
      memoryBytes,
      tmpfsMb: Math.max(req.spec.tmpfsMb, SETUP_MIN_TMPFS_MB),
      network: SETUP_NETWORK,
      mounts: [layerMount(req.kind, name, false)],
    };
    const sandbox = await Sandbox.create(docker, spec);
    this.deps.track(sandbox);
    let raw: RawRun;
    try {
      raw = await sandbox.run(
        {
          argv: ["sh", "-c", req.setupCommand],
          env: setupEnv(req.kind, this.env, ca !== undefined),
          files: [],
          archive,
          resultPath: RESULT_PATH,
          resultLimitBytes: 64 * 1024,
        },
        { timeoutMs: this.timeoutMs, outputLimitBytes: SETUP_OUTPUT_LIMIT, memoryBytes, signal: this.stopper.signal },
      );
    } finally {
      this.deps.dispose(sandbox);
    }
    if (raw.stopReason === "cancelled" || raw.stopReason === "stopped")
      return { status: "skipped", message: "the executor stopped during the setup" };
    const ok = raw.stopReason === null && !raw.oomKilled && raw.trailer?.phase === "run" && raw.trailer.exitCode === 0;
    const marker: Marker = {
      v: 1,
      status: ok ? "ready" : "failed",
      at: Date.now(),
      key: req.key,
      durationMs: Math.round(performance.now() - started),
    };
    if (!ok) marker.message = describe(raw, this.timeoutMs);
    await this.writeMarker(req, name, marker);
    log.info({ key: req.key, volume: name, status: marker.status, durationMs: marker.durationMs }, "setup layer built");
    if (ok) {
      this.states.set(req.key, { status: "ready" });
      return { status: "ready", fresh: true };
    }
    this.states.set(req.key, {
      status: "failed",
      at: marker.at,
      ...(marker.message ? { message: marker.message } : {}),
    });
    return { status: "failed", message: marker.message ?? "the setup command failed" };
  }

  /** Labels of everything a build creates: the executor's (leftover cleanup) and the key. */
  private labels(req: SetupRequest): Record<string, string> {
    return { ...req.spec.labels, [LABEL_SETUP]: req.key };
  }

  /** The host's CA bundle (`NODE_EXTRA_CA_CERTS`), when set and readable. */
  private async caBundle(): Promise<Buffer | undefined> {
    const path = this.env.NODE_EXTRA_CA_CERTS;
    if (!path) return undefined;
    return readFile(path).catch((err: unknown) => {
      this.deps.log.warn(
        { err, path },
        "NODE_EXTRA_CA_CERTS names a file that cannot be read; the setup runs without it",
      );
      return undefined;
    });
  }

  /** Creates {@link SETUP_NETWORK} once (a bridge with no traffic between its containers). */
  private ensureNetwork(): Promise<void> {
    this.network ??= (async () => {
      const { docker } = this.deps;
      const nets = await docker.listNetworks({ filters: { name: [SETUP_NETWORK] } });
      if (nets.some((n) => n.Name === SETUP_NETWORK)) return;
      try {
        await docker.createNetwork({
          Name: SETUP_NETWORK,
          Driver: "bridge",
          CheckDuplicate: true,
          Labels: { [LABEL_SETUP]: "network" },
          Options: { "com.docker.network.bridge.enable_icc": "false" },
        });
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
      }
    })().catch((err: unknown) => {
      this.network = undefined;
      throw err;
    });
    return this.network;
  }

  /**
   * A helper container of the sandbox image with the volume at `/layer`: created and, with
   * `cmd`, started (root with only CAP_CHOWN, no network); always removed after `use`.
   */
  private async helper<T>(
    req: SetupRequest,
    volume: string,
    readOnly: boolean,
    cmd: string[] | undefined,
    use: (c: Docker.Container) => Promise<T>,
  ): Promise<T> {
    const c = await this.deps.docker.createContainer({
      Image: req.spec.image,
      Entrypoint: [],
      Cmd: cmd ?? ["true"],
      User: "0:0",
      Labels: this.labels(req),
      NetworkDisabled: true,
      HostConfig: {
        NetworkMode: "none",
        Mounts: [{ Type: "volume", Source: volume, Target: HELPER_MOUNT, ReadOnly: readOnly }],
        CapDrop: ["ALL"],
        CapAdd: cmd ? ["CHOWN"] : [],
        SecurityOpt: ["no-new-privileges"],
        ReadonlyRootfs: true,
        Memory: 64 * MiB,
        PidsLimit: 16,
        LogConfig: { Type: "none", Config: {} },
      },
    });
    try {
      return await use(c);
    } finally {
      await c.remove({ force: true }).catch(() => undefined);
    }
  }

  private async readMarker(req: SetupRequest, volume: string): Promise<Marker | null> {
    return this.helper(req, volume, true, undefined, async (c) => {
      let stream: NodeJS.ReadableStream;
      try {
        stream = await c.getArchive({ path: `${HELPER_MOUNT}/${SETUP_MARKER}` });
      } catch (err) {
        if (statusOf(err) === 404) return null;
        throw err;
      }
      try {
        // A marker past the cap, a broken archive or a broken stream reads as no marker.
        const files = await readTar(stream, { maxEntryBytes: MARKER_LIMIT, select: (m) => m.type === "file" });
        const m = JSON.parse(files.at(-1)?.content.toString("utf8") ?? "") as Marker;
        return m.v === 1 && (m.status === "ready" || m.status === "failed") && typeof m.at === "number" ? m : null;
      } catch {
        return null;
      }
    });
  }

  private async writeMarker(req: SetupRequest, volume: string, marker: Marker): Promise<void> {
    const tar = pack();
    const chunks: Buffer[] = [];
    const collected = (async () => {
      for await (const chunk of tar) chunks.push(chunk as Buffer);
    })();
    tar.entry({ name: SETUP_MARKER, mode: 0o644 }, Buffer.from(JSON.stringify(marker)));
    tar.finalize();
    await collected;
    await this.helper(req, volume, false, undefined, (c) =>
      c.putArchive(Buffer.concat(chunks), { path: HELPER_MOUNT }),
    );
  }
}
