import { describe, expect, it } from "vitest";
import { RepoBrief } from "./repo.js";
import { MAX_INSTRUCTIONS_BYTES, boundInstructions, instructionsUse, renderInstructions } from "./instructions.js";

const bytes = (s: string): number => Buffer.byteLength(s, "utf8");

describe("boundInstructions", () => {
  it("keeps a file within the bound whole, with its size in bytes (not characters)", () => {
    const text = "# Conventions\n- Use snake_case.\n- Écrire les docstrings en français.\n";
    expect(boundInstructions("AGENTS.md", text)).toEqual({
      path: "AGENTS.md",
      text,
      bytes: bytes(text),
      truncated: false,
    });
    expect(bytes(text)).toBeGreaterThan(text.length);
  });

  it("cuts a longer file at the last line end within the bound", () => {
    const lines = Array.from({ length: 40 }, (_, i) => `rule ${String(i).padStart(2, "0")}: keep it short`);
    const text = `${lines.join("\n")}\n`;
    const b = boundInstructions("AGENTS.md", text, 100);
    expect(b.truncated).toBe(true);
    expect(b.bytes).toBe(bytes(text));
    expect(bytes(b.text)).toBeLessThanOrEqual(100);
    expect(b.text.endsWith("\n")).toBe(true);
    // Whole lines only, from the start, as many as fit.
    const kept = b.text.split("\n").filter(Boolean);
    expect(kept).toEqual(lines.slice(0, kept.length));
    expect(bytes(`${lines.slice(0, kept.length + 1).join("\n")}\n`)).toBeGreaterThan(100);
  });

  it("cuts one long line at a character boundary, never inside a multi-byte character", () => {
    const text = "é".repeat(100); // 200 bytes, no line end
    const b = boundInstructions("CONVENTIONS.md", text, 51);
    expect(b.truncated).toBe(true);
    expect(b.text).toBe("é".repeat(25));
    expect(b.text).not.toContain("\uFFFD");
  });

  it("bounds at 32 KiB by default", () => {
    expect(MAX_INSTRUCTIONS_BYTES).toBe(32_768);
    const text = "x".repeat(100) + "\n";
    const b = boundInstructions("AGENTS.md", text.repeat(400)); // 40 400 bytes
    expect(b.truncated).toBe(true);
    expect(bytes(b.text)).toBe(Math.floor(MAX_INSTRUCTIONS_BYTES / 101) * 101);
    expect(instructionsUse(b)).toEqual({ path: "AGENTS.md", bytes: 40_400, truncated: true, shownBytes: 32_724 });
  });
});

describe("renderInstructions", () => {
  it("names the file and how to take it, and fences the text so its own fences cannot close it", () => {
    const text = "Run tests with `make test`.\n~~~\nnot the end\n~~~\n```sh\nmake lint\n```\n";
    const out = renderInstructions(boundInstructions("AGENTS.md", text));
    expect(out).toContain(
      "## Project instructions from AGENTS.md (the repository's own conventions; follow them unless they conflict with the task",
    );
    expect(out).toContain("~~~~markdown\nRun tests with `make test`.");
    expect(out.trimEnd().endsWith("```\n~~~~")).toBe(true);
    expect(out).not.toContain("is cut here");
  });

  it("says when the file was cut, with the bytes shown and the file's size", () => {
    const b = boundInstructions("AGENTS.md", "line one\nline two\nline three\n", 20);
    const out = renderInstructions(b);
    expect(out).toContain("line two");
    expect(out).not.toContain("line three");
    expect(out).toContain("[AGENTS.md is cut here: only its first 18 of 29 bytes are shown");
  });

  it("is empty without instructions", () => {
    expect(renderInstructions(undefined)).toBe("");
    expect(renderInstructions({ path: "AGENTS.md", text: " \n", bytes: 2, truncated: false })).toBe("");
  });

  it("travels in the repo brief, which refuses a text over the bound", () => {
    const brief = { map: "", files: [], testCommand: "pytest" };
    const instructions = boundInstructions("AGENTS.md", "Use tabs.\n");
    expect(RepoBrief.parse({ ...brief, instructions }).instructions).toEqual(instructions);
    const tooLong = { ...instructions, text: "x".repeat(MAX_INSTRUCTIONS_BYTES + 1) };
    expect(RepoBrief.safeParse({ ...brief, instructions: tooLong }).success).toBe(false);
  });
});
