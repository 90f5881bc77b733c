/**
 * A warm pool of started sandbox containers for one image. `take()` hands out a fresh,
 * never-used container (or creates one when the pool is empty) and refills in the
 * background; every container serves exactly one run.
 */
import type Docker from "dockerode";
import type { Logger } from "pino";
import { Sandbox, type SandboxSpec } from "./sandbox.js";

/** A warm pool for one image and one set of limits. */
export class WarmPool {
  private readonly ready: Sandbox[] = [];
  private creating = 0;
  private readonly pending = new Set<Promise<void>>();
  private closed = false;

  /**
   * @param size - containers kept ready (0 disables the pool: every run creates its own)
   */
  constructor(
    private readonly docker: Docker,
    readonly spec: SandboxSpec,
    private readonly size: number,
    private readonly log: Logger,
    /** Called with every sandbox handed out or created, so the owner can track it. */
    private readonly track: (sandbox: Sandbox) => void,
  ) {}

  /** Containers ready now. */
  get readyCount(): number {
    return this.ready.length;
  }

  /** Starts creating containers until `size` are ready or being created. */
  fill(): void {
    while (!this.closed && this.ready.length + this.creating < this.size) {
      this.creating++;
      const p = Sandbox.create(this.docker, this.spec)
        .then((sandbox) => {
          this.track(sandbox);
          if (this.closed) return sandbox.destroy();
          this.ready.push(sandbox);
          return undefined;
        })
        .catch((err: unknown) => {
          this.log.warn({ err, image: this.spec.image }, "could not create a warm sandbox container");
        })
        .finally(() => {
          this.creating--;
          this.pending.delete(p);
        });
      this.pending.add(p);
    }
  }

  /** Resolves when the containers being created are ready (or failed). */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  /**
   * A fresh started container for one run: a warm one when there is one, else a new one.
   * It does not refill: call {@link WarmPool.fill} when the run is over, so creating the
   * replacement does not compete with the run for CPU.
   * @throws LoopsmithError `sandbox_error` when a new container cannot be created
   */
  async take(): Promise<Sandbox> {
    for (;;) {
      const sandbox = this.ready.shift();
      if (!sandbox) break;
      if (sandbox.alive) return sandbox;
      void sandbox.destroy();
    }
    const sandbox = await Sandbox.create(this.docker, this.spec);
    this.track(sandbox);
    return sandbox;
  }

  /** Stops refilling and destroys the ready containers. */
  async close(): Promise<void> {
    this.closed = true;
    await this.settled();
    const all = this.ready.splice(0);
    await Promise.all(all.map((s) => s.destroy()));
  }
}
