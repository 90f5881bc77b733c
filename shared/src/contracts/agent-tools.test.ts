import { describe, expect, it } from "vitest";
import { AGENT_TOOLS, agentTool, argsSummary } from "./agent-tools.js";
import { SessionCall, ToolArgs, ToolName } from "./agent.js";
import { TOOL_DESCRIPTIONS } from "../llm/agent-tools.js";

describe("the tool table", () => {
  it("is where the names, the schemas and the descriptions come from", () => {
    expect(ToolName.options).toEqual(["list", "read", "search", "symbol", "run", "edit", "submit"]);
    for (const name of ToolName.options) {
      expect(ToolArgs[name]).toBe(AGENT_TOOLS[name].args);
      expect(TOOL_DESCRIPTIONS[name]).toBe(AGENT_TOOLS[name].description);
    }
  });

  it("names a session call for every tool that runs in the executor", () => {
    const executor = ToolName.options.filter((n) => AGENT_TOOLS[n].runs === "executor");
    expect(executor).toEqual(["list", "read", "search", "run"]);
    for (const tool of executor) {
      const args = tool === "run" ? { command: "true" } : tool === "search" ? { pattern: "x" } : { path: "a.py" };
      expect(SessionCall.safeParse({ v: 1, sessionId: "s", call: { tool, ...args } }).success).toBe(true);
    }
  });

  it("summarises a call by its tool, and any other by its arguments", () => {
    expect(AGENT_TOOLS.read.summary({ path: "a.py", startLine: 3 })).toBe("a.py:3-");
    expect(AGENT_TOOLS.list.summary({ path: "src" })).toBe("src");
    expect(AGENT_TOOLS.search.summary({ pattern: "def f", glob: "*.py" })).toBe("/def f/ *.py");
    expect(AGENT_TOOLS.edit.summary({ edits: [{ path: "a.py" }, { path: "b.py" }, { path: "a.py" }] })).toBe(
      "a.py, b.py",
    );
    expect(agentTool("teleport")).toBeUndefined();
    expect(agentTool("toString")).toBeUndefined();
    expect(argsSummary({ x: 1 })).toBe('{"x":1}');
  });

  it("renders a session's observation: a run's status and a search's count above the output", () => {
    expect(AGENT_TOOLS.run.heading({ exitCode: 1 })).toBe("exit code 1");
    expect(AGENT_TOOLS.run.heading({ exitCode: null, timedOut: true })).toBe("killed: it passed its timeout");
    expect(AGENT_TOOLS.run.heading({ exitCode: null })).toBe("killed");
    expect(AGENT_TOOLS.search.heading({ total: 4 })).toBe("4 matches");
    expect(AGENT_TOOLS.search.heading({})).toBeUndefined();
    const view = (text: string) => {
      const lines = text.split("\n").filter((l) => l.trim() !== "");
      return { text, lines, first: lines[0] ?? "" };
    };
    expect(AGENT_TOOLS.run.outcome(view("exit code 2\nboom"))).toBe("exit 2");
    expect(AGENT_TOOLS.read.outcome(view("1: a\n2: b"))).toBe("2 lines");
    expect(AGENT_TOOLS.search.outcome(view("1 match\na.py:3: x"))).toBe("1 match");
  });
});
