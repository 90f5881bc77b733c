/**
 * The images a local stack needs, brought on first use: the first command that needs them
 * builds or loads them, says so, and says how long it took.
 *
 * A stack the CLI starts itself runs NATS in a container and the executor's sandboxes in the
 * Python and Node images. When one is missing from the local engine:
 * 1. with a `docker save` archive configured (`executor.imageArchive`,
 *    `LOOPSMITH_SANDBOX_IMAGES`), it is loaded from there;
 * 2. else, as root, the installation's `deploy/build-images.sh` builds it from Debian
 *    packages (debootstrap needs root; about 4 minutes for the three on 2 cores);
 * 3. else the command stops with one line saying what to run once (`sudo loopsmith images`).
 * Each way prints a line before and a line after with the time it took. No registry is asked.
 */
import { spawn } from "node:child_process";
import { createReadStream, existsSync } from "node:fs";
import { join } from "node:path";
import Docker from "dockerode";
import { installRoot, LoopsmithError, type Config } from "@loopsmith/shared/runtime";

/** One image a stack needs: its configured name and `deploy/build-images.sh`'s word for it. */
export interface StackImage {
  /** The configured image name, e.g. `loopsmith/sandbox-python:local`. */
  image: string;
  /** The build script's argument that builds it. */
  kind: "nats" | "python" | "node";
  /** The environment variable the build script (and the configuration) reads the name from. */
  env: string;
}

/**
 * The images a stack started by this CLI needs: NATS (unless `natsUrl` points elsewhere) and
 * both sandbox images (the executor fills a warm pool of each at start and stops without one).
 */
export function stackImages(config: Config): StackImage[] {
  const images: StackImage[] = [];
  if (!config.natsUrl) images.push({ image: config.images.nats, kind: "nats", env: "LOOPSMITH_NATS_IMAGE" });
  images.push({ image: config.images.python, kind: "python", env: "LOOPSMITH_SANDBOX_PYTHON_IMAGE" });
  images.push({ image: config.images.node, kind: "node", env: "LOOPSMITH_SANDBOX_NODE_IMAGE" });
  return images;
}

/** The subset of dockerode this module uses (a fake in unit tests). */
export interface ImageEngine {
  getImage(name: string): { inspect(): Promise<unknown> };
  loadImage(file: NodeJS.ReadableStream, opts: { quiet: boolean }): Promise<NodeJS.ReadableStream>;
  modem: { followProgress(stream: NodeJS.ReadableStream, done: (err: Error | null, out: unknown[]) => void): void };
}

/** The images of `images` the engine does not hold. */
export async function missingImages(engine: ImageEngine, images: readonly StackImage[]): Promise<StackImage[]> {
  const missing: StackImage[] = [];
  for (const image of images) {
    try {
      await engine.getImage(image.image).inspect();
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) throw err;
      missing.push(image);
    }
  }
  return missing;
}

/** How {@link ensureStackImages} brings what is missing. */
export interface EnsureImagesOptions {
  /** Prints one line for the user (stderr in the CLI). */
  say: (line: string) => void;
  /** @defaultValue a dockerode client of the local engine */
  engine?: ImageEngine;
  /** @defaultValue whether this process runs as root */
  isRoot?: boolean;
  /** @defaultValue `<installation root>/deploy/build-images.sh` */
  buildScript?: string;
  /** Runs the build script with these arguments; resolves with its exit code. @defaultValue bash, output to stderr */
  runBuild?: (script: string, args: string[], env: NodeJS.ProcessEnv) => Promise<number>;
  /** @defaultValue Date.now */
  now?: () => number;
}

/** What {@link ensureStackImages} did: nothing, a load from the archive, or a build; with its time in ms. */
export interface EnsureImagesResult {
  action: "present" | "loaded" | "built";
  images: string[];
  ms: number;
}

/** The build script of this installation (the checkout's or the installed package's `deploy/`). */
export function defaultBuildScript(): string {
  return join(installRoot(), "deploy", "build-images.sh");
}

/** `s` seconds with one decimal, or minutes and seconds past a minute. */
export function duration(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/**
 * Makes sure the local engine holds every image in `images`, loading or building what is
 * missing and saying so (a line before, a line after with the time taken).
 * @throws LoopsmithError `unavailable` when no engine answers, an image is missing and cannot
 *   be brought here (not root and no archive: the message names the images and the one command
 *   to run as root), the archive does not hold them, or the build fails (its exit code)
 */
export async function ensureStackImages(
  config: Config,
  images: readonly StackImage[],
  opts: EnsureImagesOptions,
): Promise<EnsureImagesResult> {
  const engine = opts.engine ?? (new Docker() as unknown as ImageEngine);
  const now = opts.now ?? Date.now;
  const started = now();
  let missing: StackImage[];
  try {
    missing = await missingImages(engine, images);
  } catch (err) {
    throw new LoopsmithError("unavailable", `the Docker engine did not answer: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!missing.length) return { action: "present", images: [], ms: 0 };
  const names = missing.map((m) => m.image);
  const archive = config.executor.imageArchive;
  if (archive) {
    opts.say(`loopsmith: loading ${names.join(", ")} from ${archive} (first use)…`);
    await loadArchive(engine, archive);
    const still = await missingImages(engine, missing);
    if (still.length)
      throw new LoopsmithError(
        "unavailable",
        `${archive} does not hold ${still.map((m) => m.image).join(", ")}; save them there (docker save) or unset LOOPSMITH_SANDBOX_IMAGES`,
      );
    const ms = now() - started;
    opts.say(`loopsmith: loaded ${names.length} image(s) in ${duration(ms)}`);
    return { action: "loaded", images: names, ms };
  }
  const unbuildable = missing.filter((m) => !m.image.startsWith("loopsmith/"));
  if (unbuildable.length)
    throw new LoopsmithError(
      "unavailable",
      `the image(s) ${unbuildable.map((m) => m.image).join(", ")} are not on the local engine and loopsmith builds only loopsmith/* names; load them (docker load) or unset the variable that names them`,
    );
  const script = opts.buildScript ?? defaultBuildScript();
  const isRoot = opts.isRoot ?? process.getuid?.() === 0;
  if (!isRoot || !existsSync(script))
    throw new LoopsmithError(
      "unavailable",
      `the image(s) ${names.join(", ")} are missing; build them once from Debian packages (needs root for debootstrap; about 4 minutes): sudo loopsmith images` +
        (existsSync(script) ? "" : ` (the build script ${script} is missing from this installation)`),
    );
  opts.say(
    `loopsmith: building ${names.join(", ")} from Debian packages (first use; about 4 minutes; deploy/build-images.sh)…`,
  );
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const m of missing) env[m.env] = m.image;
  const code = await (opts.runBuild ?? runBuildScript)(
    script,
    missing.map((m) => m.kind),
    env,
  );
  if (code !== 0)
    throw new LoopsmithError("unavailable", `building the images failed (deploy/build-images.sh exit ${code})`);
  const ms = now() - started;
  opts.say(`loopsmith: built ${names.length} image(s) in ${duration(ms)}`);
  return { action: "built", images: names, ms };
}

/** Loads a `docker save` archive (gzip allowed) into the engine. */
async function loadArchive(engine: ImageEngine, archive: string): Promise<void> {
  if (!existsSync(archive))
    throw new LoopsmithError("unavailable", `the image archive ${archive} does not exist (LOOPSMITH_SANDBOX_IMAGES)`);
  try {
    const file = createReadStream(archive);
    const read = new Promise<never>((_, reject) => file.once("error", reject));
    const stream = await Promise.race([engine.loadImage(file, { quiet: true }), read]);
    await Promise.race([
      read,
      new Promise<void>((resolve, reject) => {
        engine.modem.followProgress(stream, (err, out) => {
          const failed = err ?? (out as Array<{ error?: string }>).find((o) => o.error)?.error;
          if (failed) reject(failed instanceof Error ? failed : new Error(failed));
          else resolve();
        });
      }),
    ]);
  } catch (err) {
    throw new LoopsmithError("unavailable", `could not load ${archive}: ${(err as Error).message}`, { cause: err });
  }
}

/** Runs `bash script ...args`, its output to this process's stderr; resolves with its exit code. */
export function runBuildScript(script: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [script, ...args], { env, stdio: ["ignore", process.stderr, process.stderr] });
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}
