/**
 * Agent mode's tool calling against fake servers that speak the APIs, so the real
 * SDKs run: Anthropic tool use, OpenAI function calling, the JSON-mode fallback, tolerant
 * reading of bad arguments, the budget check before a call, and routing to a fallback (the
 * scripted provider's turns: agent-scripted.test.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  UNPARSED_ARGS,
  agentToolSpecs,
  createProvider,
  type ConverseRequest,
  type LlmProvider,
} from "@loopsmith/shared/llm";
import { type AgentMessage } from "@loopsmith/shared/contracts";
import {
  FAST_RETRY,
  anthropicError,
  openaiError,
  openaiReply,
  startFakeLlm,
  type FakeLlm,
  type FakeResponse,
} from "../fixtures/fake-llm.js";
import { log, rejection, testConfig, type Wire } from "./helpers.js";

let fake: FakeLlm | undefined;
let second: FakeLlm | undefined;
afterEach(async () => {
  await fake?.close();
  await second?.close();
  fake = second = undefined;
});

const sonnet = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 };
const local = { inputPerMTok: 1, outputPerMTok: 2, cacheReadPerMTok: 0.5, cacheWritePerMTok: 0 };

/** The conversation of the tests: the opening, one turn with two calls, their two results. */
const CONVERSATION: AgentMessage[] = [
  { role: "user", content: "Fix the bulk discount. Test command: pytest -q" },
  {
    role: "assistant",
    content: "Let me look.",
    toolCalls: [
      { id: "toolu_1", name: "search", args: { pattern: "BULK_THRESHOLD" } },
      { id: "toolu_2", name: "read", args: { path: "nope.py" } },
    ],
  },
  {
    role: "tool",
    toolCallId: "toolu_1",
    name: "search",
    content: "pricing.py:12:    if qty > BULK_THRESHOLD:",
    isError: false,
  },
  { role: "tool", toolCallId: "toolu_2", name: "read", content: "no such file: nope.py", isError: true },
];

function converseRequest(o: Partial<ConverseRequest> = {}): ConverseRequest {
  return {
    role: "agent",
    system: "You are the agent.",
    messages: CONVERSATION,
    tools: agentToolSpecs(),
    note: "Steps left: 7.",
    context: { taskId: "task-agent", iteration: 1 },
    ...o,
  };
}

/** An Anthropic reply with these content blocks and `stop_reason: tool_use`. */
function anthropicBlocks(content: unknown[], usage: Record<string, number> = {}): Record<string, unknown> {
  return {
    id: "msg_fake_agent",
    type: "message",
    role: "assistant",
    model: "claude-sonnet-4-6",
    content,
    stop_reason: "tool_use",
    stop_sequence: null,
    usage: {
      input_tokens: 120,
      output_tokens: 40,
      cache_read_input_tokens: 900,
      cache_creation_input_tokens: 60,
      ...usage,
    },
  };
}

/** An OpenAI reply whose message has these `tool_calls` (arguments as raw strings). */
function openaiToolCalls(calls: Array<{ id: string; name: string; arguments: string }>, content: string | null = null) {
  const body = openaiReply(content, {
    promptTokens: 300,
    completionTokens: 30,
    cachedTokens: 200,
    finishReason: "tool_calls",
  });
  const choice = (body.choices as Array<{ message: Record<string, unknown> }>)[0]!;
  choice.message.tool_calls = calls.map((c) => ({
    id: c.id,
    type: "function",
    function: { name: c.name, arguments: c.arguments },
  }));
  return body;
}

async function anthropic(responses: FakeResponse[], llm: Record<string, unknown> = {}): Promise<LlmProvider> {
  fake = await startFakeLlm(responses);
  return createProvider({
    config: testConfig({
      provider: "anthropic",
      model: "claude-sonnet-4-6",
      prices: { "claude-sonnet-4-6": sonnet },
      apiKey: "sk-ant-test",
      baseUrl: fake.url,
      ...llm,
    }),
    log,
  });
}

async function openai(responses: FakeResponse[], llm: Record<string, unknown> = {}): Promise<LlmProvider> {
  fake = await startFakeLlm(responses);
  return createProvider({
    config: testConfig({
      provider: "openai-compatible",
      model: "qwen2.5-coder",
      baseUrl: `${fake.url}/v1`,
      prices: { "qwen2.5-coder": local },
      ...llm,
    }),
    log,
  });
}

const bodyOf = (i: number, f: FakeLlm | undefined = fake): Wire => f!.requests[i]!.body as Wire;

describe("agent mode: Anthropic tool use (real SDK, fake server)", () => {
  it("sends the tools and the tool results in one user message, and reads tool_use blocks back", async () => {
    const provider = await anthropic([
      {
        body: anthropicBlocks([
          { type: "text", text: "The threshold is exclusive; let me run the test." },
          { type: "tool_use", id: "toolu_3", name: "run", input: { command: "pytest -q tests/test_pricing.py" } },
          { type: "tool_use", id: "toolu_4", name: "read", input: { path: "pricing.py", startLine: 8 } },
        ]),
      },
    ]);
    const reply = await provider.converse!(converseRequest());
    expect(reply.content).toBe("The threshold is exclusive; let me run the test.");
    expect(reply.toolCalls).toEqual([
      { id: "toolu_3", name: "run", args: { command: "pytest -q tests/test_pricing.py" } },
      { id: "toolu_4", name: "read", args: { path: "pricing.py", startLine: 8 } },
    ]);
    expect(reply.provider).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
    expect(reply.usage).toMatchObject({
      calls: 1,
      inputTokens: 120,
      outputTokens: 40,
      cacheReadTokens: 900,
      cacheWriteTokens: 60,
    });
    expect(reply.usage.costUsd).toBeCloseTo((120 * 3 + 40 * 15 + 900 * 0.3 + 60 * 3.75) / 1e6, 12);

    expect(fake!.count).toBe(1);
    const body = bodyOf(0);
    expect(body.tool_choice).toEqual({ type: "auto" });
    expect(body.tools.map((t: Wire) => t.name)).toEqual(["list", "read", "search", "symbol", "run", "edit", "submit"]);
    const read = body.tools.find((t: Wire) => t.name === "read");
    expect(read.input_schema).toMatchObject({ type: "object", required: ["path"] });
    expect(Object.keys(read.input_schema.properties)).toEqual(["path", "startLine", "endLine"]);
    expect(body.system).toEqual([{ type: "text", text: "You are the agent.", cache_control: { type: "ephemeral" } }]);
    // opening, assistant (text + two tool_use), ONE user message with both results and the note.
    expect(body.messages).toHaveLength(3);
    expect(body.messages[0]).toEqual({
      role: "user",
      content: [
        { type: "text", text: "Fix the bulk discount. Test command: pytest -q", cache_control: { type: "ephemeral" } },
      ],
    });
    expect(body.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "text", text: "Let me look." },
        { type: "tool_use", id: "toolu_1", name: "search", input: { pattern: "BULK_THRESHOLD" } },
        { type: "tool_use", id: "toolu_2", name: "read", input: { path: "nope.py" } },
      ],
    });
    expect(body.messages[2]).toEqual({
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_1", content: "pricing.py:12:    if qty > BULK_THRESHOLD:" },
        {
          type: "tool_result",
          tool_use_id: "toolu_2",
          content: "no such file: nope.py",
          is_error: true,
          cache_control: { type: "ephemeral" },
        },
        // The steps-left note comes after the last cache breakpoint.
        { type: "text", text: "Steps left: 7." },
      ],
    });
  });

  it("the first turn: the opening alone, then the note; a text-only reply has no tool calls", async () => {
    const provider = await anthropic([{ body: anthropicBlocks([{ type: "text", text: "I think it is fixed." }], {}) }]);
    const reply = await provider.converse!(converseRequest({ messages: [CONVERSATION[0]!] }));
    expect(reply).toMatchObject({ content: "I think it is fixed.", toolCalls: [] });
    expect(bodyOf(0).messages).toEqual([
      {
        role: "user",
        content: [
          {
            type: "text",
            text: "Fix the bulk discount. Test command: pytest -q",
            cache_control: { type: "ephemeral" },
          },
          { type: "text", text: "Steps left: 7." },
        ],
      },
    ]);
  });

  it("refuses a call that would pass the budget before it is made", async () => {
    const provider = await anthropic([{ body: anthropicBlocks([]) }]);
    const err = await rejection(provider.converse!(converseRequest({ budget: { remainingUsd: 0.001 } })));
    expect(err.code).toBe("budget_exceeded");
    expect(err.message).toMatch(
      /^the task's USD budget would be passed \(\$0\.0010 left\): the next model turn could cost up to \$0\.\d+ \(estimated before it is made\)$/,
    );
    expect(fake!.count).toBe(0);
    // The same request within budget is made.
    await provider.converse!(converseRequest({ budget: { remainingUsd: 1 } }));
    expect(fake!.count).toBe(1);
  });

  it("falls back to the next model after an overload, and says so", async () => {
    second = await startFakeLlm([
      { body: openaiToolCalls([{ id: "call_a", name: "submit", arguments: '{"summary":"done"}' }]) },
    ]);
    const provider = await anthropic(
      [{ status: 529, headers: FAST_RETRY, body: anthropicError("overloaded_error", "Overloaded") }],
      {
        maxRetries: 0,
        fallback: [{ provider: "openai-compatible", model: "qwen2.5-coder", baseUrl: `${second.url}/v1` }],
      },
    );
    const reply = await provider.converse!(converseRequest());
    expect(reply.toolCalls).toEqual([{ id: "call_a", name: "submit", args: { summary: "done" } }]);
    expect(reply.provider).toMatchObject({
      name: "openai-compatible",
      model: "qwen2.5-coder",
      fallbackFrom: { name: "anthropic", code: "llm_overloaded" },
    });
    expect([fake!.count, second.count]).toEqual([1, 1]);
  });
});

describe("agent mode: OpenAI function calling (real SDK, fake server)", () => {
  it("sends tools and tool messages, and reads tool_calls back", async () => {
    const provider = await openai([
      {
        body: openaiToolCalls(
          [{ id: "call_9", name: "edit", arguments: '{"edits":[{"path":"pricing.py","search":"a","replace":"b"}]}' }],
          "Changing the comparison.",
        ),
      },
    ]);
    const reply = await provider.converse!(converseRequest());
    expect(reply.content).toBe("Changing the comparison.");
    expect(reply.toolCalls).toEqual([
      { id: "call_9", name: "edit", args: { edits: [{ path: "pricing.py", search: "a", replace: "b" }] } },
    ]);
    // prompt_tokens include the cached ones in OpenAI's convention.
    expect(reply.usage).toMatchObject({ calls: 1, inputTokens: 100, cacheReadTokens: 200, outputTokens: 30 });
    expect(reply.usage.costUsd).toBeCloseTo((100 * 1 + 30 * 2 + 200 * 0.5) / 1e6, 12);

    const body = bodyOf(0);
    expect(fake!.requests[0]!.path).toBe("/v1/chat/completions");
    expect(body.response_format).toBeUndefined();
    expect(body.tools).toHaveLength(7);
    expect(body.tools[2]).toMatchObject({
      type: "function",
      function: { name: "search", parameters: { type: "object", required: ["pattern"] } },
    });
    expect(body.messages).toEqual([
      { role: "system", content: "You are the agent." },
      { role: "user", content: "Fix the bulk discount. Test command: pytest -q" },
      {
        role: "assistant",
        content: "Let me look.",
        tool_calls: [
          { id: "toolu_1", type: "function", function: { name: "search", arguments: '{"pattern":"BULK_THRESHOLD"}' } },
          { id: "toolu_2", type: "function", function: { name: "read", arguments: '{"path":"nope.py"}' } },
        ],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "pricing.py:12:    if qty > BULK_THRESHOLD:" },
      { role: "tool", tool_call_id: "toolu_2", content: "ERROR: no such file: nope.py" },
      { role: "user", content: "Steps left: 7." },
    ]);
  });

  it("a garbage argument string becomes a call whose args carry the raw text, never a crash", async () => {
    const provider = await openai([
      {
        body: openaiToolCalls([
          { id: "call_1", name: "read", arguments: "path=pricing.py please" },
          // Repairable: single quotes and a trailing comma.
          { id: "call_2", name: "search", arguments: "{'pattern': 'BULK',}" },
          { id: "call_3", name: "list", arguments: "" },
          { id: "call_4", name: "run", arguments: "[1, 2]" },
        ]),
      },
    ]);
    const reply = await provider.converse!(converseRequest());
    expect(reply.toolCalls).toEqual([
      { id: "call_1", name: "read", args: { [UNPARSED_ARGS]: "path=pricing.py please" } },
      { id: "call_2", name: "search", args: { pattern: "BULK" } },
      { id: "call_3", name: "list", args: {} },
      { id: "call_4", name: "run", args: { [UNPARSED_ARGS]: "[1, 2]" } },
    ]);
  });

  it("JSON mode (llm.toolCalls json): tools in the prompt, one JSON call read tolerantly, results as user messages", async () => {
    const provider = await openai(
      [
        {
          body: openaiReply(
            'Sure!\n```json\n{"thought": "run the tests", "tool": "run", "args": {"command": "pytest -q"}}\n```',
          ),
        },
        { body: openaiReply("I am not sure what to do.") },
      ],
      { toolCalls: "json" },
    );
    const reply = await provider.converse!(converseRequest());
    expect(reply.content).toBe("run the tests");
    // The turn number (assistant messages so far: 1) keeps ids unique within the conversation.
    expect(reply.toolCalls).toEqual([{ id: "call_1_0", name: "run", args: { command: "pytest -q" } }]);
    const body = bodyOf(0);
    expect(body.tools).toBeUndefined();
    expect(body.response_format).toEqual({ type: "json_object" });
    expect(body.messages[0].content).toContain("You are the agent.");
    expect(body.messages[0].content).toContain('{"thought": "<why, briefly>", "tool": "<tool name>"');
    expect(body.messages[0].content).toMatch(/- edit: .*\n {2}args \(JSON Schema\): \{"type":"object"/);
    expect(body.messages.slice(1)).toEqual([
      { role: "user", content: "Fix the bulk discount. Test command: pytest -q" },
      {
        role: "assistant",
        content:
          '{"thought":"Let me look.","tool":"search","args":{"pattern":"BULK_THRESHOLD"}}\n' +
          '{"thought":"","tool":"read","args":{"path":"nope.py"}}',
      },
      { role: "user", content: "Result of search (toolu_1):\npricing.py:12:    if qty > BULK_THRESHOLD:" },
      { role: "user", content: "Result of read (toolu_2), an error:\nno such file: nope.py" },
      { role: "user", content: "Steps left: 7." },
    ]);
    // A reply without the JSON object is text without a call (the loop nudges the model).
    await expect(provider.converse!(converseRequest())).resolves.toMatchObject({
      content: "I am not sure what to do.",
      toolCalls: [],
    });
  });

  it("a server that rejects tools is asked again in JSON mode, and stays there", async () => {
    const provider = await openai([
      { status: 400, body: openaiError('"llama3" does not support tools') },
      { body: openaiReply('{"thought": "", "tool": "list", "args": {"path": "src"}}') },
      { body: openaiReply('{"tool": "submit", "args": {"summary": "x"}}') },
    ]);
    const reply = await provider.converse!(converseRequest());
    expect(reply.toolCalls).toEqual([{ id: "call_1_0", name: "list", args: { path: "src" } }]);
    expect(reply.usage.calls).toBe(1);
    expect(bodyOf(0).tools).toHaveLength(7);
    expect(bodyOf(1).tools).toBeUndefined();
    await provider.converse!(converseRequest());
    expect(fake!.count).toBe(3);
    expect(bodyOf(2).tools).toBeUndefined();
  });
});
