/**
 * Images a task names for itself (`SandboxImage`, e.g. a SWE-bench instance's official image),
 * beside the warm pools' images of loopsmith's own. Before a run in one of them the engine must
 * hold it: a missing image is pulled when the engine reaches a registry, else loaded from the
 * `docker save` archive `executor.imageArchive` (`LOOPSMITH_SANDBOX_IMAGES`) names, else the run
 * fails with one message naming the image and how to get it.
 */
import type Docker from "dockerode";
import type { Logger } from "pino";
import { hasCode } from "@loopsmith/shared/runtime";
import { ensureImages, hasImage, type EngineInfo } from "./engine.js";

/** How long a failed attempt to bring an image is remembered before it is tried again, ms. */
export const MISSING_RETRY_MS = 60_000;
/** How long a pull may take, ms (an official SWE-bench image is 1–3 GB). */
export const PULL_TIMEOUT_MS = 30 * 60_000;

/** Brings the images tasks name onto the engine, once each; concurrent runs of one image wait for one attempt. */
export class TaskImages {
  private readonly present = new Set<string>();
  private readonly pending = new Map<string, Promise<string | undefined>>();
  private readonly failed = new Map<string, { at: number; message: string }>();

  constructor(
    private readonly docker: Docker,
    private readonly opts: { engine: () => EngineInfo | undefined; archive?: string; log: Logger },
  ) {}

  /**
   * Makes sure the engine holds `image`.
   * @returns undefined when it does, else why not and what to do (a sentence for the result's reason)
   * @throws the engine's errors other than "no such image"
   */
  async ensure(image: string, signal?: AbortSignal): Promise<string | undefined> {
    if (this.present.has(image)) return undefined;
    const failed = this.failed.get(image);
    if (failed && Date.now() - failed.at < MISSING_RETRY_MS) return failed.message;
    let p = this.pending.get(image);
    if (!p) {
      p = this.bring(image, signal).finally(() => this.pending.delete(image));
      this.pending.set(image, p);
    }
    const message = await p;
    if (message) this.failed.set(image, { at: Date.now(), message });
    else {
      this.present.add(image);
      this.failed.delete(image);
    }
    return message;
  }

  private async bring(image: string, signal?: AbortSignal): Promise<string | undefined> {
    if (await hasImage(this.docker, image)) return undefined;
    const engine = this.opts.engine();
    const where = engine ? `the Docker engine ${engine.name} (${engine.endpoint})` : "the Docker engine";
    const pulled = await this.pull(image, signal);
    if (pulled === undefined && (await hasImage(this.docker, image))) return undefined;
    if (this.opts.archive && engine) {
      try {
        await ensureImages(this.docker, [image], { engine, archive: this.opts.archive, log: this.opts.log });
        return undefined;
      } catch (err) {
        if (!hasCode(err, "sandbox_error")) throw err;
      }
    }
    return (
      `${where} has no image ${image} and could not pull it (${pulled ?? "no error, yet no image"})` +
      `${this.opts.archive ? `, nor load it from ${this.opts.archive}` : ""}: ` +
      `pull it there (docker pull ${image}), or load it (docker load -i <archive>), or name a docker save archive that holds it in LOOPSMITH_SANDBOX_IMAGES`
    );
  }

  /** Pulls `image`; undefined when the engine says it is done, else the engine's error in one line. */
  private async pull(image: string, signal?: AbortSignal): Promise<string | undefined> {
    this.opts.log.info({ image }, "pulling a task's image");
    const timeout = AbortSignal.timeout(PULL_TIMEOUT_MS);
    const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      const stream = (await this.docker.pull(image, { abortSignal: abort })) as NodeJS.ReadableStream;
      await new Promise<void>((resolve, reject) => {
        this.docker.modem.followProgress(stream, (err: Error | null, out: { error?: string }[]) => {
          const failed = err ?? (out.find((o) => o.error) ? new Error(out.find((o) => o.error)?.error) : null);
          if (failed) reject(failed);
          else resolve();
        });
      });
      return undefined;
    } catch (err) {
      return (err as Error).message.split("\n")[0]?.trim() || "the pull failed";
    }
  }
}
