/**
 * A concurrency limit with a bounded queue: at most `concurrency` holders at once, at most
 * `queueLimit` waiting; beyond that `acquire` refuses at once (unless the caller asks to
 * wait past the bound: a session's `run`, whose container is pinned to this executor).
 */
import { LoopsmithError, busyError } from "@loopsmith/shared/runtime";

interface Waiter {
  resolve: (release: () => void) => void;
  reject: (err: LoopsmithError) => void;
  signal?: AbortSignal | undefined;
  onAbort?: () => void;
}

/** Concurrency limit plus bounded FIFO queue. */
export class Limiter {
  private active = 0;
  private readonly waiting: Waiter[] = [];
  private closed = false;

  constructor(
    private readonly concurrency: number,
    private readonly queueLimit: number,
  ) {}

  /** Runs holding a slot now. */
  get running(): number {
    return this.active;
  }

  /** Runs waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Waits for a slot (first in, first served); returns the function that frees it (call it
   * exactly once).
   * @param opts.pastQueueLimit - wait even when `queueLimit` others already wait (the caller
   *   cannot go to another executor, and bounds its own waiters)
   * @throws LoopsmithError `unavailable` when the limiter is closed, or when the queue is full
   *   (a {@link busyError} `full`: another executor may take the run),
   *   `cancelled` when `signal` aborts while waiting.
   */
  acquire(signal?: AbortSignal, opts: { pastQueueLimit?: boolean } = {}): Promise<() => void> {
    if (this.closed) return Promise.reject(new LoopsmithError("unavailable", "the executor is stopping"));
    if (signal?.aborted)
      return Promise.reject(new LoopsmithError("cancelled", "the run was cancelled before it started"));
    if (this.active < this.concurrency) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    if (this.waiting.length >= this.queueLimit && !opts.pastQueueLimit) {
      return Promise.reject(
        busyError(`the executor is busy: ${this.active} runs running and ${this.waiting.length} waiting`, "full"),
      );
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, signal };
      if (signal) {
        waiter.onAbort = () => {
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(new LoopsmithError("cancelled", "the run was cancelled before it started"));
        };
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.waiting.push(waiter);
    });
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiting.shift();
      if (next) {
        if (next.onAbort) next.signal?.removeEventListener("abort", next.onAbort);
        next.resolve(this.releaser());
      } else {
        this.active--;
      }
    };
  }

  /** Refuses new work and fails every waiter with `unavailable`. */
  close(): void {
    this.closed = true;
    for (const w of this.waiting.splice(0)) {
      if (w.onAbort) w.signal?.removeEventListener("abort", w.onAbort);
      w.reject(new LoopsmithError("unavailable", "the executor stopped before the run started"));
    }
  }
}
