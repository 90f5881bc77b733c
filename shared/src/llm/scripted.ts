/**
 * The scripted provider: replays replies from a file instead of calling a model. It drives
 * the tests and the offline demo, and says so: `info.scripted` is `true` and its model is
 * `script:<file basename>`.
 *
 * File format (`config.llm.scriptPath`, JSON):
 * `{"v": 1, "kind": "loopsmith-script", "description": "…", "replies": {"plan": [...], "build": [...], ...}}`.
 * The n-th call for a role within one task gets `replies[role][n]` (0-based); once the list
 * is used up the last entry repeats. n is the task's own count — `context.callsBefore`, the
 * calls the task already made for the role as its state records them, plus the turns of
 * this conversation — so a step retried on another replica, or after the service or the
 * conductor restarted, gets the same reply: a scripted run is the same whatever the
 * topology. (Without `callsBefore`, as when the library is used directly, this process
 * counts the calls per task and role.) A string entry is raw reply text (so garbage and
 * fenced JSON can be scripted); any other JSON value is the reply as JSON. Replies go
 * through the same reader, validation and re-ask as real providers: the re-ask is simply
 * the next call, which takes the next entry. The lesson call (schema `lessons`, asked when a
 * task passed after failing) is the exception to "the last entry repeats": a script whose
 * entries for its role end before it has no lesson reply, and the call is refused with
 * `provider_unconfigured`, which the loop reads as "no lesson to learn" (a repeated reflection
 * is no lesson). `tasks` holds replies for particular tasks (by
 * id or id suffix), as the generations of an improvement run need. Usage counts calls, with
 * zero tokens and zero cost.
 *
 * Agent mode (`converse`): the n-th agent call of a task (n = `context.callsBefore`, else this
 * process's count) gets `replies.agent[n]`, a {@link ScriptTurn} (`{content, toolCalls: [{id?,
 * name, args}]}`); a call without an `id` gets `call_<n>_<i>`. Once the list is used up the
 * last turn repeats.
 *
 * A task may also carry its own script (`Task.script`, see `withTaskScripts` in
 * `task-script.ts`); it is then answered from that whatever the file. Without a file
 * ({@link createScriptlessBackend}) the scripted provider answers only such tasks.
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { z } from "zod";
import { LoopsmithError } from "../runtime/errors.js";
import { ScriptFile, ScriptTurn, type RoleReplies } from "../contracts/script.js";
import { LESSON_SCHEMA_NAME } from "./lesson-prompt.js";
import type { Backend, Conversation, ToolTurn, TurnReply } from "./engine.js";
import type { ChatMessage, CompletionRequest, ConverseRequest, Role } from "./types.js";

export { ScriptFile };

/**
 * Reads and checks a script file.
 * @throws LoopsmithError `config_invalid` with one sentence: the file cannot be read, is
 *   not JSON, or is not a loopsmith script (the zod problems follow the sentence)
 */
export function loadScript(path: string): ScriptFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new LoopsmithError(
      "config_invalid",
      `cannot read the script file ${path} (LOOPSMITH_SCRIPT): ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new LoopsmithError("config_invalid", `the script file ${path} is not valid JSON: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const parsed = ScriptFile.safeParse(json);
  if (!parsed.success) {
    throw new LoopsmithError(
      "config_invalid",
      `the script file ${path} is not a loopsmith script ({"v": 1, "kind": "loopsmith-script", "replies": {role: [...]}}): ${z.prettifyError(parsed.error)}`,
      { details: parsed.error.issues },
    );
  }
  return parsed.data;
}

/**
 * Builds the scripted backend over a loaded script; `file` names it in `info.model`
 * (`script:<basename of file>`; a task's own script is named `task`, so `script:task`).
 * Its conversations throw `llm_bad_reply` when the script has no replies for a role.
 */
export function createScriptedBackend(script: ScriptFile, file: string): Backend {
  const used = new Map<string, number>();
  const model = `script:${basename(file)}`;
  /**
   * The entry for `role`'s call number `n` of a task (or this process's count when n is
   * undefined), and the number of the call it answers.
   */
  const entryAt = (role: Role, taskId: string, n: number | undefined): [unknown, number] => {
    const own = scriptedEntriesFor(script, taskId, role);
    const entries: unknown[] | undefined = own?.[1][role] ?? script.replies[role];
    if (!entries || entries.length === 0) {
      throw new LoopsmithError("llm_bad_reply", `the script ${basename(file)} has no replies for the role "${role}"`);
    }
    const key = `${taskId}\u0000${role}`;
    const counted = used.get(key) ?? 0;
    used.set(key, counted + 1);
    const index = n ?? counted;
    return [entries[Math.min(index, entries.length - 1)], index];
  };
  const next = (role: Role, taskId: string, n: number | undefined): unknown => entryAt(role, taskId, n)[0];
  return {
    info: { name: "scripted", model, scripted: true },
    price: { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 },
    open<T>(request: CompletionRequest<T>): Conversation {
      const { callsBefore } = request.context;
      if (request.schemaName === LESSON_SCHEMA_NAME) {
        // The lesson call is answered only by an entry of its own: the repeated last reflection is no lesson.
        const entries =
          scriptedEntriesFor(script, request.context.taskId, request.role)?.[1][request.role] ??
          script.replies[request.role] ??
          [];
        const n = callsBefore ?? used.get(`${request.context.taskId}\u0000${request.role}`) ?? 0;
        if (n >= entries.length)
          throw new LoopsmithError(
            "provider_unconfigured",
            `the script ${basename(file)} has no lesson reply for task ${request.context.taskId} (its ${request.role} entries end at ${entries.length})`,
          );
      }
      return replayConversation(request, (turn) =>
        next(request.role, request.context.taskId, callsBefore === undefined ? undefined : callsBefore + turn),
      );
    },
    async converse(request: ConverseRequest): Promise<ToolTurn> {
      const [entry, n] = entryAt(request.role, request.context.taskId, request.context.callsBefore);
      return scriptedTurn(entry, n, basename(file));
    },
  };
}

/**
 * A scripted agent turn as the engine returns it: the entry read as a {@link ScriptTurn},
 * call ids defaulting to `call_<n>_<i>`, zero tokens.
 * @throws LoopsmithError `llm_bad_reply` when the entry is not a turn
 */
export function scriptedTurn(entry: unknown, n: number, scriptName: string): ToolTurn {
  const parsed = ScriptTurn.safeParse(entry);
  if (!parsed.success) {
    throw new LoopsmithError(
      "llm_bad_reply",
      `agent turn ${n} of the script ${scriptName} is not a turn ({"content"?, "toolCalls": [{"name", "args"}]}): ${z.prettifyError(parsed.error)}`,
    );
  }
  return {
    content: parsed.data.content,
    toolCalls: parsed.data.toolCalls.map((c, i) => ({ id: c.id ?? `call_${n}_${i}`, name: c.name, args: c.args })),
    tokens: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    truncated: false,
  };
}

/** `info.model` of the scripted provider when it has no script file. */
export const SCRIPTLESS_MODEL = "script:none";

/**
 * The `tasks` entry of a script that answers `role` for `taskId`: a key equal to the id or to
 * its last `-`-separated part(s) first (`gen-2` for `run7-gen-2`, `storage-a2` for the second
 * attempt of subtask `storage`); then, for a DAG subtask's child task (`<parent>--<subtask>-a<N>`,
 * see `childTaskId`), a key equal to the subtask id, for every attempt.
 */
export function scriptedEntriesFor(script: ScriptFile, taskId: string, role: Role): [string, RoleReplies] | undefined {
  const entries = Object.entries(script.tasks ?? {}).filter(([, r]) => r[role]?.length);
  const own = entries.find(([k]) => taskId === k || taskId.endsWith(`-${k}`));
  if (own) return own;
  const subtask = /--([a-z][a-z0-9_-]{0,23})-a\d+$/.exec(taskId)?.[1];
  return subtask ? entries.find(([k]) => k === subtask) : undefined;
}

/**
 * The scripted provider's backend when no script file is configured (`LOOPSMITH_SCRIPT`
 * unset): a stack that only serves tasks carrying their own replies (`Task.script`), which
 * `withTaskScripts` answers before any call reaches this backend. Info
 * `{name: "scripted", model: "script:none", scripted: true}`, price zero.
 *
 * Every call that does reach it is refused.
 * @throws LoopsmithError `config_invalid` from `open()` (so from `complete()`), naming the
 *   task: it carries no replies and there is no script file to fall back on
 */
export function createScriptlessBackend(): Backend {
  return {
    info: { name: "scripted", model: SCRIPTLESS_MODEL, scripted: true },
    price: { inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0 },
    open<T>(request: CompletionRequest<T>): Conversation {
      throw new LoopsmithError(
        "provider_unconfigured",
        `the scripted provider has no script file (LOOPSMITH_SCRIPT) and task ${request.context.taskId} carries no replies (Task.script)`,
      );
    },
    async converse(request: ConverseRequest): Promise<ToolTurn> {
      throw new LoopsmithError(
        "provider_unconfigured",
        `the scripted provider has no script file (LOOPSMITH_SCRIPT) and task ${request.context.taskId} carries no replies (Task.script)`,
      );
    },
  };
}

/**
 * A conversation answered without a model: turn n (0-based, re-asks included) replies with
 * `answer(n)`, a string as raw text, any other value as JSON; zero tokens. A re-ask appends
 * the reply and the feedback, as a model's conversation would. The scripted and simulated
 * backends use it.
 */
export function replayConversation<T>(request: CompletionRequest<T>, answer: (turn: number) => unknown): Conversation {
  const neutral: ChatMessage[] = [...request.messages];
  let turn = 0;
  return {
    system: request.system,
    extraChars: 0,
    messages: () => [...neutral],
    async send(): Promise<TurnReply> {
      const entry = answer(turn);
      turn += 1;
      return {
        content: typeof entry === "string" ? { kind: "text", text: entry } : { kind: "json", value: entry },
        tokens: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
        truncated: false,
      };
    },
    reask(reply: TurnReply, feedback: string): void {
      const said = reply.content.kind === "text" ? reply.content.text : (JSON.stringify(reply.content.value) ?? "");
      if (said.trim()) neutral.push({ role: "assistant", content: said });
      neutral.push({ role: "user", content: feedback });
    },
  };
}
