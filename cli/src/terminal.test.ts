import { describe, expect, it } from "vitest";
import { jsonLine, printable } from "./terminal.js";

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
