import { describe, expect, it } from "vitest";
import { z } from "zod";
import { LoopsmithError } from "../runtime/errors.js";
import { jsonCandidates, parseStructured, readStructured, type BadReplyDetails } from "./parse.js";

const Plan = z.object({ steps: z.array(z.string()).min(1), done: z.boolean() });
const GOOD = { steps: ["a", "b"], done: true };
const json = JSON.stringify(GOOD);

function failure(text: string): LoopsmithError {
  const r = readStructured(text, Plan);
  if (r.ok) throw new Error("expected a failure");
  return r.error;
}

describe("parseStructured (the tolerant reader)", () => {
  it("reads plain JSON", () => {
    expect(parseStructured(json, Plan)).toEqual(GOOD);
  });

  it("reads JSON inside ``` and ```json fences", () => {
    expect(parseStructured("```json\n" + json + "\n```", Plan)).toEqual(GOOD);
    expect(parseStructured("```\n" + json + "\n```", Plan)).toEqual(GOOD);
    expect(parseStructured("```JSON " + json + "```", Plan)).toEqual(GOOD);
  });

  it("ignores leading and trailing prose", () => {
    expect(parseStructured(`Sure! Here is the plan: ${json} Let me know if {you} need more.`, Plan)).toEqual(GOOD);
    expect(parseStructured(`Thinking...\n\n${JSON.stringify(GOOD, null, 2)}\n\nDone.`, Plan)).toEqual(GOOD);
  });

  it("with several JSON blocks, the first that validates wins", () => {
    const other = { steps: ["x"], done: false };
    const text = `First a draft: {"steps": []} then ${JSON.stringify(other)} and finally ${json}`;
    expect(parseStructured(text, Plan)).toEqual(other);
    const fenced = '```json\n{"wrong": 1}\n```\n```json\n' + json + "\n```";
    expect(parseStructured(fenced, Plan)).toEqual(GOOD);
  });

  it("repairs trailing commas, single quotes and unescaped quotes", () => {
    expect(parseStructured('{"steps": ["a", "b",], "done": true,}', Plan)).toEqual(GOOD);
    expect(parseStructured("{'steps': ['a', 'b'], 'done': true}", Plan)).toEqual(GOOD);
    expect(parseStructured('{"steps": ["say "hi" loudly"], "done": true}', Plan)).toEqual({
      steps: ['say "hi" loudly'],
      done: true,
    });
  });

  it("repairs JSON truncated inside an unclosed fence", () => {
    expect(parseStructured('```json\n{"steps": ["a", "b"], "done": true', Plan)).toEqual(GOOD);
  });

  it("no JSON at all: llm_bad_reply carrying the raw text and no issues", () => {
    const err = failure("I am sorry, I cannot help with that.");
    expect(err.code).toBe("llm_bad_reply");
    expect(err.message).toContain("no JSON");
    expect(err.details).toEqual({ raw: "I am sorry, I cannot help with that.", issues: [] });
    expect(() => parseStructured("nothing", Plan)).toThrow(LoopsmithError);
  });

  it("an empty reply says so", () => {
    expect(failure("   ").message).toContain("empty");
  });

  it("JSON of the wrong shape: llm_bad_reply with the issues of the first JSON candidate", () => {
    const err = failure('Here: {"steps": "one", "done": "yes"}');
    const details = err.details as BadReplyDetails;
    expect(details.raw).toBe('Here: {"steps": "one", "done": "yes"}');
    expect(details.issues.map((i) => i.path).sort()).toEqual(["done", "steps"]);
  });

  it("does not turn prose into a value by repair", () => {
    expect(readStructured("yes", z.string()).ok).toBe(false);
    expect(parseStructured('"yes"', z.string())).toBe("yes");
  });

  it("reads arrays at the root", () => {
    expect(parseStructured("The list: [1, 2, 3].", z.array(z.number()))).toEqual([1, 2, 3]);
  });

  it("keeps brackets inside strings from confusing the scanner", () => {
    const value = { steps: ["use } and ] freely", 'and \\" too'], done: false };
    expect(parseStructured(`prose ${JSON.stringify(value)} prose`, Plan)).toEqual(value);
  });

  it("caps the number of candidates", () => {
    expect(jsonCandidates("{}".repeat(100)).length).toBeLessThanOrEqual(32);
  });
});
