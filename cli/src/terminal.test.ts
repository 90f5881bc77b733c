import { describe, expect, it } from "vitest";
import { LiveBlock, jsonLine, printable } from "./terminal.js";

const ESC = "\u001b";
const hostile = `${ESC}]0;pwned title${ESC}\\${ESC}[2J${ESC}[1A\rover\u0007\u009b31m\u202etxt.exe`;

describe("printable", () => {
  it("shows escapes visibly instead of letting the terminal act on them", () => {
    const out = printable(hostile);
    // eslint-disable-next-line no-control-regex
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(out).toBe("\\x1b]0;pwned title\\x1b\\\\x1b[2J\\x1b[1A\\x0dover\\x07\\x9b31m\\u202etxt.exe");
  });

  it("keeps newlines, tabs and ordinary text (Unicode included); CRLF becomes LF", () => {
    expect(printable("a\tb\nc ✔ é 日本\r\nd")).toBe("a\tb\nc ✔ é 日本\nd");
  });
});

describe("jsonLine", () => {
  it("is lossless and holds no raw control character", () => {
    const value = { message: hostile, n: 1 };
    const line = jsonLine(value);
    // eslint-disable-next-line no-control-regex
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    expect(JSON.parse(line)).toEqual(value);
    expect(JSON.parse(jsonLine(value, 2))).toEqual(value);
  });
});

describe("LiveBlock", () => {
  const screen = (rows = 24) => {
    const writes: string[] = [];
    return { writes, stream: { write: (t: string) => writes.push(t), columns: 40, rows } };
  };

  it("redraws in place: up over the lines it drew, erase to the end, then the new lines; logged text goes above", () => {
    const { writes, stream } = screen();
    const block = new LiveBlock(stream);
    expect(block.width()).toBe(39);
    block.set(["a", "b"]);
    block.log("event 1");
    block.set(["a", "b", "c"], "event 2");
    block.set([]);
    block.set(["x"]);
    expect(writes).toEqual([
      "a\nb\n",
      `\r${ESC}[2A${ESC}[J` + "event 1\na\nb\n",
      `\r${ESC}[2A${ESC}[J` + "event 2\na\nb\nc\n",
      `\r${ESC}[3A${ESC}[J`,
      "x\n",
    ]);
  });

  it("around() erases for a write to another stream; clear() erases; release() leaves the lines", () => {
    const { writes, stream } = screen();
    const block = new LiveBlock(stream);
    block.set(["a"]);
    block.around(() => writes.push("<stderr>"));
    block.clear();
    block.clear();
    block.set(["b"]);
    block.release();
    block.log("after");
    expect(writes).toEqual(["a\n", `\r${ESC}[1A${ESC}[J`, "<stderr>", "a\n", `\r${ESC}[1A${ESC}[J`, "b\n", "after\n"]);
  });

  it("a block taller than the terminal is cut, and the redraw goes up only over what was shown", () => {
    const { writes, stream } = screen(5);
    const block = new LiveBlock(stream);
    block.set(["1", "2", "3", "4", "5", "6", "7"]);
    block.set(["1"]);
    expect(writes).toEqual(["1\n2\n3\n… 4 more\n", `\r${ESC}[4A${ESC}[J1\n`]);
  });
});
