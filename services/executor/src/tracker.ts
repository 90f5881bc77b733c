/**
 * The sandbox containers an executor holds, and the removals under way, so that `settled()`
 * and `stop()` can wait until every container it made is gone.
 */
import type { Logger } from "pino";
import type { Sandbox } from "./sandbox.js";

/** Live sandboxes and pending removals of one executor. */
export class SandboxTracker {
  private readonly live = new Set<Sandbox>();
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly log: Logger) {}

  /** Holds `sandbox` until it is disposed of. */
  track(sandbox: Sandbox): void {
    this.live.add(sandbox);
  }

  /** Removes `sandbox`'s container in the background; a failure is logged, never thrown. */
  dispose(sandbox: Sandbox): void {
    this.after(
      sandbox
        .destroy()
        .catch((err: unknown) => this.log.warn({ err, id: sandbox.id }, "could not remove a sandbox container"))
        .finally(() => this.live.delete(sandbox)),
    );
  }

  /** Disposes of every sandbox still held. */
  disposeAll(): void {
    for (const s of this.live) this.dispose(s);
  }

  /** Tracks background work (it must not reject) that {@link SandboxTracker.settled} waits for. */
  after(work: Promise<void>): void {
    const p: Promise<void> = work.finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** Resolves when every tracked removal is done, and `others` (awaited each round) too. */
  async settled(others: () => Promise<unknown>[] = () => []): Promise<void> {
    for (;;) {
      await Promise.all([...this.pending, ...others()]);
      if (this.pending.size === 0) return;
    }
  }
}
