/**
 * `loopsmith mcp`: a Model Context Protocol server over stdio (`@modelcontextprotocol/server`,
 * the 2.x SDK), so that editors and other agents (Claude Code, Cursor, VS Code, Zed) call
 * loopsmith as tools: `solve`, `status`, `show`, `history` and `improve_status` (see
 * `tools.ts` for their inputs and results, docs/MCP.md for the setup). stdout carries the
 * protocol only: every log line and notice goes to stderr.
 *
 * Both protocol eras are served from one factory ({@link createMcpServer}): a client that
 * opens with `initialize` (2025-11-25 and older) gets a server pinned to that era for the
 * connection; one whose requests carry the per-request `_meta` envelope (2026-07-28:
 * `server/discover`, no handshake, no session) gets a modern one. The tools keep nothing on
 * the connection: a task's id, which `solve` mints (or takes) and reports in its first
 * progress notification and its result, is the handle `status` and `show` take back.
 *
 * A `solve` call sends an MCP progress notification for each of the task's events (phase,
 * iteration, what happened) when the request carries a progress token, and a cancelled
 * request (the client's `notifications/cancelled`, which aborts the handler's signal) cancels
 * the task as Ctrl-C on `solve` does. Both work the same way in both eras on stdio.
 */
import { McpServer, type JSONRPCMessage, type ServerContext, type Transport } from "@modelcontextprotocol/server";
import { StdioServerTransport, serveStdio } from "@modelcontextprotocol/server/stdio";
import type { Logger } from "pino";
import type { Config } from "@loopsmith/shared/runtime";
import type { GenerationReport, History, RunRecord, TaskInput } from "@loopsmith/shared/contracts";
import manifest from "../../../package.json" with { type: "json" };
import { CliError, errorCodeOf } from "../errors.js";
import { ExitCode } from "../exit-codes.js";
import { readReports } from "../improve/reports.js";
import { runDir } from "../improve/run.js";
import { shownNatsUrl } from "../preflight.js";
import { prepareRepoTask, type PreparedRepoTask } from "../solve-repo.js";
import { McpSession, type McpOptions, type SolveOutcome, type TaskHooks } from "./session.js";
import {
  HistoryInput,
  ImproveStatusInput,
  ShowInput,
  SolveInput,
  StatusInput,
  checkSolveArgs,
  errorResult,
  historyResult,
  improveStatusResult,
  inlineTask,
  limitsOfArgs,
  progressMessage,
  showResult,
  solveResult,
  statusResult,
  taskStatus,
  type SolveArgs,
  type ToolResult,
} from "./tools.js";

/** What the tools need from the stack ({@link McpSession} in the server; a stand-in in unit tests). */
export interface McpBackend {
  config(): Config;
  solve(
    task: TaskInput,
    prepared: PreparedRepoTask | undefined,
    hooks: TaskHooks,
    apply?: boolean,
  ): Promise<SolveOutcome>;
  taskState(taskId: string): Promise<unknown>;
  run(taskId: string): Promise<RunRecord>;
  history(limit: number): Promise<History>;
  improveStatus(runId: string): Promise<{ state: unknown; reports: GenerationReport[] }>;
}

/** What the server tells a client about itself (`initialize`'s result, or `server/discover`'s). */
export const MCP_INSTRUCTIONS =
  "loopsmith is a coding agent: `solve` runs a task (a git repository given by absolute path, or an inline " +
  "goal with a language and tests) until its tests pass or a limit stops it, reporting progress as it goes; " +
  "`status`, `show` and `history` read tasks back; `improve_status` reads an improvement run. A scripted " +
  "server (provider scripted) replays replies from a file and says so in every result.";

/** What the SDK hands a tool handler besides its arguments (`mcpReq`: the abort signal, `_meta`, notifications). */
type ToolContext = ServerContext;

/** `history`'s default length. */
const HISTORY_DEFAULT = 20;

/** Runs a tool's work and turns whatever it throws into an error result. */
async function answer(tool: string, log: Logger, work: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await work();
  } catch (err) {
    const code = errorCodeOf(err);
    if (code === "internal") log.error({ err, tool }, "mcp: a tool failed");
    else log.info({ err, tool }, "mcp: a tool call ended in an error");
    return errorResult(err);
  }
}

/**
 * One `solve` call: the task from its arguments (repo mode: the repository checked and its
 * snapshot made), submitted and followed, with a progress notification per event when the
 * client sent a progress token.
 * @throws LoopsmithError `bad_request`, `repo_invalid`, and whatever the backend throws
 */
async function solveCall(backend: McpBackend, log: Logger, args: SolveArgs, ctx: ToolContext): Promise<ToolResult> {
  checkSolveArgs(args);
  // The same `_meta.progressToken` in both eras (in 2026-07-28 beside the envelope's keys, which the SDK lifts out).
  const token = ctx.mcpReq._meta?.progressToken;
  let progress = 0;
  // One after the other, and all of them written before the result: a client drops progress
  // that arrives after the response.
  let sending = Promise.resolve();
  const notify = (message: string): void => {
    if (token === undefined) return;
    progress += 1;
    const params = { progressToken: token, progress, message };
    sending = sending
      .then(() => ctx.mcpReq.notify({ method: "notifications/progress", params }))
      .catch((err: unknown) => log.debug({ err }, "mcp: a progress notification was not sent"));
  };
  const prepared = args.repo
    ? await prepareRepoTask(
        args.goal,
        {
          repo: args.repo,
          ...(args.base !== undefined ? { base: args.base } : {}),
          ...(args.testCmd !== undefined ? { testCmd: args.testCmd } : {}),
          ...(args.setupCmd !== undefined ? { setupCmd: args.setupCmd } : {}),
          ...(args.mode !== undefined ? { mode: args.mode } : {}),
          ...(args.apply !== undefined ? { apply: args.apply } : {}),
          ...(args.taskId !== undefined ? { taskId: args.taskId } : {}),
          ...(args.review !== undefined ? { review: args.review } : {}),
          ...(args.memory !== undefined ? { memory: args.memory } : {}),
        },
        limitsOfArgs(args),
      )
    : undefined;
  const task = prepared ? prepared.task : inlineTask(args);
  const outcome = await backend.solve(
    task,
    prepared,
    {
      signal: ctx.mcpReq.signal,
      onSubmitted: (taskId, duplicate) =>
        notify(`task ${taskId} submitted${duplicate ? " (a duplicate of a task already submitted)" : ""}`),
      onEvent: (e) => {
        const message = progressMessage(e);
        if (message) notify(message);
      },
    },
    args.apply ?? false,
  );
  await sending;
  return solveResult(outcome.result, outcome.dag, outcome.repo);
}

/** Registers the tools that read: `status`, `show`, `history` and `improve_status`. */
function registerReadTools(server: McpServer, backend: McpBackend, log: Logger): void {
  server.registerTool(
    "status",
    {
      title: "A task's status",
      description:
        "Where a task is: running (its phase and iteration) or how it ended (passed, failed, cancelled, error, with " +
        "its stop reason), from the architect's checkpoint or, once that is gone, from the run memory recorded.",
      inputSchema: StatusInput,
      annotations: { readOnlyHint: true },
    },
    async ({ taskId }) =>
      answer("status", log, async () => {
        const state = await backend.taskState(taskId);
        const recorded =
          state === null || state === undefined
            ? await backend.run(taskId).catch((err: unknown) => {
                if (errorCodeOf(err) === "not_found") return undefined;
                throw err;
              })
            : undefined;
        const status = taskStatus(taskId, state, recorded);
        if (!status)
          throw new CliError(
            "not_found",
            `no task ${taskId} is known to the architect or to memory (a task still waiting in the intake queue has no state yet)`,
          );
        return statusResult(status);
      }),
  );

  server.registerTool(
    "show",
    {
      title: "A recorded run",
      description:
        "A finished task's run as memory recorded it: goal, verdict, iterations with their failures and reflections, " +
        "the agent-mode transcript, cost, time, providers, and the change (a repo-mode patch or an inline task's files).",
      inputSchema: ShowInput,
      annotations: { readOnlyHint: true },
    },
    async ({ taskId, transcript }) =>
      answer("show", log, async () => showResult(await backend.run(taskId), transcript ?? true)),
  );

  server.registerTool(
    "history",
    {
      title: "Recent tasks",
      description: "Recent tasks from memory, newest first: id, status, iterations, cost, goal.",
      inputSchema: HistoryInput,
      annotations: { readOnlyHint: true },
    },
    async ({ limit }) =>
      answer("history", log, async () => historyResult(await backend.history(limit ?? HISTORY_DEFAULT))),
  );

  server.registerTool(
    "improve_status",
    {
      title: "An improvement run's generations",
      description:
        "An improvement run (loopsmith improve): whether it runs and at which generation, or how it ended, and each " +
        "generation's verdict, reason, hypothesis, fixed/broken cases, p-value and cost.",
      inputSchema: ImproveStatusInput,
      annotations: { readOnlyHint: true },
    },
    async ({ runId, dir }) =>
      answer("improve_status", log, async () => {
        const held = await backend.improveStatus(runId);
        let reports = held.reports;
        // A run the architect no longer holds: its reports on disk (--out, or the data directory's).
        if (reports.length === 0 && (held.state === null || held.state === undefined || dir)) {
          reports = await readReports(runDir(backend.config(), runId, dir)).catch((err: unknown) => {
            if (errorCodeOf(err) === "not_found" && !dir) return [];
            throw err;
          });
        }
        return improveStatusResult(runId, held.state, reports);
      }),
  );
}

/**
 * The MCP server with loopsmith's tools on `backend`: the factory `serveStdio` calls for a
 * connection's era (the same tools in both; it may call it twice when a `server/discover`
 * probe is followed by `initialize`). Cheap: the stack lives in `backend`, not here.
 * @param log - where tool failures are logged (stderr)
 */
export function createMcpServer(backend: McpBackend, log: Logger): McpServer {
  // No `logging` capability: logs go to stderr (MCP logging is deprecated as of 2026-07-28).
  const server = new McpServer(
    { name: "loopsmith", version: manifest.version },
    { capabilities: { tools: {} }, instructions: MCP_INSTRUCTIONS },
  );

  server.registerTool(
    "solve",
    {
      title: "Solve a coding task",
      description:
        "Run a coding task end to end: plan, edit, gate, run the tests in a Docker sandbox, reflect on a failure " +
        "and try again, until the tests pass or a limit (iterations, budget) stops it. With repo (an absolute path " +
        "of a git repository), a passing change lands on branch loopsmith/<taskId>; without it, an inline task " +
        "from goal, language, files and tests. Sends progress notifications (phase, iteration) when asked; " +
        "cancelling the request cancels the task. Returns the result: status, stop reason, iterations, cost, the change.",
      inputSchema: SolveInput,
      annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    async (args, ctx) => answer("solve", log, () => solveCall(backend, log, args as SolveArgs, ctx)),
  );

  registerReadTools(server, backend, log);
  return server;
}

/** Requests that open a connection: a `server/discover` probe may come from a client's sibling process that is killed right after. */
const OPENING_METHODS = new Set(["server/discover", "initialize"]);

/**
 * A transport that passes everything through to `inner` and tells its owner two things:
 * that the client's first message beyond the opening exchange arrived (`onFirstUse`), and
 * that the connection closed (`onEnded`). `serveStdio` owns it as it owns any transport.
 */
export class ObservedTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport["onmessage"];
  readonly #inner: Transport;
  readonly #onFirstUse: () => void;
  readonly #onEnded: () => void;
  #used = false;

  /**
   * @param onFirstUse - called once, at the first message that is not `server/discover` or `initialize`
   * @param onEnded - called once the inner transport closed (stdin's end, or a close from either side)
   */
  constructor(inner: Transport, onFirstUse: () => void, onEnded: () => void) {
    this.#inner = inner;
    this.#onFirstUse = onFirstUse;
    this.#onEnded = onEnded;
  }

  /** Starts the inner transport, with its callbacks routed through this one. */
  async start(): Promise<void> {
    this.#inner.onmessage = (message, extra) => {
      if (!this.#used && !("method" in message && OPENING_METHODS.has(message.method))) {
        this.#used = true;
        this.#onFirstUse();
      }
      this.onmessage?.(message, extra);
    };
    this.#inner.onerror = (error) => this.onerror?.(error);
    this.#inner.onclose = () => {
      this.onclose?.();
      this.#onEnded();
    };
    await this.#inner.start();
  }

  /** Sends `message` on the inner transport. */
  send(message: JSONRPCMessage, options?: Parameters<Transport["send"]>[1]): Promise<void> {
    return this.#inner.send(message, options);
  }

  /** Closes the inner transport (which then reports its close, and so `onEnded`). */
  close(): Promise<void> {
    return this.#inner.close();
  }
}

/**
 * Serves MCP on stdin/stdout, in the era the client opens with, until the client closes
 * stdin (or SIGINT/SIGTERM), then cancels the tasks still running, and stops the stack it
 * started. The stack is started (or found) in the background at the client's first message
 * after the opening exchange (its `tools/list`, or the legacy `notifications/initialized`),
 * so that neither the handshake nor a client's `server/discover` probe in a process it kills
 * at once starts one; a tool call waits for it.
 * @returns {@link ExitCode.ok}
 */
export async function serveMcp(opts: McpOptions, log: Logger): Promise<number> {
  // stdout is the protocol: a stray console.log from a library would corrupt it.
  const toStderr = (...args: unknown[]): void => console.error(...args);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
  const session = new McpSession(opts, log);
  let ended: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => (ended = resolve));
  const warm = (): void => {
    session.connection().then(
      (c) =>
        process.stderr.write(
          `loopsmith mcp: the stack answers on ${shownNatsUrl(c.stack.natsUrl)}${c.stack.started.length ? ` (started here: ${c.stack.started.join(", ")}; stopped when this server exits)` : ""}\n`,
        ),
      (err: unknown) =>
        process.stderr.write(
          `loopsmith mcp: the stack did not start (${err instanceof Error ? err.message : String(err)}); each tool call tries again\n`,
        ),
    );
  };
  const transport = new ObservedTransport(new StdioServerTransport(), warm, ended);
  const handle = serveStdio(() => createMcpServer(session, log), {
    transport,
    onerror: (err) => log.debug({ err }, "mcp: a protocol error"),
  });
  let stopping = false;
  const stop = (): void => {
    stopping = true;
    void handle.close().catch(() => undefined);
    ended();
  };
  // A signal while already stopping is the client's escalation (SIGTERM, then SIGKILL).
  const onSignal = (): void => (stopping ? void session.hurry() : stop());
  process.stdin.once("end", stop);
  process.stdin.once("close", stop);
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.stderr.write(
    `loopsmith mcp ${manifest.version}: serving the Model Context Protocol on stdio (2025-era clients and 2026-07-28)\n`,
  );
  try {
    await closed;
  } finally {
    // The handlers stay while the stack stops: a signal then hurries it instead of ending the process.
    await session.close();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  return ExitCode.ok;
}
