/**
 * The check of examples/self-improve (run by check.sh): what services/memory/src/signature.ts
 * must keep doing whatever a generation changes. Taken from the intent of signature.test.ts,
 * but only the behaviour every candidate must keep: the error type, the normalisation of
 * names, numbers and paths, the fallback and the bounds. How an assertion's message is read is
 * what the generations change, so it is left to the benchmark (cases.jsonl). (`void`: test()
 * returns a promise the runner awaits by itself.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { signature } from "../../services/memory/src/signature.js";

const pythonNameError = `Traceback (most recent call last):
  File "/tmp/work/solution.py", line 12, in <module>
    print(has_close_elements([1.0, 2.0], 0.5))
  File "/tmp/work/solution.py", line 4, in has_close_elements
    for idx, elem in enumerate(numbrs):
NameError: name 'numbrs' is not defined`;

const nodeTypeError = `file:///tmp/work/solution.mjs:5
  return list.items.map((x) => x * 2);
                    ^

TypeError: Cannot read properties of undefined (reading 'map')
    at doubleAll (file:///tmp/work/solution.mjs:5:21)
    at file:///tmp/work/solution.test.mjs:4:3`;

const nodeAssert = `AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

3 !== 4

    at TestContext.<anonymous> (/tmp/work/solution.test.js:6:10)`;

void test("names the exception finally raised in a Python traceback and hides the name", () => {
  assert.deepEqual(signature(pythonNameError), { signature: "NameError: name <id> is not defined", errorType: "NameError" });
});

void test("gives NameErrors on other names, files and lines the same signature", () => {
  const other = pythonNameError.replace(/numbrs/g, "valuez").replace(/line \d+/g, "line 99").replace("/tmp/work", "/x/y");
  assert.equal(signature(other).signature, signature(pythonNameError).signature);
});

void test("tells different exception types apart", () => {
  const typeError = pythonNameError.replace("NameError: name 'numbrs' is not defined", "TypeError: 'int' object is not iterable");
  assert.notEqual(signature(typeError).signature, signature(pythonNameError).signature);
  assert.equal(signature(typeError).errorType, "TypeError");
});

void test("normalises a Python TypeError's function name and counts", () => {
  assert.equal(
    signature("TypeError: add() takes 2 positional arguments but 3 were given").signature,
    "TypeError: <id>() takes <num> positional arguments but <num> were given",
  );
});

void test("keeps plain English messages", () => {
  assert.equal(signature("ZeroDivisionError: division by zero").signature, "ZeroDivisionError: division by zero");
  assert.equal(signature("IndexError: list index out of range").signature, "IndexError: list index out of range");
});

void test("turns a string literal into <id> when it holds an identifier, else <str>", () => {
  assert.equal(signature("SyntaxError: '(' was never closed").signature, "SyntaxError: <str> was never closed");
  assert.equal(signature("KeyError: 'user_id'").signature, "KeyError: <id>");
});

void test("reads Node's TypeError and ReferenceError under their code frame and above their stack", () => {
  assert.equal(signature(nodeTypeError).signature, "TypeError: Cannot read properties of undefined (reading <id>)");
  assert.deepEqual(signature("ReferenceError: totl is not defined\n    at sum (/tmp/work/solution.js:3:10)"), {
    signature: "ReferenceError: <id> is not defined",
    errorType: "ReferenceError",
  });
});

void test("reads pytest's assertion lines as AssertionError, the same on other values", () => {
  const summary = signature("FAILED test_other.py::test_below_zero - assert 7 == -2");
  const eLines = signature("E       assert 15 == 3\nE        +  where 15 = f(4)");
  assert.equal(summary.errorType, "AssertionError");
  assert.equal(eLines.errorType, "AssertionError");
  assert.equal(eLines.signature, summary.signature);
  assert.doesNotMatch(summary.signature, /\d/);
});

void test("reads Node's assert error as AssertionError, without its error code", () => {
  const sig = signature(nodeAssert);
  assert.equal(sig.errorType, "AssertionError");
  assert.match(sig.signature, /^AssertionError\b/);
  assert.doesNotMatch(sig.signature, /ERR_ASSERTION|solution\.test\.js/);
});

void test("replaces file paths with their line and column, and floats, hex and negative numbers", () => {
  assert.equal(
    signature("FileNotFoundError: [Errno 2] No such file or directory: /tmp/a/b/data_1.csv").signature,
    "FileNotFoundError: [Errno <num>] No such file or directory: <path>",
  );
  assert.equal(
    signature("ValueError: bad value -3.5 at 0x7f3a2c at src/lib/util.ts:12:4").signature,
    "ValueError: bad value <num> at <num> at <path>",
  );
});

void test("replaces code-like identifiers but keeps plain words", () => {
  assert.equal(
    signature("AttributeError: 'NoneType' object has no attribute 'get_value'").signature,
    "AttributeError: <id> object has no attribute <id>",
  );
  assert.equal(signature("KeyError: user_id missing from self.cache for myDict").signature, "KeyError: <id> missing from <id> for <id>");
});

void test("drops the module path of a dotted exception type", () => {
  assert.deepEqual(signature("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"), {
    signature: "JSONDecodeError: Expecting value: line <num> column <num> (char <num>)",
    errorType: "JSONDecodeError",
  });
});

void test("falls back to the first non-empty line, normalised, as Unknown", () => {
  assert.deepEqual(signature("\n  process timed out after 30000 ms\nmore"), {
    signature: "Unknown: process timed out after <num> ms",
    errorType: "Unknown",
  });
  assert.deepEqual(signature(""), { signature: "Unknown", errorType: "Unknown" });
});

void test("bounds the signature at 500 characters on huge input", () => {
  const huge = signature(`ValueError: ${"word ".repeat(10_000)}`);
  assert.equal(huge.errorType, "ValueError");
  assert.ok(huge.signature.length <= 500, `length ${huge.signature.length}`);
});

void test("never throws and is deterministic on odd input", () => {
  const odd = [
    "\u0000",
    "&",
    "&#99999999; &#0; &bogus; &amp;amp;",
    "<<<>>> [[[ ]]]",
    "E   ",
    "Traceback (most recent call last):",
    "AssertionError",
    `${"x".repeat(50_000)}\nTypeError: late`,
    "\r\n\r\n",
  ];
  for (const input of odd) {
    const first = signature(input);
    assert.deepEqual(signature(input), first);
    assert.ok(first.signature.length > 0 && first.signature.length <= 500, JSON.stringify(input.slice(0, 40)));
    assert.ok(first.errorType.length > 0);
  }
});
