import { describe, expect, it } from "vitest";
import { ToolArgs, ToolName } from "../contracts/agent.js";
import { UNPARSED_ARGS, agentToolSpecs, jsonModeInstruction, readToolArgs, toolParameters } from "./agent-tools.js";

describe("agent tools", () => {
  it("offers every tool with a description and its zod arguments as JSON Schema (defaults optional)", () => {
    const specs = agentToolSpecs();
    expect(specs.map((s) => s.name)).toEqual(ToolName.options);
    for (const s of specs) {
      expect(s.description.length).toBeGreaterThan(20);
      expect(s.parameters).toMatchObject({ type: "object" });
      expect(s.parameters).not.toHaveProperty("$schema");
    }
    expect(toolParameters("read")).toMatchObject({ required: ["path"] });
    // `list` has defaults for both fields: the model may call it with no arguments.
    expect(toolParameters("list").required ?? []).toEqual([]);
    expect(toolParameters("edit")).toMatchObject({
      required: ["edits"],
      properties: { edits: { type: "array", minItems: 1, maxItems: 20, items: { required: ["path"] } } },
    });
    // What the schema admits, zod admits.
    expect(ToolArgs.list.parse({})).toEqual({ path: ".", depth: 2 });
    expect(agentToolSpecs(["submit"]).map((s) => s.name)).toEqual(["submit"]);
  });

  it("reads arguments tolerantly and never throws", () => {
    expect(readToolArgs({ path: "a.py" })).toEqual({ path: "a.py" });
    expect(readToolArgs('{"path": "a.py"}')).toEqual({ path: "a.py" });
    expect(readToolArgs('```json\n{"path": "a.py",}\n```')).toEqual({ path: "a.py" });
    expect(readToolArgs(undefined)).toEqual({});
    expect(readToolArgs("  ")).toEqual({});
    expect(readToolArgs("read a.py")).toEqual({ [UNPARSED_ARGS]: "read a.py" });
    expect(readToolArgs('"a.py"')).toEqual({ [UNPARSED_ARGS]: '"a.py"' });
    expect(readToolArgs([1])).toEqual({ [UNPARSED_ARGS]: "[1]" });
    expect(readToolArgs(7)).toEqual({ [UNPARSED_ARGS]: "7" });
  });

  it("describes the tools and the one reply shape for JSON mode", () => {
    const text = jsonModeInstruction(agentToolSpecs(["read", "submit"]));
    expect(text).toContain('{"thought": "<why, briefly>", "tool": "<tool name>", "args": {<the tool\'s arguments>}}');
    expect(text).toMatch(/- read: .*\n {2}args \(JSON Schema\): \{"type":"object".*"required":\["path"\]/);
    expect(text).toContain("- submit: ");
    expect(text).not.toContain("- run: ");
  });
});
