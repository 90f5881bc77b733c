import { describe, expect, it } from "vitest";
import {
  anyWordQuery,
  buildEmbedText,
  embedParts,
  prepareFailure,
  spellOperators,
  stripComments,
  words,
} from "./embed-text.js";
import { cosine, createHashingEmbedder } from "./embedder.js";

const GOAL = "Complete the Python function `below_zero` in solution.py so that it behaves as its docstring says.";
const ERROR = `assert False == True&#10; +  where False = <function below_zero at 0x7f00aa>([1, -4])
    def check(candidate):
>       assert candidate([1, -4]) == True
E       assert False == True

humaneval_check.py:9: AssertionError`;
const CODE = `def below_zero(operations):
    """Return True when the balance falls below zero."""
    balance = 0  # start empty
    for op in operations:
        balance += op
        if balance < 0:
            return True
    return False
`;

describe("spellOperators and words", () => {
  it("spells operators as words, longest first, so < and <= differ", () => {
    expect(words(spellOperators("if a <= b and c < d: x //= 2"))).toBe("if a ople b and c oplt d x opfloordivset 2");
    expect(words(spellOperators("a == b != c"))).not.toBe(words(spellOperators("a != b == c")));
  });

  it("keeps signature placeholders as words, not as operators", () => {
    expect(words(spellOperators("assert <num> == <id>"))).toBe("assert num opeq id");
  });

  it("cuts to lower-case letters and digits at a word boundary", () => {
    expect(words("Hello, World_42!")).toBe("hello world 42");
    expect(words("alpha beta gamma", 12)).toBe("alpha beta");
  });
});

describe("stripComments", () => {
  it("drops Python comments and docstrings but not # inside strings or // division", () => {
    const out = stripComments('def f(x):\n    """Doc."""\n    s = "a#b"  # note\n    return x // 2\n');
    expect(out).not.toContain("Doc");
    expect(out).not.toContain("note");
    expect(out).toContain('"a#b"');
    expect(out).toContain("x // 2");
  });

  it("drops JavaScript line and block comments but keeps URLs in strings", () => {
    const out = stripComments('/* head */\nconst u = "http://x"; // why\nreturn a / b;', "javascript");
    expect(out).not.toContain("head");
    expect(out).not.toContain("why");
    expect(out).toContain('"http://x"');
  });
});

describe("buildEmbedText", () => {
  it("builds goal, error and code parts as words, entities decoded and addresses gone", () => {
    const t = buildEmbedText({ goal: GOAL, errorText: ERROR, failingTests: ["test_below_zero"], code: CODE });
    expect(t.goal).toBe(words(GOAL));
    expect(t.error).toBe("assertionerror assert false opeq true assert candidate 1 opsub 4 opeq true test below zero");
    expect(t.error).not.toMatch(/0x7f|10/);
    expect(t.code).toMatch(/balance opaddset op ln[a-z0-9]+ if balance oplt 0 ln[a-z0-9]+ return true ln[a-z0-9]+ /);
    expect(t.code).not.toMatch(/docstring|falls|start empty/);
    expect(t.signature?.signature).toBe("AssertionError: assert False == True");
  });

  it("gives each line of code a word, so the same change on another line differs", () => {
    const code = (first: string, second: string) =>
      buildEmbedText({ goal: GOAL, code: `if c ${first} '(':\n    n += 1\nelif c ${second} ')':\n    n -= 1\n` }).code;
    const a = code("!=", "==");
    const b = code("==", "!=");
    expect(
      a
        .split(" ")
        .filter((w) => !w.startsWith("ln"))
        .sort(),
    ).toEqual(
      b
        .split(" ")
        .filter((w) => !w.startsWith("ln"))
        .sort(),
    );
    expect(a).not.toBe(b);
    expect(code("!=", "==")).toBe(a);
  });

  it("leaves out what is not given", () => {
    expect(buildEmbedText({ goal: GOAL })).toEqual({ goal: words(GOAL), error: "", code: "" });
    expect(buildEmbedText({ goal: GOAL, errorText: "  " }).error).toBe("");
  });

  it("builds the same parts from a stored failure and from a recall request with the same fields", () => {
    const stored = prepareFailure({
      goal: GOAL,
      errorText: ERROR,
      failingTests: ["test_below_zero"],
      code: CODE,
      outputTail: "x &amp; y",
      language: "python",
    });
    const query = buildEmbedText({
      goal: GOAL,
      errorText: ERROR,
      failingTests: ["test_below_zero"],
      code: CODE,
      language: "python",
    });
    expect(stored.parts).toEqual(query);
    expect(stored.errorText).toContain("assert False == True\n +  where");
    expect(stored.outputTail).toBe("x & y");
    expect(stored.key).toBe("AssertionError: assert False == True | assert candidate([1, -4]) == True");
  });

  it("puts a signature given by the caller in place of the computed headline", () => {
    const p = prepareFailure({
      goal: GOAL,
      errorText: ERROR,
      signature: "Custom: thing",
      failingTests: [],
      outputTail: "",
      language: "python",
    });
    expect(p.signature).toBe("Custom: thing");
    expect(p.key).toBe("Custom: thing | assert candidate([1, -4]) == True");
    expect(p.parts.error).toBe("custom thing assert candidate 1 opsub 4 opeq true");
  });
});

describe("embedParts", () => {
  it("embeds a failure closer to the same mistake than to another mutant failing the same way", async () => {
    const embedder = createHashingEmbedder();
    const mutant = CODE.replace("balance < 0", "balance <= 0");
    const vector = (code: string) => embedParts(embedder, buildEmbedText({ goal: GOAL, errorText: ERROR, code }));
    const [q, twin, sibling] = await Promise.all([vector(CODE), vector(`# second attempt\n${CODE}`), vector(mutant)]);
    expect(cosine(q, twin)).toBeCloseTo(1, 6);
    expect(cosine(q, sibling)).toBeLessThan(0.999);
    expect(q).toHaveLength(embedder.dimensions);
  });

  it("embeds the empty parts as the empty goal rather than failing", async () => {
    const v = await embedParts(createHashingEmbedder({ dimensions: 32 }), { goal: "", error: "", code: "" });
    expect(v).toHaveLength(32);
  });
});

describe("anyWordQuery", () => {
  it("joins unique words with | and caps their number", () => {
    expect(anyWordQuery("a b a c")).toBe("a | b | c");
    expect(anyWordQuery("")).toBe("");
    expect(anyWordQuery("a b c d", 2)).toBe("a | b");
  });
});
