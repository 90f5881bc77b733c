/**
 * The stack a `loopsmith mcp` server works on, for its whole life: the running stack the
 * configuration names (`NATS_URL`, or one `loopsmith up` started), or one started here as
 * `solve` starts it (a NATS container and the five services), stopped when the server
 * exits. Tasks go through it the way `solve` sends them: submitted on the intake, followed
 * through their events, cancelled through the architect's `cancel` endpoint (what Ctrl-C on
 * `solve` and `bench` use).
 */
import { resolve } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { Endpoints, call } from "@loopsmith/shared/bus";
import { createProvider, loadScript } from "@loopsmith/shared/llm";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import {
  repoModeOf,
  type DagProgress,
  type GenerationReport,
  type History,
  type RunRecord,
  type TaskEvent,
  type TaskInput,
  type TaskResult,
  type TaskScript,
} from "@loopsmith/shared/contracts";
import { CliError } from "../errors.js";
import { dagOf } from "../dag-view.js";
import { readHistoryPages } from "../history.js";
import { fetchRun } from "../runs.js";
import { flagsOf } from "../steering.js";
import { finishRepo, uploadSnapshot, type PreparedRepoTask, type RepoOutcome } from "../solve-repo.js";
import type { LocalStack } from "../stack.js";
import { openClient, type Client } from "../client.js";

/** Options of `loopsmith mcp`: the provider of the services it starts, as `up` takes them. */
export interface McpOptions {
  provider?: string;
  model?: string;
  script?: string;
  baseUrl?: string;
  transcript?: string;
  config?: string;
}

/** How long a cancelled task's `cancelled` result is waited for before the watch stops, in ms. */
export const CANCEL_GRACE_MS = 30_000;

/** The reason a task cancelled by its MCP client carries (`CancelRequest.reason`). */
export const MCP_CANCEL_REASON = "cancelled by the MCP client";

/** A connection to the stack, once it answers. */
export interface Connected {
  /** The stack's client: submit, follow, cancel, close. */
  client: Client;
  nc: NatsConnection;
  /** The owner token this server's tasks carry (see `LocalStack.owner`). */
  owner: string;
  stack: LocalStack;
  config: Config;
}

/** What {@link McpSession.solve} reports as the task goes. */
export interface TaskHooks {
  /** The MCP request's abort signal: aborting it cancels the task. */
  signal: AbortSignal;
  /** Called once the task is on the intake. */
  onSubmitted?: (taskId: string, duplicate: boolean) => void;
  /** Each of the task's own events but the result, in order. */
  onEvent?: (e: TaskEvent) => void;
}

/** How a task submitted by {@link McpSession.solve} ended. */
export interface SolveOutcome {
  result: TaskResult;
  dag?: DagProgress;
  /** Repo mode: the branch written (or why not). */
  repo?: RepoOutcome;
}

/** The stack of one `loopsmith mcp` server and the tasks it runs on it. */
export class McpSession {
  readonly #opts: McpOptions;
  readonly #log: Logger;
  readonly #flags: Record<string, unknown>;
  #connecting: Promise<Connected> | undefined;
  #closed = false;
  /** Tasks submitted by this server and not yet ended, to cancel when it stops. */
  readonly #running = new Set<string>();
  #script: TaskScript | undefined;
  #providerChecked = false;

  constructor(opts: McpOptions, log: Logger) {
    this.#opts = opts;
    this.#log = log;
    this.#flags = flagsOf(opts);
  }

  /** The configuration, with the command's provider flags as its flags layer. */
  config(): Config {
    return loadConfig({ ...(this.#opts.config ? { file: this.#opts.config } : {}), flags: this.#flags });
  }

  /**
   * The stack, started (or found) on the first call; a start that failed is tried again
   * on the next call.
   * @throws LoopsmithError `config_invalid`, `unavailable` (NATS, Docker, a service), `cancelled` once closed
   */
  connection(): Promise<Connected> {
    if (this.#closed) return Promise.reject(new CliError("cancelled", "the MCP server is stopping"));
    this.#connecting ??= this.#connect().catch((err: unknown) => {
      this.#connecting = undefined;
      throw err;
    });
    return this.#connecting;
  }

  async #connect(): Promise<Connected> {
    const config = this.config();
    const env: NodeJS.ProcessEnv = {
      LOOPSMITH_CONFIG_JSON: JSON.stringify(this.#flags),
      ...(this.#opts.config ? { LOOPSMITH_CONFIG: resolve(this.#opts.config) } : {}),
    };
    const client = await openClient({ config, log: this.#log, env });
    const { stack } = client;
    const connected = { client, nc: client.nc, owner: client.owner, stack, config };
    this.#log.info(
      { natsUrl: stack.natsUrl, started: stack.started, onRunningStack: stack.onRunningStack },
      "mcp: the stack answers",
    );
    if (this.#closed) {
      await this.#release(connected);
      throw new CliError("cancelled", "the MCP server is stopping");
    }
    return connected;
  }

  /**
   * Before the first task: the provider of the services started here must work (a missing
   * or refused key fails the call, not the task); `--script` replies are read once, to travel
   * with tasks that services started elsewhere run.
   * @throws LoopsmithError `llm_auth`, `config_invalid`, `bad_request` (an unreadable script)
   */
  async #checkProvider(c: Connected): Promise<void> {
    if (this.#providerChecked) return;
    if (this.#opts.script) this.#script = loadScript(resolve(this.#opts.script));
    if (!c.config.natsUrl) {
      const provider = createProvider({ config: c.config, log: this.#log });
      if (provider.verify) await provider.verify();
    }
    this.#providerChecked = true;
  }

  /**
   * Submits `task` (repo mode: its snapshot first) and follows it to its result, as `solve`
   * does. Aborting `hooks.signal` cancels the task through the architect; the `cancelled`
   * result is then awaited for up to {@link CANCEL_GRACE_MS}.
   * @throws CliError `cancelled` when the signal aborted before the task was submitted, or no
   *   result came; LoopsmithError from the stack, the provider check or the submission
   */
  async solve(
    task: TaskInput,
    prepared: PreparedRepoTask | undefined,
    hooks: TaskHooks,
    apply = false,
  ): Promise<SolveOutcome> {
    const c = await this.connection();
    await this.#checkProvider(c);
    if (hooks.signal.aborted)
      throw new CliError("cancelled", "the request was cancelled before the task was submitted");
    let submitting: TaskInput = task;
    const script = this.#script;
    // Services this server did not start run their own provider: the replies go with the task;
    // repo mode names the mode the script was written for (as `solve` does).
    if (script && c.stack.started.length < 5) submitting = { ...submitting, script };
    if (submitting.repo && script && submitting.repo.mode === undefined)
      submitting = { ...submitting, repo: { ...submitting.repo, mode: repoModeOf({ repo: submitting.repo, script }) } };
    if (prepared) await uploadSnapshot(c.nc, prepared, c.owner);
    const submitted = await c.client.submit(submitting);
    const taskId = submitted.taskId;
    this.#running.add(taskId);
    hooks.onSubmitted?.(taskId, submitted.duplicate);
    const watch = new AbortController();
    let grace: NodeJS.Timeout | undefined;
    const onAbort = (): void => {
      this.#log.info({ taskId }, "mcp: the client cancelled the request; cancelling the task");
      grace = setTimeout(() => watch.abort(), CANCEL_GRACE_MS);
      void this.cancel(taskId).catch((err: unknown) => {
        this.#log.warn({ err, taskId }, "mcp: cannot cancel the task");
        watch.abort();
      });
    };
    if (hooks.signal.aborted) onAbort();
    else hooks.signal.addEventListener("abort", onAbort, { once: true });
    let result: TaskResult | undefined;
    let dag: DagProgress | undefined;
    try {
      for await (const e of c.client.events(taskId, watch.signal)) {
        if (e.taskId !== taskId) continue;
        if (e.kind === "result" && e.result) {
          result = e.result;
          dag = dagOf(e);
        } else hooks.onEvent?.(e);
      }
    } finally {
      hooks.signal.removeEventListener("abort", onAbort);
      clearTimeout(grace);
      this.#running.delete(taskId);
    }
    if (!result) throw new CliError("cancelled", `stopped waiting; task ${taskId} may still be running`, { taskId });
    const repo = prepared ? await finishRepo(prepared, result, apply) : undefined;
    return { result, ...(dag ? { dag } : {}), ...(repo ? { repo } : {}) };
  }

  /**
   * The architect's checkpoint of one of this server's owner's tasks (`TaskState`), or null
   * when it holds none (unknown, another owner's, or not yet taken from the intake).
   */
  async taskState(taskId: string): Promise<unknown> {
    const c = await this.connection();
    const { state } = await call(
      c.nc,
      Endpoints.architect.status,
      { v: 1, taskId },
      { timeoutMs: 10_000, retries: 1, owner: c.owner },
    );
    return state;
  }

  /**
   * The run memory recorded for a task (as `loopsmith show` reads it).
   * @throws LoopsmithError `not_found` when none is recorded
   */
  async run(taskId: string): Promise<RunRecord> {
    const c = await this.connection();
    return fetchRun(c.nc, taskId, { owner: c.owner });
  }

  /** The newest `limit` tasks from memory (as `loopsmith history` reads them). */
  async history(limit: number): Promise<History> {
    const c = await this.connection();
    return readHistoryPages(limit, (n, offset) =>
      call(c.nc, Endpoints.memory.history, { v: 1, limit: n, offset }, { owner: c.owner }),
    );
  }

  /** An improvement run's checkpoint (null when the architect holds none) and its generations' reports. */
  async improveStatus(runId: string): Promise<{ state: unknown; reports: GenerationReport[] }> {
    const c = await this.connection();
    return call(c.nc, Endpoints.architect.improveStatus, { runId }, { timeoutMs: 10_000, retries: 1, owner: c.owner });
  }

  /**
   * Asks the architect to cancel one of this server's tasks (`loopsmith.architect.cancel`).
   * @returns false when the task is already final or unknown
   */
  async cancel(taskId: string): Promise<boolean> {
    const c = await this.connection();
    return c.client.cancel(taskId, MCP_CANCEL_REASON);
  }

  /**
   * Stops the server's work: cancels its tasks still running (as Ctrl-C on `solve` does),
   * closes the connection and stops what it started. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const connecting = this.#connecting;
    if (!connecting) return;
    const c = await connecting.catch(() => undefined);
    if (!c) return;
    await Promise.all(
      [...this.#running].map((taskId) =>
        c.client
          .cancel(taskId, MCP_CANCEL_REASON)
          .catch((err: unknown) => this.#log.warn({ err, taskId }, "mcp: cannot cancel the task at exit")),
      ),
    );
    await this.#release(c);
  }

  /**
   * When the client is about to kill this process (the MCP stdio shutdown: stdin closed,
   * then SIGTERM 2 s later, then SIGKILL 2 s after that) while {@link close} still waits for
   * the services to stop (the architect takes about 4 s): removes the NATS container this
   * server started now, so that the kill leaves no container behind (the services, whose IPC
   * channel closes with this process, exit on their own).
   */
  async hurry(): Promise<void> {
    const c = await this.#connecting?.catch(() => undefined);
    const id = c?.stack.natsContainerId;
    if (!id) return;
    this.#log.info({ id: id.slice(0, 12) }, "mcp: stopping: removing the NATS container before the client's kill");
    const { default: Docker } = await import("dockerode");
    await new Docker()
      .getContainer(id)
      .remove({ force: true })
      .catch((err: unknown) => this.#log.warn({ err }, "mcp: cannot remove the NATS container"));
  }

  async #release(c: Connected): Promise<void> {
    await c.client.close();
  }
}
