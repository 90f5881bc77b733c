/**
 * Agent mode's tools as a model is offered them: each tool's name, description
 * and the JSON Schema of its arguments, generated from the zod schemas in
 * `contracts/agent.ts` ({@link ToolArgs}); the tolerant reading of tool arguments; and the
 * JSON-mode protocol for servers without tool calling.
 */
import { z } from "zod";
import { ToolArgs, type ToolName } from "../contracts/agent.js";
import { AGENT_TOOLS } from "../contracts/agent-tools.js";
import { jsonCandidates } from "./parse.js";
import { jsonrepair } from "jsonrepair";
import type { ToolSpec } from "./types.js";

/**
 * The key of a tool call's `args` when the model's argument text was not a JSON object:
 * `{_unparsed: "<the text as the model sent it>"}`. The agent loop answers such a call with
 * an error observation (the arguments could not be read) instead of running the tool.
 */
export const UNPARSED_ARGS = "_unparsed";

/** What each tool does, as the model reads it: each entry's `description` in the tool table ({@link AGENT_TOOLS}). */
export const TOOL_DESCRIPTIONS: Readonly<Record<ToolName, string>> = Object.fromEntries(
  Object.entries(AGENT_TOOLS).map(([name, t]) => [name, t.description]),
) as Record<ToolName, string>;

/**
 * The JSON Schema of a tool's arguments: `z.toJSONSchema` of its {@link ToolArgs} entry, the
 * input side (fields with a default are optional), without `$schema`.
 */
export function toolParameters(name: ToolName): Record<string, unknown> {
  const schema = z.toJSONSchema(ToolArgs[name], { unrepresentable: "any", io: "input" }) as Record<string, unknown>;
  delete schema.$schema;
  return schema;
}

/**
 * The tools of agent mode as {@link ToolSpec}s, in `ToolName` order (or only `names`).
 */
export function agentToolSpecs(names: readonly ToolName[] = Object.keys(ToolArgs) as ToolName[]): ToolSpec[] {
  return names.map((name) => ({ name, description: TOOL_DESCRIPTIONS[name], parameters: toolParameters(name) }));
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A tool call's arguments from what the model sent: an object as it is; a string (OpenAI's
 * `function.arguments`) parsed as JSON, then by the tolerant reader's rules (fences, prose
 * around it, `jsonrepair`); an absent or empty value as `{}`. Anything that does not give a
 * JSON object becomes `{[UNPARSED_ARGS]: <the text>}`. Never throws.
 */
export function readToolArgs(raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null) return {};
  if (isRecord(raw)) return raw;
  if (typeof raw !== "string") return { [UNPARSED_ARGS]: JSON.stringify(raw) ?? String(raw) };
  if (!raw.trim()) return {};
  for (const candidate of jsonCandidates(raw)) {
    for (const attempt of [
      () => JSON.parse(candidate) as unknown,
      () => JSON.parse(jsonrepair(candidate)) as unknown,
    ]) {
      try {
        const value = attempt();
        if (isRecord(value)) return value;
      } catch {
        // try the next reading
      }
    }
  }
  return { [UNPARSED_ARGS]: raw };
}

/** One JSON-mode reply: `{"thought": "...", "tool": "<name>", "args": {...}}`. */
export const JsonModeTurn = z.object({
  thought: z.string().default(""),
  tool: z.string().min(1).max(100),
  args: z.unknown().optional(),
});
export type JsonModeTurn = z.infer<typeof JsonModeTurn>;

/**
 * The part of the system prompt that replaces native tool calling in JSON mode: every tool
 * with its description and argument schema, and the one reply shape.
 */
export function jsonModeInstruction(tools: readonly ToolSpec[]): string {
  const listed = tools
    .map((t) => `- ${t.name}: ${t.description}\n  args (JSON Schema): ${JSON.stringify(t.parameters)}`)
    .join("\n");
  return [
    "",
    "",
    "## Tools (JSON mode)",
    "You call a tool by replying with only one JSON object, no prose and no code fences:",
    '{"thought": "<why, briefly>", "tool": "<tool name>", "args": {<the tool\'s arguments>}}',
    "One tool per reply. The tool's result comes back in the next user message.",
    "The tools:",
    listed,
  ].join("\n");
}
