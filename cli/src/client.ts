/**
 * The CLI's one client of a loopsmith stack: open a stack (starting what is missing) or join
 * a running one, submit a task, follow its events, get its result, cancel it, close.
 * `solve`, `bench`, the SWE-bench agent run, `mcp` and `improve` all go through it, so each
 * rides out a JetStream leader election the same way: every JetStream call that is safe to
 * repeat (the intake check, a publish with a message id) is retried while the cluster
 * settles (`retryWhileClusterSettles`, at most `CLUSTER_SETTLE_MS`), and the event watch
 * reads stored events again after a reconnect (`watch.ts`).
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import {
  Endpoints,
  call,
  ensureImproveIntake,
  ensureTaskIntake,
  natsServers,
  retryWhileClusterSettles,
  submitTask,
} from "@loopsmith/shared/bus";
import { type TaskInput, type TaskEvent, type TaskResult } from "@loopsmith/shared/contracts";
import { startLocalStack, type LocalStack, type StackOptions } from "./stack.js";
import { submitRun } from "./improve/submit.js";
import { watchEvents } from "./watch.js";

/** How long a cancel request waits for the architect's answer, in ms. */
export const CANCEL_TIMEOUT_MS = 5_000;

/** What {@link Client.submit} answers: the intake's sequence and whether the id was taken. */
export type Submitted = Awaited<ReturnType<typeof submitTask>>;

/** Options of {@link Client.result}. */
export interface ResultOptions {
  /** Stops waiting (the result is then undefined; the task goes on). */
  signal?: AbortSignal;
  /** Each of the task's events, the result's included, as it comes. */
  onEvent?: (event: TaskEvent) => void;
}

/**
 * A connection to a stack, with the owner token its tasks carry. Made by {@link openClient};
 * {@link Client.close} closes the connection and stops what the open started.
 */
export class Client {
  /** @internal use {@link openClient} */
  constructor(
    /** The stack this client opened or joined. */
    readonly stack: LocalStack,
    /** The NATS connection (for the calls this client does not wrap). */
    readonly nc: NatsConnection,
  ) {}

  /** The owner token this client's tasks carry (the stack's: see `LocalStack.owner`). */
  get owner(): string {
    return this.stack.owner;
  }

  /**
   * Submits `task` to the intake; a repeated submit of the same task id is deduplicated by
   * its message id, so the publish is retried while a cluster elects a leader.
   * @throws LoopsmithError `unavailable` when the intake does not answer within the settle time
   */
  submit(task: TaskInput): Promise<Submitted> {
    return retryWhileClusterSettles(() => submitTask(this.nc, task, this.owner));
  }

  /**
   * The task's events from the first, in order and each once, until its result (inclusive)
   * or until `signal` aborts (see {@link watchEvents}).
   * @throws LoopsmithError `permission_denied`, `unavailable` once the connection is closed
   */
  events(taskId: string, signal?: AbortSignal): AsyncGenerator<TaskEvent> {
    return watchEvents(this.nc, taskId, { owner: this.owner, ...(signal ? { signal } : {}) });
  }

  /**
   * Follows the task to its result.
   * @returns the result, or undefined when `opts.signal` aborted first
   * @throws LoopsmithError as {@link Client.events}
   */
  async result(taskId: string, opts: ResultOptions = {}): Promise<TaskResult | undefined> {
    for await (const event of this.events(taskId, opts.signal)) {
      opts.onEvent?.(event);
      if (event.kind === "result" && event.result) return event.result;
    }
    return undefined;
  }

  /**
   * Asks the architect to cancel the task (its `cancelled` result follows on the events).
   * @param reason - the reason the result carries (at most the contract's length)
   * @returns false when the task is already final or unknown
   * @throws LoopsmithError when the architect does not answer within `timeoutMs`
   */
  async cancel(taskId: string, reason: string, timeoutMs = CANCEL_TIMEOUT_MS): Promise<boolean> {
    const { cancelled } = await call(
      this.nc,
      Endpoints.architect.cancel,
      { v: 1, taskId, reason },
      { timeoutMs, retries: 0, owner: this.owner },
    );
    return cancelled;
  }

  /**
   * Makes sure the improver's intake stream exists (retried while a cluster settles), before
   * a first {@link Client.submitImprovement}.
   * @throws LoopsmithError `unavailable` when JetStream does not answer within the settle time
   */
  async ensureImproveIntake(): Promise<void> {
    await retryWhileClusterSettles(() => ensureImproveIntake(this.nc));
  }

  /**
   * Submits an improvement run (its base snapshot, then the request), retried while a
   * cluster settles: the snapshot's name is its commit and the request's id is the run id,
   * so a repeat stores nothing twice.
   * @throws LoopsmithError when the snapshot or the submit fails
   */
  submitImprovement(
    run: Omit<Parameters<typeof submitRun>[1], "owner">,
    extra: Parameters<typeof submitRun>[2],
  ): ReturnType<typeof submitRun> {
    return retryWhileClusterSettles(() => submitRun(this.nc, { ...run, owner: this.owner }, extra));
  }

  /** Closes the connection and stops the services and NATS this client's open started. */
  async close(): Promise<void> {
    await this.nc.close().catch(() => undefined);
    await this.stack.stop();
  }
}

/**
 * Opens a stack as `startLocalStack` does (joins the one `config.natsUrl` names, or starts
 * NATS and the missing services), connects as the stack's client user and checks the task
 * intake (retried while a cluster settles). On any failure what was started is stopped.
 * @throws LoopsmithError `unavailable` (NATS, Docker, a service), `cancelled` when `opts.signal` aborts, `config_invalid`
 */
export async function openClient(opts: StackOptions): Promise<Client> {
  const stack = await startLocalStack(opts);
  let conn: NatsConnection | undefined;
  try {
    conn = await connect({ ...stack.connectOptions, servers: natsServers(stack.natsUrl) });
    const open = conn;
    await retryWhileClusterSettles(() => ensureTaskIntake(open));
    return new Client(stack, open);
  } catch (err) {
    await conn?.close().catch(() => undefined);
    await stack.stop();
    throw err;
  }
}
