/**
 * Replies that travel with a task (`Task.script`, carried as `request.context.script`): a
 * task that carries a script or a simulation is answered by it whatever provider the stack
 * runs, so one running stack serves many scripted tasks at once. `createProvider` wraps
 * every provider it builds with {@link withTaskScripts}.
 */
import { createHash } from "node:crypto";
import { LRUCache } from "lru-cache";
import { z } from "zod";
import { TaskScript } from "../contracts/script.js";
import { LoopsmithError } from "../runtime/errors.js";
import { createEngineProvider, type Backend, type EngineDeps } from "./engine.js";
import { createScriptedBackend } from "./scripted.js";
import { createSimulatedBackend } from "./simulated.js";
import type { Completion, CompletionRequest, ConverseReply, ConverseRequest, LlmProvider } from "./types.js";

/** The name a task's own script goes by: its provider's model is `script:task`. */
export const TASK_SCRIPT_NAME = "task";

/** How many per-task providers {@link withTaskScripts} keeps by default (least recently used go first). */
export const TASK_SCRIPT_CACHE_MAX = 1_000;

/** Dependencies of {@link withTaskScripts}: the engine's (log, spend meter, transcript, limits). */
export interface TaskScriptDeps extends EngineDeps {
  /** Per-task providers kept. @defaultValue {@link TASK_SCRIPT_CACHE_MAX} */
  max?: number;
}

/**
 * The backend of a task's own replies: a script becomes the scripted backend named
 * {@link TASK_SCRIPT_NAME} (`{name: "scripted", model: "script:task", scripted: true}`), a
 * simulation the simulated backend (`{name: "simulated", model: "simulated:<source>",
 * scripted: true}`).
 */
export function taskScriptBackend(script: TaskScript): Backend {
  return script.kind === "loopsmith-script"
    ? createScriptedBackend(script, TASK_SCRIPT_NAME)
    : createSimulatedBackend(script);
}

/**
 * Wraps `inner` so that a request whose `context.script` is set is answered from that
 * script or simulation, through the same engine flow as every provider (validation
 * against `request.schema`, one re-ask, usage, the transcript line), and any other request
 * goes to `inner` unchanged; `converse` (agent mode) likewise. The completion's `provider` names the backend that answered
 * (see {@link taskScriptBackend}); usage is zero tokens and zero cost. `info` and `verify`
 * are `inner`'s.
 *
 * The per-task providers are kept in an LRU cache keyed by the task id and the SHA-256 of
 * the script's JSON, so a script's per-task counters survive between the calls of a task.
 * @throws LoopsmithError `bad_request` when the task's script is not a valid `TaskScript`;
 *   from a script or simulation, the engine's and the backend's codes (`llm_bad_reply`,
 *   `budget_exceeded` for a token budget below the estimate, `bad_request` for what a
 *   simulation does not answer); otherwise whatever `inner` throws
 */
export function withTaskScripts(inner: LlmProvider, deps: TaskScriptDeps): LlmProvider {
  const { max, ...engine } = deps;
  const cache = new LRUCache<string, LlmProvider>({ max: max ?? TASK_SCRIPT_CACHE_MAX });

  const providerFor = (taskId: string, script: unknown): LlmProvider => {
    const json = JSON.stringify(script);
    const key = `${taskId}\u0000${createHash("sha256").update(json).digest("hex")}`;
    const cached = cache.get(key);
    if (cached) return cached;
    const parsed = TaskScript.safeParse(script);
    if (!parsed.success) {
      throw new LoopsmithError(
        "bad_request",
        `task ${taskId} carries replies (Task.script) that are neither a loopsmith script nor a simulation: ${z.prettifyError(parsed.error)}`,
        { details: parsed.error.issues },
      );
    }
    const provider = createEngineProvider(taskScriptBackend(parsed.data), engine);
    cache.set(key, provider);
    return provider;
  };

  async function complete<T>(request: CompletionRequest<T>): Promise<Completion<T>> {
    const { script, taskId } = request.context;
    if (script === undefined) return inner.complete(request);
    return providerFor(taskId, script).complete(request);
  }

  /** Agent mode, answered the same way: a task's own script replays its `agent` turns. */
  async function converse(request: ConverseRequest): Promise<ConverseReply> {
    const { script, taskId } = request.context;
    const target = script === undefined ? inner : providerFor(taskId, script);
    if (!target.converse) {
      throw new LoopsmithError("bad_request", `the ${target.info.name} provider has no agent mode (tool calling)`);
    }
    return target.converse(request);
  }

  const verify = inner.verify;
  return verify
    ? { info: inner.info, complete, converse, verify: () => verify.call(inner) }
    : { info: inner.info, complete, converse };
}
