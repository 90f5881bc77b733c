import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { registerScript, scriptReportText, validateScript } from "./script.js";

const plan = { summary: "fix it", acceptanceCriteria: [], steps: ["read"], files: ["a.py"] };
const editReply = {
  summary: "fix the threshold",
  edits: [{ path: "a.py", search: "x >= 10", replace: "x > 10" }],
  notes: "",
};
const candidate = { files: [{ path: "a.py", content: "x = 1\n" }], tests: [], notes: "" };
const reflection = { rootCause: "off by one", hypothesis: "", fixPlan: "use >" };
const script = (replies: Record<string, unknown[]>): string =>
  JSON.stringify({ v: 1, kind: "loopsmith-script", replies }, null, 2);

/** 1-based line of the first occurrence of `needle` in `text`. */
const lineOf = (text: string, needle: string): number => text.slice(0, text.indexOf(needle)).split("\n").length;

describe("validateScript", () => {
  it("accepts a valid file and says which shape each entry matched", async () => {
    const text = script({ plan: [plan], build: [editReply, editReply], reflect: [reflection] });
    const r = await validateScript(text);
    expect(r.valid).toBe(true);
    expect(r.problems).toEqual([]);
    expect(r.counts).toEqual({ plan: 1, build: 2, reflect: 1 });
    expect(r.entries.map((e) => [e.role, e.index, e.shape])).toEqual([
      ["plan", 0, "Plan"],
      ["build", 0, "EditReply"],
      ["build", 1, "EditReply"],
      ["reflect", 0, "Reflection"],
    ]);
    const out = scriptReportText("s.json", r);
    expect(out).toContain("ok: replies.build[0]: EditReply (repo mode)");
    expect(out).toContain("s.json: valid (plan 1, build 2, reflect 1)");
  });

  it("checks the replies of tasks too: the improve role's hypotheses, unknown roles, bad shapes", async () => {
    const hypothesis = { title: "keep the assert line", files: ["a.py"] };
    const text = JSON.stringify(
      {
        v: 1,
        kind: "loopsmith-script",
        replies: {},
        tasks: {
          "gen-1": { improve: [hypothesis], plan: [plan], build: [editReply] },
          "gen-2": { improv: [hypothesis], improve: [{ rationale: "no title" }] },
        },
      },
      null,
      2,
    );
    const r = await validateScript(text);
    expect(r.valid).toBe(false);
    expect(r.entries.filter((e) => e.shape).map((e) => `${e.block}.${e.role}[${e.index}]:${e.shape}`)).toEqual([
      "tasks.gen-1.improve[0]:Hypothesis",
      "tasks.gen-1.plan[0]:Plan",
      "tasks.gen-1.build[0]:EditReply",
    ]);
    expect(r.problems.filter((p) => p.severity === "error").map((p) => p.where)).toEqual([
      "tasks.gen-2.improv",
      "tasks.gen-2.improve[0]",
    ]);
    expect(r.problems.find((p) => p.where === "tasks.gen-2.improv")?.message).toMatch(/did you mean "improve"/);
  });

  it("accepts the bundled examples", async () => {
    for (const file of [
      "examples/roman/script.json",
      "examples/repo-bugfix/script.json",
      "examples/repo-bugfix-ts/script.json",
      "examples/rest-api/script.json",
    ]) {
      const r = await validateScript(readFileSync(join(import.meta.dirname, "../../..", file), "utf8"));
      expect(r.problems, file).toEqual([]);
      expect(r.valid, file).toBe(true);
    }
  });

  it("takes a DAG task's plan of subtasks and integration reflection, and reports a broken one as what it looks like", async () => {
    const dagPlan = {
      summary: "two parts",
      subtasks: [
        { id: "model", goal: "g", files: ["m.py"] },
        { id: "api", goal: "g", files: ["a.py"], dependsOn: ["model"] },
      ],
    };
    const integration = { subtaskId: "api", rootCause: "wrong route", fixPlan: "fix the route" };
    const good = await validateScript(
      script({ plan: [dagPlan, plan], build: [editReply], reflect: [integration, reflection] }),
    );
    expect(good.problems).toEqual([]);
    expect(good.entries.map((e) => e.shape)).toEqual([
      "DagPlan",
      "Plan",
      "EditReply",
      "IntegrationReflection",
      "Reflection",
    ]);
    const bad = await validateScript(
      script({
        plan: [{ summary: "x", subtasks: [{ id: "Model", goal: "g", files: [] }] }],
        reflect: [{ subtaskId: "api" }],
      }),
    );
    const errors = bad.problems.filter((p) => p.severity === "error");
    expect(errors.map((p) => p.where)).toEqual(["replies.plan[0]", "replies.reflect[0]"]);
    expect(errors[0]!.message).toMatch(/does not match Plan nor DagPlan; as DagPlan:/);
    expect(errors[0]!.message).toContain("subtasks.0.id");
    expect(errors[1]!.message).toMatch(/as IntegrationReflection:[\s\S]*rootCause/);
  });

  it("reports a JSON syntax error with line and column", async () => {
    const text = '{\n  "v": 1,\n  "kind": "loopsmith-script",\n  "replies": {"plan": [1,]}\n}\n';
    const r = await validateScript(text);
    expect(r.valid).toBe(false);
    expect(r.problems).toEqual([
      {
        severity: "error",
        line: 4,
        column: 26,
        where: "",
        message: "not valid JSON: expected a value, found ']' (a trailing comma?)",
      },
    ]);
    expect(scriptReportText("s.json", r)).toContain("s.json:4:26: error: not valid JSON");
    const raw = '{"v": 1, "kind": "loopsmith-script", "replies": {"plan": ["a\nb"]}}';
    const open = await validateScript(raw);
    expect(open.problems[0]).toMatchObject({
      line: 1,
      column: raw.indexOf("\n") + 1,
      message: expect.stringContaining("control character"),
    });
  });

  it("reports a wrong-shaped build entry at the line where the entry starts", async () => {
    const bad = { summary: "s", edits: [{ path: "a.py", serch: "x", replace: 1 }] };
    const text = script({ plan: [plan], build: [candidate, bad] });
    const r = await validateScript(text);
    expect(r.valid).toBe(false);
    const line = lineOf(text, '"summary": "s"') - 1; // the entry's `{` is on the line before
    expect(r.problems.map((p) => [p.severity, p.line, p.where])).toEqual([
      ["error", line, "replies.build[1]"],
      ["warning", lineOf(text, '"serch"'), "replies.build[1].edits[0]"],
    ]);
    expect(r.problems[1]?.message).toContain('unknown key "serch" (did you mean "search"?) is ignored');
    expect(r.problems[0]?.message).toContain(
      "does not match EditReply (repo mode) nor Candidate (inline files); as EditReply:",
    );
    expect(r.problems[0]?.message).toContain(`at \`edits.0.replace\` (line ${lineOf(text, '"replace": 1')})`);
    expect(r.entries.map((e) => e.shape)).toEqual(["Plan", "Candidate", undefined]);
  });

  it("reports an unknown role where its key is, with a suggestion", async () => {
    const text = script({ plan: [plan], biuld: [editReply], build: [editReply] });
    const r = await validateScript(text);
    expect(r.valid).toBe(false);
    expect(r.problems).toEqual([
      {
        severity: "error",
        line: lineOf(text, '"biuld"'),
        column: 5,
        where: "replies.biuld",
        message: expect.stringContaining('unknown role "biuld" (did you mean "build"?)'),
      },
    ]);
  });

  it("reads string entries like a model's reply, and warns on text the reader cannot use", async () => {
    const fenced = `Here it is:\n\`\`\`json\n${JSON.stringify(reflection)}\n\`\`\``;
    const r = await validateScript(script({ plan: [plan], build: ["no JSON here", candidate], reflect: [fenced] }));
    expect(r.valid).toBe(true);
    expect(r.entries.map((e) => [e.role, e.raw, e.shape])).toEqual([
      ["plan", false, "Plan"],
      ["build", true, undefined],
      ["build", false, "Candidate"],
      ["reflect", true, "Reflection"],
    ]);
    expect(r.problems).toEqual([
      expect.objectContaining({
        severity: "warning",
        where: "replies.build[0]",
        message: expect.stringContaining("the next entry answers the re-ask"),
      }),
    ]);
  });

  it("checks the frame and warns on unsafe edit paths and mixed build shapes", async () => {
    const unsafe = { summary: "s", edits: [{ path: ".git/config", search: "", replace: "x" }] };
    const r = await validateScript(
      JSON.stringify({
        v: 2,
        kind: "loopsmith-script",
        extra: 1,
        replies: { plan: [plan], build: [unsafe, candidate] },
      }),
    );
    expect(r.valid).toBe(false);
    expect(r.problems.map((p) => [p.severity, p.where])).toEqual([
      ["error", "v"],
      ["warning", "extra"],
      ["warning", "replies.build"],
      ["warning", "replies.build[0]"],
    ]);
    expect(r.problems[3]?.message).toContain("inside git's own .git directory");
    expect((await validateScript("[]")).problems[0]?.message).toContain("a script is a JSON object");
  });
});

describe("loopsmith script validate", () => {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-script-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  afterEach(() => {
    vi.restoreAllMocks();
    process.exitCode = undefined;
  });

  /** Runs the command; returns stdout and the exit code. */
  async function cli(...args: string[]): Promise<{ out: string; err: string; code: number | string | undefined }> {
    let out = "";
    let err = "";
    vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
    vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), true));
    const program = new Command().exitOverride();
    registerScript(program);
    await program.parseAsync(["node", "loopsmith", "script", "validate", ...args]);
    const code = process.exitCode;
    vi.restoreAllMocks();
    return { out, err, code };
  }

  it("exits 0 on a valid file and 2 on an invalid one (with --json, the error object last)", async () => {
    const good = join(dir, "good.json");
    writeFileSync(good, script({ plan: [plan], build: [candidate] }));
    const ok = await cli(good);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain("valid (plan 1, build 1)");

    const bad = join(dir, "bad.json");
    writeFileSync(bad, script({ plan: [plan], build: [{ files: [] }] }));
    const no = await cli(bad, "--json");
    expect(no.code).toBe(2);
    const lines = no.out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ kind: "script-report", valid: false, counts: { plan: 1, build: 1 } });
    expect(lines[1]).toMatchObject({ kind: "error", code: "config_invalid", exitCode: 2 });
    expect(no.err).toContain("is not a valid script (1 error)");

    const missing = await cli(join(dir, "nope.json"));
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("cannot read the script file");
  });
});
