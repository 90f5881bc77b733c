import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { JsonSyntax, field, locator, nodeAt, parseLocated, type Located } from "./located-json.js";

const parse = (text: string): Located => parseLocated(text, () => undefined);

/** The 1-based line:column and message of the syntax error in `text`. */
function error(text: string): string {
  try {
    parse(text);
  } catch (err) {
    if (!(err instanceof JsonSyntax)) throw err;
    const { line, column } = locator(text)(err.offset);
    return `${line}:${column} ${err.message}`;
  }
  return "no error";
}

const parsesLikeJsonParse = (text: string): void => {
  let expected: unknown;
  try {
    expected = JSON.parse(text);
  } catch {
    expect(() => parse(text), text).toThrow(JsonSyntax);
    return;
  }
  expect(parse(text).value, text).toStrictEqual(expected);
};

describe("parseLocated", () => {
  it("reads what JSON.parse reads, to the same values, and refuses what it refuses", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(undefined, 0, 2, "\t"), (v, indent) =>
        parsesLikeJsonParse(JSON.stringify(v, null, indent)),
      ),
      { numRuns: 300 },
    );
    // Valid JSON with one character dropped, doubled or replaced: mostly invalid text.
    const mutated = fc
      .tuple(
        fc.json(),
        fc.nat(),
        fc.constantFrom("drop", "double", "comma", "quote", "brace", "space", "nbsp", "newline"),
      )
      .map(([text, n, how]) => {
        const k = text.length ? n % text.length : 0;
        const put = {
          drop: "",
          double: `${text[k] ?? ""}${text[k] ?? ""}`,
          comma: ",",
          quote: '"',
          brace: "}",
          space: " ",
          nbsp: "\u00a0",
          newline: "\n",
        }[how];
        return text.slice(0, k) + put + text.slice(k + 1);
      });
    fc.assert(fc.property(mutated, parsesLikeJsonParse), { numRuns: 500 });
    for (const text of [
      "",
      " ",
      "01",
      "-",
      "1.",
      "1e",
      ".5",
      "+1",
      "0x1",
      "-0",
      "1E+5",
      "nul",
      "[1,]",
      '{"a":1,}',
      "'a'",
      "// c\n1",
      "/* c */ 1",
      "\u00a01",
      "\ufeff1",
      '"\\u12g4"',
      '"\\x"',
      '"a\tb"',
      '"\u007f"',
      '"\\ud83d\\ude00"',
      '{"__proto__": {"x": 1}}',
      "[1] x",
      "1 2",
      "1e400",
    ])
      parsesLikeJsonParse(text);
  });

  it("says where the first syntax error is, with its line and column", () => {
    expect(error('{\n  "replies": {"plan": [1,]}\n}')).toBe("2:26 expected a value, found ']' (a trailing comma?)");
    expect(error('{"a":1,}')).toBe('1:8 expected a key in double quotes, found "}" (a trailing comma?)');
    expect(error('{"a" 1}')).toBe('1:6 expected \':\' after the key "a", found "1"');
    expect(error('{"a":1 "b":2}')).toBe("1:8 expected ',' or '}' after a value in an object, found \"\\\"\"");
    expect(error("[1 2]")).toBe("1:4 expected ',' or ']' after a value in an array, found \"2\"");
    expect(error('{"a":[1,2}')).toBe("1:10 expected ',' or ']' after a value in an array, found \"}\"");
    expect(error('{"a":1')).toBe("1:7 expected ',' or '}' after a value in an object, found the end of the file");
    expect(error("{")).toBe("1:2 expected a key in double quotes, found the end of the file");
    expect(error("[")).toBe("1:2 expected a value, found the end of the file");
    expect(error("")).toBe("1:1 expected a value, found the end of the file");
    expect(error(" \n [1,\n 2,,3]")).toBe('3:4 expected a value, found ","');
    expect(error('"abc')).toBe("1:1 a string is not closed");
    expect(error('["x",\n "a\nb"]')).toBe(
      "2:4 a control character (a raw line break or tab?) inside a string; write it as \\n or \\t",
    );
    expect(error('"😀\u0001"')).toBe(
      "1:4 a control character (a raw line break or tab?) inside a string; write it as \\n or \\t",
    );
    expect(error('"ab\\x"')).toBe("1:4 an invalid escape \\x in a string");
    expect(error('"\\u12g4"')).toBe("1:2 an invalid escape \\u in a string");
    expect(error("[1.]")).toBe('1:2 the number "1." is not complete');
    expect(error("[tru]")).toBe('1:2 expected a value, found "tru"');
    expect(error("\u00a01")).toBe('1:1 expected a value, found "\u00a0"');
    expect(error("// note\n1")).toBe("1:1 a comment: JSON has none");
    expect(error("[1] x")).toBe('1:5 unexpected "x" after the end of the JSON value');
    expect(error("01")).toBe('1:2 unexpected "1" after the end of the JSON value');
  });

  it("refuses deep nesting with an error, not a stack overflow", () => {
    expect(error(`${"[".repeat(257)}${"]".repeat(257)}`)).toBe("no error");
    expect(error("[".repeat(100_000))).toBe("1:258 values are nested too deeply");
    expect(error(`{"a": "${"[".repeat(300)}", "b": [${"[], ".repeat(300)}[]]}`)).toBe("no error"); // brackets in strings, and closed ones, do not count
  });

  it("keeps each value's span, each key's start, and reports repeated keys (the last wins)", () => {
    const text = '{"a": [1, {"b": true}], "a": {"c": null, "c": "x"}}';
    const repeats: string[] = [];
    const root = parseLocated(text, (at, key) => repeats.push(`${key}@${at}`));
    expect(root.value).toEqual({ a: { c: "x" } });
    expect(repeats.sort()).toEqual([`a@${text.lastIndexOf('"a"')}`, `c@${text.lastIndexOf('"c"')}`].sort());
    expect(root.entries?.map((e) => [e.key, e.keyStart])).toEqual([
      ["a", 1],
      ["a", text.lastIndexOf('"a"')],
    ]);
    const first = root.entries?.[0]?.node;
    expect(first && text.slice(first.start, first.end)).toBe('[1, {"b": true}]');
    expect(first?.items?.map((n) => text.slice(n.start, n.end))).toEqual(["1", '{"b": true}']);
    expect(field(root, "a")?.node.value).toEqual({ c: "x" });
  });
});

describe("nodeAt", () => {
  const text =
    '{"edits": [{"path": "a.py", "replace": 1}, {"path": "b.py"}], "edits2": 1, "x": {"y": 1}, "x": {"y": 2}}';
  const root = parse(text);
  const at = (path: PropertyKey[]): string => {
    const n = nodeAt(root, path);
    return text.slice(n.start, n.end);
  };

  it("finds the node on a path, the deepest that exists when the path leaves the JSON", () => {
    expect(at(["edits", 0, "replace"])).toBe("1");
    expect(at(["edits", 1])).toBe('{"path": "b.py"}');
    expect(at(["edits", 1, "search"])).toBe('{"path": "b.py"}');
    expect(at(["edits", 7, "path"])).toBe(text.slice(text.indexOf("["), text.indexOf("]") + 1));
    expect(at(["edits", "0"])).toBe(text.slice(text.indexOf("["), text.indexOf("]") + 1)); // a key is not an index
    expect(at(["nope"])).toBe(text);
    expect(at([])).toBe(text);
  });

  it("takes the last of repeated keys, the one that counts", () => {
    expect(at(["x", "y"])).toBe("2");
  });
});
