/**
 * One `docker exec` in a session container (session.ts): as the sandbox user, at the
 * workspace root, stdout and stderr kept together in arrival order, head and tail past the cap
 * (the shared streaming cut, `CutStream` in `@loopsmith/shared/text`).
 */
import { PassThrough, Writable, type Duplex } from "node:stream";
import type Docker from "dockerode";
import type { Logger } from "pino";
import { CutStream } from "@loopsmith/shared/text";
import { SANDBOX_UID } from "./bootstrap.js";
import { RUN_OUTPUT_LIMIT_BYTES } from "./fit.js";
import { createOptions, WORKSPACE, type SandboxSpec } from "./sandbox.js";

/** uid of the session container's main process: neither root nor the sandbox user, so a run cannot signal it. */
export const SESSION_IDLE_UID = 65534;

/** How long a killed run's output stream may take to end, ms. */
const KILL_GRACE_MS = 5_000;

/** What one exec produced. */
export interface ExecOutcome {
  /** stdout and stderr in arrival order, cut to {@link RUN_OUTPUT_LIMIT_BYTES} bytes (head and tail, the note included). */
  output: Buffer;
  /** Bytes of output before the cut. */
  totalBytes: number;
  /** The exec's exit code (137 when it was killed), null when the engine does not say. */
  exitCode: number | null;
  /** It passed `timeoutMs` and was killed. */
  timedOut: boolean;
}

/**
 * One `docker exec` as the sandbox user at the workspace (`opts.workdir`, else `/workspace`): `opts.stdin` written to it (then
 * closed), stdout and stderr kept together up to {@link RUN_OUTPUT_LIMIT_BYTES} bytes. Past
 * `opts.timeoutMs` every process of the sandbox user is killed from a second exec.
 * @throws the engine's errors (409 when the container is not running)
 */
export async function execIn(
  docker: Docker,
  container: Docker.Container,
  env: string[],
  argv: string[],
  opts: { stdin?: Buffer; timeoutMs: number; workdir?: string },
  log: Logger,
): Promise<ExecOutcome> {
  const user = `${SANDBOX_UID}:${SANDBOX_UID}`;
  const exec = await container.exec({
    Cmd: argv,
    User: user,
    WorkingDir: opts.workdir ?? WORKSPACE,
    Env: env,
    AttachStdin: opts.stdin !== undefined,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  });
  const stream = (await exec.start({ hijack: true, stdin: opts.stdin !== undefined })) as unknown as Duplex;
  const kept = new CutStream({ max: RUN_OUTPUT_LIMIT_BYTES });
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      kept.write(chunk);
      cb();
    },
  });
  const ended = new Promise<void>((resolve) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", () => resolve());
  });
  docker.modem.demuxStream(stream, sink, sink);
  if (opts.stdin !== undefined) {
    const input = new PassThrough();
    input.end(opts.stdin);
    input.pipe(stream, { end: false });
    input.on("end", () => (stream as unknown as { end(): void }).end());
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void container
      .exec({ Cmd: ["sh", "-c", "kill -9 -1"], User: user, AttachStdout: false, AttachStderr: false })
      .then((killer) => killer.start({ Detach: true }))
      .catch((err: unknown) => log.warn({ err }, "could not kill a session run past its timeout"));
  }, opts.timeoutMs);
  try {
    await ended;
  } finally {
    clearTimeout(timer);
  }
  if (timedOut) {
    const grace = new Promise<void>((resolve) => setTimeout(resolve, KILL_GRACE_MS).unref());
    await Promise.race([ended, grace]);
    stream.destroy();
  }
  const info = await exec.inspect();
  return {
    output: kept.bytes(),
    totalBytes: kept.total,
    exitCode: typeof info.ExitCode === "number" ? info.ExitCode : null,
    timedOut,
  };
}

/**
 * Creates, attaches and starts a session container: the verdict run's options
 * (`createOptions(spec)`) with `cat` as the main process, run as {@link SESSION_IDLE_UID}
 * with no capability at all (commands come by exec, as the sandbox user). `cat` reads the
 * attach connection: when it closes (the executor died), the container ends.
 * @throws the engine's errors; the container is removed when it was created
 */
export async function startSessionContainer(
  docker: Docker,
  spec: SandboxSpec,
): Promise<{ container: Docker.Container; attach: Duplex }> {
  const options = createOptions(spec);
  const container = await docker.createContainer({
    ...options,
    Cmd: ["cat"],
    User: `${SESSION_IDLE_UID}:${SESSION_IDLE_UID}`,
    HostConfig: { ...options.HostConfig, CapAdd: [] },
  });
  try {
    const attach = (await container.attach({
      stream: true,
      stdin: true,
      stdout: true,
      stderr: true,
      hijack: true,
    })) as unknown as Duplex;
    attach.on("error", () => undefined);
    attach.resume();
    await container.start();
    return { container, attach };
  } catch (err) {
    await container.remove({ force: true, v: true }).catch(() => undefined);
    throw err;
  }
}
