/**
 * How a failed equality assertion's returned value differs from the expected one, in words
 * that do not depend on the task: `assert None == 4` is "returned none", `assert [1, 2] ==
 * [1, 2, 3]` "shorter by one, missing the tail", `assert 'abc' == 'ABC'` "letter case
 * differs". The values themselves are the task's (its data), the shape of their difference is
 * the mistake's: a missing `return` returns `None` on every task, an off-by-one bound drops
 * one item or counts one less, a dropped sort returns the right items in another order.
 *
 * Read from pytest's assertion report (`assert <returned> == <expected>`, and `assert False` /
 * `assert not True` with its `where False = f(…)` line): the left side is the returned value
 * when the test is written `candidate(…) == expected`, as HumanEval's and most tests are.
 * Values are Python literals (numbers, strings, `None`, booleans, lists, tuples, sets, dicts);
 * a report pytest cut short (`...`) or a value that is not a literal gives no words.
 */

/** A parsed Python literal. */
type Value =
  | { t: "none" }
  | { t: "bool"; v: boolean }
  | { t: "int" | "float"; v: number }
  | { t: "str"; v: string }
  | { t: "list" | "tuple" | "set"; v: Value[] }
  | { t: "dict"; v: Array<[Value, Value]> };

/** Longest assertion read, in characters (longer reports are mostly cut by pytest anyway). */
const MAX_ASSERT = 4_000;

/** A recursive-descent reader of one Python literal; throws on anything else. */
class Reader {
  private at = 0;
  constructor(private readonly s: string) {}

  read(): Value {
    const v = this.value(0);
    this.space();
    if (this.at !== this.s.length) throw new Error("trailing text");
    return v;
  }

  private space(): void {
    while (this.at < this.s.length && /\s/.test(this.s[this.at] ?? "")) this.at++;
  }

  private value(depth: number): Value {
    if (depth > 20) throw new Error("too deep");
    this.space();
    const c = this.s[this.at];
    if (c === "[") return { t: "list", v: this.items("]", depth) };
    if (c === "(") {
      const v = this.items(")", depth);
      return { t: "tuple", v };
    }
    if (c === "{") return this.braces(depth);
    if (c === "'" || c === '"') return { t: "str", v: this.str(c) };
    const word = /^(?:None|True|False|-?(?:\d[\d_]*)?\.?\d+(?:[eE][+-]?\d+)?|-?inf|nan)/.exec(this.s.slice(this.at));
    if (!word) throw new Error("not a literal");
    this.at += word[0].length;
    const w = word[0];
    if (w === "None") return { t: "none" };
    if (w === "True" || w === "False") return { t: "bool", v: w === "True" };
    return /^-?\d[\d_]*$/.test(w) ? { t: "int", v: Number(w.replace(/_/g, "")) } : { t: "float", v: Number(w) };
  }

  private items(close: string, depth: number): Value[] {
    this.at++;
    const out: Value[] = [];
    for (;;) {
      this.space();
      if (this.s[this.at] === close) {
        this.at++;
        return out;
      }
      out.push(this.value(depth + 1));
      this.space();
      if (this.s[this.at] === ",") this.at++;
      else if (this.s[this.at] !== close) throw new Error("expected , or close");
    }
  }

  private braces(depth: number): Value {
    this.at++;
    const keys: Value[] = [];
    const pairs: Array<[Value, Value]> = [];
    for (;;) {
      this.space();
      if (this.s[this.at] === "}") {
        this.at++;
        return pairs.length > 0 || keys.length === 0 ? { t: "dict", v: pairs } : { t: "set", v: keys };
      }
      const k = this.value(depth + 1);
      this.space();
      if (this.s[this.at] === ":") {
        this.at++;
        pairs.push([k, this.value(depth + 1)]);
        this.space();
      } else keys.push(k);
      if (this.s[this.at] === ",") this.at++;
      else if (this.s[this.at] !== "}") throw new Error("expected , or }");
    }
  }

  private str(quote: string): string {
    this.at++;
    let out = "";
    while (this.at < this.s.length) {
      const c = this.s[this.at++] as string;
      if (c === quote) return out;
      if (c === "\\") {
        const e = this.s[this.at++] ?? "";
        out += e === "n" ? "\n" : e === "t" ? "\t" : e;
      } else out += c;
    }
    throw new Error("unterminated string");
  }
}

/** The literal `text` is, or null. */
function parse(text: string): Value | null {
  if (text.includes("...")) return null;
  try {
    return new Reader(text.trim()).read();
  } catch {
    return null;
  }
}

const isNum = (v: Value): v is { t: "int" | "float"; v: number } => v.t === "int" || v.t === "float";
const isSeq = (v: Value): v is { t: "list" | "tuple" | "set"; v: Value[] } =>
  v.t === "list" || v.t === "tuple" || v.t === "set";

/** A canonical string of a value, to compare values and multisets of them. */
function repr(v: Value): string {
  switch (v.t) {
    case "none":
      return "None";
    case "bool":
      return String(v.v);
    case "int":
    case "float":
      return String(v.v);
    case "str":
      return JSON.stringify(v.v);
    case "dict":
      return `{${v.v.map(([k, x]) => `${repr(k)}:${repr(x)}`).join(",")}}`;
    default:
      return `${v.t}(${v.v.map(repr).join(",")})`;
  }
}

/** How two numbers differ. */
function numbers(got: number, want: number, out: string[]): void {
  const d = got - want;
  out.push(d > 0 ? "returned more" : "returned less");
  if (Math.abs(d) === 1) out.push("off by one");
  if (got === 0) out.push("returned zero");
  if (got === -want) out.push("sign flipped");
  if (want !== 0 && Number.isInteger(got / want) && Math.abs(got / want) > 1) out.push("a multiple");
}

/** How two sequences (or strings) differ, as lists of item strings. */
function sequences(got: string[], want: string[], out: string[]): void {
  const dl = got.length - want.length;
  if (got.length === 0) out.push("returned empty");
  if (dl !== 0) out.push(dl > 0 ? "longer" : "shorter", ...(Math.abs(dl) === 1 ? ["by one item"] : []));
  const sortedEq = [...got].sort().join("\u0000") === [...want].sort().join("\u0000");
  if (dl === 0 && sortedEq) out.push("same items other order");
  if (dl === 0 && !sortedEq) {
    const differ = got.filter((g, i) => g !== want[i]).length;
    out.push(differ === 1 ? "one item differs" : "items differ");
  }
  const starts = (a: string[], b: string[]): boolean => b.every((x, i) => a[i] === x);
  const ends = (a: string[], b: string[]): boolean => b.every((x, i) => a[a.length - b.length + i] === x);
  if (dl < 0 && got.length > 0 && starts(want, got)) out.push("missing the tail");
  if (dl < 0 && got.length > 0 && ends(want, got)) out.push("missing the head");
  if (dl > 0 && want.length > 0 && (starts(got, want) || ends(got, want))) out.push("extra items");
  if (dl === 0 && got.length > 1 && got.join("\u0000") === [...want].reverse().join("\u0000")) out.push("reversed");
}

/** The words of how `got` differs from `want` (empty when they are equal). */
function compare(got: Value, want: Value, out: string[]): void {
  if (repr(got) === repr(want)) return;
  if (got.t === "none") {
    out.push("returned none");
    return;
  }
  if (got.t === "bool" && want.t === "bool") {
    out.push(`returned ${String(got.v)} not ${String(want.v)}`);
    return;
  }
  if (isNum(got) && isNum(want)) {
    if (got.t !== want.t) out.push(`returned ${got.t} not ${want.t}`);
    numbers(got.v, want.v, out);
    return;
  }
  if (got.t !== want.t) {
    out.push(`returned ${got.t} not ${want.t}`);
    return;
  }
  if (got.t === "str" && want.t === "str") {
    if (got.v.toLowerCase() === want.v.toLowerCase()) out.push("letter case differs");
    else if (got.v.trim() === want.v.trim()) out.push("whitespace differs");
    sequences([...got.v], [...want.v], out);
    return;
  }
  if (isSeq(got) && isSeq(want)) {
    sequences(got.v.map(repr), want.v.map(repr), out);
    const pairs = got.v.length === want.v.length ? got.v.map((g, i) => [g, want.v[i] as Value] as const) : [];
    const differing = pairs.filter(([g, w]) => repr(g) !== repr(w));
    if (differing.length > 0 && differing.every(([g, w]) => isNum(g) && isNum(w) && Math.abs(g.v - w.v) === 1))
      out.push("items off by one");
    const first = differing[0];
    if (differing.length === 1 && first) compare(first[0], first[1], out);
    return;
  }
  out.push("values differ");
}

/**
 * The mismatch words of an error text: how the value an equality assertion got differs from
 * the one it expected (see the top of this file), or the empty string when the text holds no
 * such assertion between two literals. Pure; never throws.
 * @param text - the error text, entities already decoded
 * @example mismatch("E       assert None == 4") // "returned none"
 * @example mismatch("E       assert [1, 2] == [1, 2, 3]") // "shorter by one item missing the tail"
 */
export function mismatch(text: string): string {
  const lines = text.slice(0, 20_000).split(/\r?\n/);
  for (const [i, line] of lines.entries()) {
    const m = /^\s*(?:E\s+)?(?:AssertionError:\s*)?assert (.+)$/.exec(line);
    const body = m?.[1]?.slice(0, MAX_ASSERT).trim();
    if (!body) continue;
    const bare = /^(not )?(True|False)$/.exec(body);
    if (bare && /^\s*(?:E\s+)?\+\s+where (True|False) = /.test(lines[i + 1] ?? "")) {
      const got = bare[2] === "True";
      return `returned ${String(got)} not ${String(!got)}`;
    }
    for (const op of [" == ", " != "]) {
      let at = body.indexOf(op);
      while (at >= 0) {
        const got = parse(body.slice(0, at));
        const want = parse(body.slice(at + op.length));
        if (got && want) {
          if (op === " != ") return "returned the value it must not";
          const out: string[] = [];
          compare(got, want, out);
          return out.join(" ");
        }
        at = body.indexOf(op, at + 1);
      }
    }
    return "";
  }
  return "";
}
