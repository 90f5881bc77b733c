/**
 * The tools of agent mode, as the architect answers them, dispatched by the tool table
 * (`AGENT_TOOLS` in `@loopsmith/shared/contracts`): a tool that `runs` in the executor is a call in the
 * session container (`session.ts`); the others are answered here (`symbol`: the repo map's
 * index; `edit`: the search/replace engine, the policy and the parse check; `submit` ends the
 * loop). Every problem a model can cause (bad arguments, an edit that misses or is
 * refused, a file that is not there) is an error observation: the loop goes on.
 */
import { z } from "zod";
import {
  AGENT_TOOLS,
  ToolName,
  type ArchitectToolName,
  type ExecutorToolName,
  type SessionCall,
  type Candidate,
  type FileChange,
  type ToolCall,
} from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { unifiedPatch } from "@loopsmith/shared/workspace";
import { UNPARSED_ARGS } from "@loopsmith/shared/llm";
import { agentTexts } from "../event-texts.js";
import { currentReader, listTree } from "../repo/context.js";
import { applyCandidate, policyOf } from "../repo/workspace.js";
import { HandBack } from "../durable/index.js";
import { runTimeoutOf } from "../state.js";
import { renderObservation } from "./observe.js";
import { callSession, type LoopContext } from "./session.js";
import { findSymbol } from "./symbol.js";
import { syntaxError } from "./syntax.js";

/** A tool's answer before the cut: its text, whether it failed, and (submit) the summary. */
export interface ToolResult {
  content: string;
  isError: boolean;
  submitted?: string;
}

const error = (content: string): ToolResult => ({ content, isError: true });

/** A tool's arguments as its schema in the tool table gives them. */
type ArgsOf<N extends ToolName> = z.infer<(typeof AGENT_TOOLS)[N]["args"]>;

/**
 * What the architect sends the session for each `executor` tool of the table: the checked
 * arguments, with a `run`'s timeout capped by the task's run timeout.
 */
const SESSION_CALLS: { [N in ExecutorToolName]: (ctx: LoopContext, args: ArgsOf<N>) => SessionCall["call"] } = {
  list: (_ctx, args) => ({ tool: "list", ...args }),
  read: (_ctx, args) => ({ tool: "read", ...args }),
  search: (_ctx, args) => ({ tool: "search", ...args }),
  run: (ctx, args) => {
    const cap = runTimeoutOf(ctx.s);
    return { tool: "run", command: args.command, timeoutMs: Math.min(args.timeoutMs ?? cap, cap) };
  },
};

/** The implementations of the tools the table says the architect answers. */
const HERE: { [N in ArchitectToolName]: (ctx: LoopContext, args: ArgsOf<N>) => Promise<ToolResult> } = {
  symbol: (ctx, { name }) =>
    Promise.resolve({ content: findSymbol(name, treeFiles(ctx), currentReader(ctx.root, ctx.loop)), isError: false }),
  edit: (ctx, { edits }) => edit(ctx, edits),
  submit: (_ctx, { summary }) =>
    Promise.resolve({ content: agentTexts.submitted(summary), isError: false, submitted: summary }),
};

/** Runs a checked call on the side the tool table names: a session call rendered to text, or the architect's own. */
function dispatch<N extends ToolName>(ctx: LoopContext, name: N, args: ArgsOf<N>): Promise<ToolResult> {
  if (AGENT_TOOLS[name].runs === "executor") {
    const tool = name as ExecutorToolName;
    const request = (SESSION_CALLS[tool] as (c: LoopContext, a: unknown) => SessionCall["call"])(ctx, args);
    return callSession(ctx, request).then((o) => ({ content: renderObservation(tool, o), isError: !o.ok }));
  }
  return (HERE[name as ArchitectToolName] as (c: LoopContext, a: unknown) => Promise<ToolResult>)(ctx, args);
}

/**
 * Answers one tool call. Arguments are checked against the tool's schema in the tool table
 * ({@link AGENT_TOOLS}) first.
 * @throws HandBack when the session cannot be reached now (the task resumes from its checkpoint)
 */
export async function runTool(ctx: LoopContext, call: ToolCall): Promise<ToolResult> {
  const name = ToolName.safeParse(call.name);
  if (!name.success) return error(agentTexts.unknownTool(call.name, ToolName.options));
  // A provider that could not read the model's argument text as JSON passes it on raw: the
  // schemas would drop the unknown key and take their defaults (a `list` of "."), so it is refused here.
  const raw = call.args[UNPARSED_ARGS];
  if (raw !== undefined)
    return error(agentTexts.badArgs(name.data, `the arguments are not a JSON object: ${String(raw).slice(0, 200)}`));
  const parsed = AGENT_TOOLS[name.data].args.safeParse(call.args);
  if (!parsed.success) return error(agentTexts.badArgs(name.data, z.prettifyError(parsed.error)));
  try {
    return await dispatch(ctx, name.data, parsed.data);
  } catch (err) {
    if (err instanceof HandBack) throw err;
    if (err instanceof LoopsmithError && err.retryable)
      throw new HandBack(`${call.name}: ${err.message}`, { cause: err });
    return error(agentTexts.toolFailed(call.name, (err as Error).message));
  }
}

/** Every path of the candidate's tree: the base's, less the removed, with the new files. */
function treeFiles(ctx: LoopContext): string[] {
  const deleted = new Set(ctx.loop.deleted);
  const all = new Set(listTree(ctx.root).filter((p) => !deleted.has(p)));
  for (const f of ctx.loop.files) all.add(f.path);
  return [...all].sort();
}

/**
 * `edit`: the edits applied in order over the candidate so far, with the engine of one-shot
 * repo mode (`applyCandidate`: all or nothing, a miss answered with the nearest lines).
 * Refused at once, nothing applied: a change the policy blocks (the test runner's
 * configuration; dependencies under `reject`), as the gate would block it; and a Python,
 * JavaScript or TypeScript file that parsed before the edit and no longer does (the parser's
 * message; a new file, or one that did not parse before, is not held to it). An accepted
 * edit is written to the session and answered with its diff.
 */
async function edit(ctx: LoopContext, edits: Candidate["edits"] & object): Promise<ToolResult> {
  const { s, run, root, loop } = ctx;
  const current: Candidate = { files: loop.files, deleted: loop.deleted, tests: [], notes: "" };
  const applied = await applyCandidate({ ...s, candidate: current }, run.steps, {
    files: [],
    tests: [],
    notes: "",
    edits,
  });
  if (!applied.ok) return error(applied.message ?? "the edits could not be applied");
  const next = applied.candidate;
  const { decision } = await policyOf({ ...s, candidate: next }, run.steps);
  if (decision.action === "block") return error(agentTexts.editBlocked(decision.reason));
  const before = currentReader(root, current);
  const after = currentReader(root, next);
  const touched = [...new Set(edits.map((e) => e.path))];
  const problems: string[] = [];
  for (const path of touched) {
    const [was, now] = [before(path), after(path)];
    if (was === undefined || now === undefined || syntaxError(path, was) !== undefined) continue;
    const problem = syntaxError(path, now);
    if (problem) problems.push(problem);
  }
  if (problems.length) return error(agentTexts.editBreaksSyntax(problems));
  const written: FileChange[] = [];
  const removed: string[] = [];
  for (const path of touched) {
    const [was, now] = [before(path), after(path)];
    if (now === undefined) {
      if (was !== undefined) removed.push(path);
    } else if (now !== was) written.push({ path, content: now });
  }
  if (written.length || removed.length) await callSession(ctx, { tool: "write", files: written, deleted: removed });
  loop.files = next.files;
  loop.deleted = next.deleted ?? [];
  loop.edits = [...loop.edits, ...edits];
  loop.treeVersion += 1;
  const diff = unifiedPatch(before, written, removed);
  const text = agentTexts.editApplied([...written.map((f) => f.path), ...removed.map((p) => `-${p}`)], diff);
  return {
    content: decision.action === "ask" ? `${text}\n${agentTexts.editNeedsApproval(decision.reason)}` : text,
    isError: false,
  };
}
