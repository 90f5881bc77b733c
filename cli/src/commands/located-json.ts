/**
 * A strict JSON reader that remembers where each value starts and ends, so a checker can
 * point at the line and column of a problem (used by `loopsmith script validate`).
 */

/** A parsed value and where it starts and ends (UTF-16 offsets into the text). */
export interface Located {
  start: number;
  end: number;
  value: unknown;
  items?: Located[];
  entries?: Array<{ key: string; keyStart: number; node: Located }>;
}

export class JsonSyntax extends Error {
  constructor(readonly offset: number, message: string) {
    super(message);
  }
}

/** Parses strict JSON (RFC 8259) with positions. Duplicate keys: the last wins, each repeat is reported. */
export function parseLocated(text: string, duplicate: (keyStart: number, key: string) => void): Located {
  let i = 0;
  const ws = (): void => {
    while (i < text.length && " \t\n\r".includes(text[i] ?? "")) i++;
  };
  const what = (at: number): string => (at >= text.length ? "the end of the file" : `${JSON.stringify(text[at])}`);
  const expectChar = (c: string, context: string): void => {
    if (text[i] !== c) throw new JsonSyntax(i, `expected '${c}' ${context}, found ${what(i)}`);
    i++;
  };
  const str = (): string => {
    const start = i++;
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new JsonSyntax(start, "a string is not closed");
      if (c === '"') break;
      if (c < " ") throw new JsonSyntax(i, "a control character (a raw line break or tab?) inside a string; write it as \\n or \\t");
      if (c === "\\") {
        const e = text[i + 1] ?? "";
        if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else if ('"\\/bfnrt'.includes(e) && e !== "") i += 2;
        else throw new JsonSyntax(i, `an invalid escape \\${e} in a string`);
      } else i++;
    }
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (depth: number): Located => {
    ws();
    const start = i;
    if (depth > 256) throw new JsonSyntax(i, "values are nested too deeply");
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: Record<string, unknown> = {};
      const entries: NonNullable<Located["entries"]> = [];
      ws();
      if (text[i] === "}") return { start, end: ++i, value: obj, entries };
      for (;;) {
        ws();
        if (text[i] !== '"') throw new JsonSyntax(i, `expected a key in double quotes, found ${what(i)}${text[i] === "}" ? " (a trailing comma?)" : ""}`);
        const keyStart = i;
        const key = str();
        ws();
        expectChar(":", `after the key ${JSON.stringify(key)}`);
        const node = value(depth + 1);
        if (Object.hasOwn(obj, key)) duplicate(keyStart, key);
        Object.defineProperty(obj, key, { value: node.value, enumerable: true, writable: true, configurable: true });
        entries.push({ key, keyStart, node });
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") return { start, end: ++i, value: obj, entries };
        else throw new JsonSyntax(i, `expected ',' or '}' after a value in an object, found ${what(i)}`);
      }
    }
    if (c === "[") {
      i++;
      const items: Located[] = [];
      ws();
      if (text[i] === "]") return { start, end: ++i, value: [], items };
      for (;;) {
        ws();
        if (text[i] === "]") throw new JsonSyntax(i, "expected a value, found ']' (a trailing comma?)");
        items.push(value(depth + 1));
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") return { start, end: ++i, value: items.map((n) => n.value), items };
        else throw new JsonSyntax(i, `expected ',' or ']' after a value in an array, found ${what(i)}`);
      }
    }
    if (c === '"') return { start, value: str(), end: i };
    const lit = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i, i + 400));
    if (!lit) throw new JsonSyntax(i, `expected a value, found ${what(i)}`);
    i += lit[0].length;
    return { start, end: i, value: JSON.parse(lit[0]) as unknown };
  };
  const root = value(0);
  ws();
  if (i < text.length) throw new JsonSyntax(i, `unexpected ${what(i)} after the end of the JSON value`);
  return root;
}

export type Locate = (offset: number) => { line: number; column: number };

/** Maps offsets of `text` to 1-based lines and columns (a binary search over line starts). */
export function locator(text: string): Locate {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] ?? 0) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - (starts[lo] ?? 0) + 1 };
  };
}

/** The deepest node on a zod issue path (the entry itself when the path leaves the JSON). */
export function nodeAt(node: Located, path: readonly PropertyKey[]): Located {
  let at = node;
  for (const key of path) {
    const next = typeof key === "number" ? at.items?.[key] : at.entries?.findLast((e) => e.key === String(key))?.node;
    if (!next) break;
    at = next;
  }
  return at;
}

/** The word of `options` nearest to a misspelt one (edit distance at most 2). */
export function suggest(word: string, options: readonly string[]): string | undefined {
  const dist = (a: string, b: string): number => {
    let prev = Array.from({ length: b.length + 1 }, (_, k) => k);
    for (let x = 1; x <= a.length; x++) {
      const row = [x];
      for (let y = 1; y <= b.length; y++) row.push(Math.min((prev[y] ?? 0) + 1, (row[y - 1] ?? 0) + 1, (prev[y - 1] ?? 0) + (a[x - 1] === b[y - 1] ? 0 : 1)));
      prev = row;
    }
    return prev[b.length] ?? 99;
  };
  return options.find((o) => dist(word.toLowerCase(), o.toLowerCase()) <= 2);
}

/** The last member of an object node named `key`. */
export function field(node: Located, key: string): { key: string; keyStart: number; node: Located } | undefined {
  return node.entries?.findLast((e) => e.key === key);
}
