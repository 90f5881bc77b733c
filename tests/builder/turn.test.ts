/**
 * The builder's agent-mode endpoint (`loopsmith.builder.turn`) over real NATS, with
 * the scripted provider: the turns a task carries are replayed by `callsBefore`, the prompt
 * the model would see is the agent prompt with the task, the hints, the previous attempt and
 * the steps left, a retried request joins the call in flight, and the budget refuses a call
 * before it is made.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import pino from "pino";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { builderService } from "@loopsmith/builder";
import { Config } from "@loopsmith/shared/runtime";
import { Endpoints, ServiceNames, call, startService } from "@loopsmith/shared/bus";
import { loadPrompt, type TranscriptLine } from "@loopsmith/shared/llm";
import { TaskScript, type AgentTurnRequest } from "@loopsmith/shared/contracts";
import { it } from "../fixtures/index.js";

const log = pino({ level: "silent" });

const script = TaskScript.parse({
  v: 1,
  kind: "loopsmith-script",
  replies: {
    agent: [
      { content: "Find the threshold.", toolCalls: [{ name: "search", args: { pattern: "BULK_THRESHOLD" } }] },
      {
        toolCalls: [
          {
            name: "edit",
            args: { edits: [{ path: "pricing.py", search: "qty > BULK", replace: "qty >= BULK" }] },
          },
        ],
      },
      { toolCalls: [{ id: "fin", name: "submit", args: { summary: "Inclusive bulk threshold" } }] },
    ],
  },
});

function request(o: Partial<AgentTurnRequest> & { callsBefore: number }): AgentTurnRequest {
  return {
    v: 1,
    taskId: "agent-task-1",
    iteration: 2,
    idempotencyKey: `agent-task-1/2/turn.${o.callsBefore + 1}`,
    script,
    task: {
      goal: "Bulk orders of exactly BULK_THRESHOLD units get no discount.",
      language: "python",
      files: [],
      acceptanceTests: [],
      repo: {
        name: "inventory",
        map: "inventory/pricing.py\n  def price(unit, qty)\n  BULK_THRESHOLD",
        files: [],
        testCommand: "python -m pytest -q",
        failingAtBase: ["tests/test_pricing.py::test_bulk_discount"],
      },
    },
    recall: {
      embedder: "hash-v1",
      successes: [],
      failures: [
        {
          id: "f77",
          taskId: "old-task",
          goal: "discount threshold off by one",
          signature: "AssertionError",
          failingTests: [],
          reflection: { rootCause: "exclusive comparison", hypothesis: "", fixPlan: "use >=" },
          similarity: 0.88,
        },
      ],
    },
    previous: "tests/test_pricing.py::test_bulk_discount failed: assert 90.0 == 100.0",
    messages: [],
    stepsLeft: 40,
    budget: {},
    ...o,
  };
}

describe("builder turn endpoint (real NATS, scripted provider)", () => {
  let dir: string;
  let transcript: string;
  let nc: NatsConnection;
  let service: Awaited<ReturnType<typeof startService>>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "loopsmith-turn-"));
    transcript = join(dir, "transcript.jsonl");
  });
  afterAll(async () => {
    await service?.stop().catch(() => undefined);
    await nc?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const lines = async (): Promise<TranscriptLine[]> =>
    (await readFile(transcript, "utf8").catch(() => ""))
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as TranscriptLine);

  it("replays the task's turns by callsBefore, rendering the agent prompt, and joins retried requests", async ({
    nats,
  }) => {
    nc = await connect({ servers: nats.url });
    // No script file: the stack answers only tasks that carry their own replies.
    const config = Config.parse({ llm: { provider: "scripted", transcriptPath: transcript } });
    const module = await builderService({ config, log });
    service = await startService(nc, {
      name: ServiceNames.builder,
      version: "0.0.1",
      description: "builder under test",
      log,
      registrations: module.registrations,
    });

    const first = await call(nc, Endpoints.builder.turn, request({ callsBefore: 0 }));
    expect(first).toEqual({
      content: "Find the threshold.",
      toolCalls: [{ id: "call_0_0", name: "search", args: { pattern: "BULK_THRESHOLD" } }],
      usage: expect.objectContaining({ calls: 1, inputTokens: 0, costUsd: 0 }),
      provider: { name: "scripted", model: "script:task", scripted: true },
    });

    // What the model would have seen: the agent prompt, the opening (task, map, failing
    // tests, hints, previous attempt), then the steps left.
    const [line] = await lines();
    expect(line).toMatchObject({ role: "agent", taskId: "agent-task-1", iteration: 2, provider: "scripted" });
    expect(line!.system).toBe(loadPrompt("agent").system);
    const opening = line!.messages[0]!;
    expect(opening.role).toBe("user");
    expect(opening.content).toContain("Bulk orders of exactly BULK_THRESHOLD units get no discount.");
    expect(opening.content).toContain("Test command (run at the repository root, network off): python -m pytest -q");
    expect(opening.content).toContain("Failing before any change: tests/test_pricing.py::test_bulk_discount");
    expect(opening.content).toContain("def price(unit, qty)");
    expect(opening.content).toContain("[memory:failure:f77]");
    expect(opening.content).toContain(
      "## The previous attempt (iteration 1) failed\ntests/test_pricing.py::test_bulk_discount failed: assert 90.0 == 100.0",
    );
    expect(line!.messages.at(-1)).toEqual({ role: "user", content: "Steps left: 40." });

    // The next turns carry the conversation; the same idempotency key twice makes one call.
    const messages: AgentTurnRequest["messages"] = [
      { role: "assistant", content: first.content, toolCalls: first.toolCalls },
      {
        role: "tool",
        toolCallId: "call_0_0",
        name: "search",
        content: "inventory/pricing.py:12:    if qty > BULK_THRESHOLD:",
        isError: false,
      },
    ];
    const [a, b] = await Promise.all([
      call(nc, Endpoints.builder.turn, request({ callsBefore: 1, messages, stepsLeft: 1 })),
      call(nc, Endpoints.builder.turn, request({ callsBefore: 1, messages, stepsLeft: 1 })),
    ]);
    expect(a).toEqual(b);
    expect(a.toolCalls).toEqual([
      {
        id: "call_1_0",
        name: "edit",
        args: { edits: [{ path: "pricing.py", search: "qty > BULK", replace: "qty >= BULK" }] },
      },
    ]);
    const after = await lines();
    expect(after).toHaveLength(2);
    const second = after[1]!;
    // The opening is the same on every turn (the cached prefix); the conversation follows it.
    expect(second.messages[0]).toEqual(opening);
    expect(second.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: 'Find the threshold.\n{"id":"call_0_0","name":"search","args":{"pattern":"BULK_THRESHOLD"}}',
      },
      { role: "tool", content: "[search call_0_0] inventory/pricing.py:12:    if qty > BULK_THRESHOLD:" },
      { role: "user", content: "Steps left: 1. This is your last step: submit now unless one check is essential." },
    ]);

    // Past the end, the last turn repeats.
    const late = await call(nc, Endpoints.builder.turn, request({ callsBefore: 9 }));
    expect(late.toolCalls).toEqual([{ id: "fin", name: "submit", args: { summary: "Inclusive bulk threshold" } }]);

    // A token budget below the call's estimate: refused before any call, as a typed error.
    const before = (await lines()).length;
    await expect(
      call(nc, Endpoints.builder.turn, request({ callsBefore: 2, budget: { remainingTokens: 50 } })),
    ).rejects.toMatchObject({ code: "budget_exceeded" });
    expect(await lines()).toHaveLength(before);
  });
});
