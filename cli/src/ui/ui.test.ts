import { describe, expect, it } from "vitest";
import { colourEnabled, displayWidth, formatTable, padCell, palette } from "./index.js";

const tty = { isTTY: true };
const pipe = { isTTY: false };
const TERM = { TERM: "xterm-256color" };

describe("colour", () => {
  it("colours a terminal; NO_COLOR, NODE_DISABLE_COLORS and TERM=dumb turn it off", () => {
    expect(colourEnabled(tty, TERM)).toBe(true);
    expect(colourEnabled(tty, { ...TERM, NO_COLOR: "1" })).toBe(false);
    expect(colourEnabled(tty, { ...TERM, NODE_DISABLE_COLORS: "1" })).toBe(false);
    expect(colourEnabled(tty, { TERM: "dumb" })).toBe(false);
    expect(palette(tty, TERM).green("ok")).toBe("\u001b[32mok\u001b[39m");
    expect(palette(tty, { ...TERM, NO_COLOR: "1" }).green("ok")).toBe("ok");
  });

  it("does not colour a pipe or a file unless FORCE_COLOR says so; FORCE_COLOR=0 turns a terminal off", () => {
    expect(colourEnabled(pipe, TERM)).toBe(false);
    expect(colourEnabled({}, TERM)).toBe(false);
    expect(colourEnabled(pipe, { FORCE_COLOR: "1" })).toBe(true);
    expect(colourEnabled(pipe, { FORCE_COLOR: "" })).toBe(true);
    expect(colourEnabled(tty, { ...TERM, FORCE_COLOR: "0" })).toBe(false);
    expect(palette(pipe, { FORCE_COLOR: "1" }).dim("x")).toBe("\u001b[2mx\u001b[22m");
    expect(palette(false).red("x")).toBe("x");
  });
});

describe("table", () => {
  it("measures wide characters as two columns and colour codes as none", () => {
    expect(displayWidth("abc")).toBe(3);
    expect(displayWidth("字符")).toBe(4);
    expect(displayWidth("🚀")).toBe(2);
    expect(displayWidth("\u001b[32m✔\u001b[39m")).toBe(1);
    expect(padCell("字", 4)).toBe("字  ");
    expect(padCell("7", 3, "right")).toBe("  7");
    expect(padCell("toolong", 3)).toBe("toolong");
  });

  it("aligns columns by display width, right-aligns where asked, and leaves no trailing spaces", () => {
    const lines = formatTable(
      [
        ["name", "n", "note"],
        ["数据库", "12", "wide"],
        ["🚀 api", "3", ""],
        ["db", "100", "x"],
      ],
      { align: ["left", "right"], indent: "  " },
    );
    expect(lines).toEqual(["  name      n  note", "  数据库   12  wide", "  🚀 api    3", "  db      100  x"]);
    // The third column starts at the same terminal column on every row that has one.
    const starts = [0, 1, 3].map((i) => displayWidth((lines[i] ?? "").replace(/(note|wide|x)$/, "")));
    expect(new Set(starts)).toEqual(new Set([15]));
  });

  it("keeps a column at least its minimum width and uses the given gap", () => {
    expect(formatTable([["a", "b"]], { minWidths: [4], gap: " " })).toEqual(["a    b"]);
    expect(formatTable([["abcdef", "b"]], { minWidths: [4], gap: " " })).toEqual(["abcdef b"]);
  });
});
