import { describe, expect, it } from "vitest";
import { decodeEntities, signature } from "./signature.js";

const pythonNameError = `Traceback (most recent call last):
  File "/tmp/work/solution.py", line 12, in <module>
    print(has_close_elements([1.0, 2.0], 0.5))
  File "/tmp/work/solution.py", line 4, in has_close_elements
    for idx, elem in enumerate(numbrs):
NameError: name 'numbrs' is not defined`;

const pytestAssert = `============================= FAILURES =============================
___________________________ test_candidate ___________________________

    def test_candidate():
>       assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True
E       assert False == True
E        +  where False = candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3)

test_solution.py:8: AssertionError
=========================== short test summary info ===========================
FAILED test_solution.py::test_candidate - assert False == True`;

const pytestAssertMessage = `E       AssertionError: expected 14 but got 15
E       assert 15 == 14`;

const bareAssert = `Traceback (most recent call last):
  File "/home/u/check.py", line 20, in <module>
    assert add(2, 3) == 5
AssertionError`;

const pyTypeError = `Traceback (most recent call last):
  File "/tmp/w/main.py", line 7, in <module>
    add(1, 2, 3)
TypeError: add() takes 2 positional arguments but 3 were given`;

const pyZero = `Traceback (most recent call last):
  File "/tmp/w/solution.py", line 3, in mean
    return total / count
ZeroDivisionError: division by zero`;

const pyIndex = `Traceback (most recent call last):
  File "/srv/task-17/solution.py", line 9, in below_zero
    return ops[len(ops)]
IndexError: list index out of range`;

const pySyntax = `  File "/tmp/work/solution.py", line 3
    def f(x:
         ^
SyntaxError: '(' was never closed`;

const nodeTypeError = `file:///tmp/work/solution.mjs:5
  return list.items.map((x) => x * 2);
                    ^

TypeError: Cannot read properties of undefined (reading 'map')
    at doubleAll (file:///tmp/work/solution.mjs:5:21)
    at file:///tmp/work/solution.test.mjs:4:3
    at ModuleJob.run (node:internal/modules/esm/module_job:195:25)`;

const nodeReference = `ReferenceError: totl is not defined
    at sum (/tmp/work/solution.js:3:10)
    at Object.<anonymous> (/tmp/work/solution.test.js:5:1)`;

const nodeAssert = `AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

3 !== 4

    at TestContext.<anonymous> (/tmp/work/solution.test.js:6:10)`;

describe("signature", () => {
  it("replaces the identifier of a Python NameError and keeps the last exception of the traceback", () => {
    expect(signature(pythonNameError)).toMatchObject({
      signature: "NameError: name <id> is not defined",
      errorType: "NameError",
    });
  });

  it("gives two NameErrors on different names, files and lines the same signature", () => {
    const other = pythonNameError
      .replace(/numbrs/g, "valuez")
      .replace(/line \d+/g, "line 99")
      .replace("/tmp/work", "/x/y");
    expect(signature(other).signature).toBe(signature(pythonNameError).signature);
  });

  it("reads pytest's E lines for an assertion without a message", () => {
    expect(signature(pytestAssert)).toMatchObject({
      signature: "AssertionError: assert False == True",
      errorType: "AssertionError",
    });
  });

  it("gives the same pytest assertion on other values and another test the same signature", () => {
    const other = "FAILED test_other.py::test_below_zero - assert 7 == -2";
    expect(signature(other).signature).toBe("AssertionError: assert <num> == <num>");
    expect(signature("E       assert 15 == 3\nE        +  where 15 = f(4)").signature).toBe(signature(other).signature);
  });

  it("replaces numbers in an AssertionError with a message", () => {
    expect(signature(pytestAssertMessage).signature).toBe("AssertionError: expected <num> but got <num>");
  });

  it("keeps a bare AssertionError as its type alone", () => {
    expect(signature(bareAssert)).toMatchObject({ signature: "AssertionError", errorType: "AssertionError" });
  });

  it("normalises a Python TypeError's function name and counts", () => {
    expect(signature(pyTypeError).signature).toBe(
      "TypeError: <id>() takes <num> positional arguments but <num> were given",
    );
  });

  it("keeps plain English messages (ZeroDivisionError, IndexError)", () => {
    expect(signature(pyZero).signature).toBe("ZeroDivisionError: division by zero");
    expect(signature(pyIndex).signature).toBe("IndexError: list index out of range");
  });

  it("turns a non-identifier string literal of a SyntaxError into <str>", () => {
    expect(signature(pySyntax)).toMatchObject({
      signature: "SyntaxError: <str> was never closed",
      errorType: "SyntaxError",
    });
  });

  it("normalises Node errors: TypeError, ReferenceError and assert's error code", () => {
    expect(signature(nodeTypeError).signature).toBe("TypeError: Cannot read properties of undefined (reading <id>)");
    expect(signature(nodeReference)).toMatchObject({
      signature: "ReferenceError: <id> is not defined",
      errorType: "ReferenceError",
    });
    expect(signature(nodeAssert).signature).toBe("AssertionError: Expected values to be strictly equal:");
  });

  it("replaces file paths with their line and column, and floats, hex and negative numbers", () => {
    expect(signature("FileNotFoundError: [Errno 2] No such file or directory: /tmp/a/b/data_1.csv").signature).toBe(
      "FileNotFoundError: [Errno <num>] No such file or directory: <path>",
    );
    expect(signature("ValueError: bad value -3.5 at 0x7f3a2c at src/lib/util.ts:12:4").signature).toBe(
      "ValueError: bad value <num> at <num> at <path>",
    );
  });

  it("replaces code-like identifiers but keeps plain words", () => {
    expect(signature("AttributeError: 'NoneType' object has no attribute 'get_value'").signature).toBe(
      "AttributeError: <id> object has no attribute <id>",
    );
    expect(signature("KeyError: user_id missing from self.cache for myDict").signature).toBe(
      "KeyError: <id> missing from <id> for <id>",
    );
  });

  it("drops the module path of a dotted exception type", () => {
    expect(signature("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)")).toMatchObject({
      signature: "JSONDecodeError: Expecting value: line <num> column <num> (char <num>)",
      errorType: "JSONDecodeError",
    });
  });

  it("falls back to the first line, normalised, when there is no exception line", () => {
    expect(signature("\n  process timed out after 30000 ms\nmore")).toEqual({
      signature: "Unknown: process timed out after <num> ms",
      errorType: "Unknown",
      key: "Unknown: process timed out after <num> ms",
    });
    expect(signature("")).toEqual({ signature: "Unknown", errorType: "Unknown", key: "Unknown" });
  });

  it("bounds the signature length on huge input", () => {
    const huge = `ValueError: ${"word ".repeat(10_000)}`;
    expect(signature(huge).signature.length).toBeLessThanOrEqual(500);
  });
});

/** A JUnit failure message as the executor reports it (pytest, entities left in the first line). */
function junitAssert(addr: string, line: number, call: string, expected: string, got: string): string {
  return `assert ${got} == ${expected}&#10; +  where ${got} = <function has_close_elements at ${addr}>(${call})
def test_has_close_elements():
        namespace = dict(vars(solution))
        exec(_compiled(CHECK), namespace)
>       namespace["check"](namespace["has_close_elements"])

test_solution.py:24: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

candidate = <function has_close_elements at ${addr}>

    def check(candidate):
>       assert candidate(${call}) == ${expected}
E       assert ${got} == ${expected}
E        +  where ${got} = <function has_close_elements at ${addr}>(${call})

humaneval_check.py:${line}: AssertionError`;
}

const raisedInCandidate = `ValueError: max() iterable argument is empty
def test_longest():
        namespace = dict(vars(solution))
>       namespace["check"](namespace["longest"])

test_solution.py:24: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 
humaneval_check.py:10: in check
    assert candidate([]) == None
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

strings = []

    def longest(strings: List[str]) -> Optional[str]:
        """ Out of list of strings, return the longest one."""
        if strings:
            return None
    
>       maxlen = max(len(x) for x in strings)
E       ValueError: max() iterable argument is empty

solution.py:17: ValueError`;

describe("decodeEntities", () => {
  it("decodes decimal, hexadecimal and named references in one pass", () => {
    expect(decodeEntities("a&#10;b&#x9;c &lt;x&gt; &amp; &quot;q&quot; &apos;s&apos;")).toBe("a\nb\tc <x> & \"q\" 's'");
    expect(decodeEntities("&amp;lt;")).toBe("&lt;");
  });

  it("leaves unknown names and invalid code points as they are", () => {
    expect(decodeEntities("&bogus; &#0; &#xD800; &#99999999; fish & chips")).toBe(
      "&bogus; &#0; &#xD800; &#99999999; fish & chips",
    );
  });
});

describe("signature of a test failure", () => {
  const a = junitAssert("0x7f622e19cfe0", 11, "[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05", "False", "True");

  it("decodes the JUnit entities and keeps the test, the assertion with its data, and the headline", () => {
    expect(signature(a)).toEqual({
      signature: "AssertionError: assert True == False",
      errorType: "AssertionError",
      test: "test_has_close_elements",
      assertion: "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False",
      key: "AssertionError: assert True == False | test test_has_close_elements | assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False",
    });
    expect(signature(a).key).not.toContain("&#10;");
  });

  it("gives a rerun with another address and other line numbers the same key", () => {
    const rerun = junitAssert("0x7f8ec06a0fe0", 12, "[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05", "False", "True");
    expect(signature(rerun)).toEqual(signature(a));
  });

  it("tells apart two failures of the same kind on different assertions of the same test", () => {
    const other = junitAssert("0x7f622e19cfe0", 10, "[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3", "True", "False");
    expect(signature(other).errorType).toBe(signature(a).errorType);
    expect(signature(other).test).toBe(signature(a).test);
    expect(signature(other).key).not.toBe(signature(a).key);
  });

  it("keeps the innermost frame in candidate code and the test statement that called it", () => {
    expect(signature(raisedInCandidate)).toMatchObject({
      signature: "ValueError: <id>() iterable argument is empty",
      test: "test_longest",
      assertion: "assert candidate([]) == None",
      frame: "longest: maxlen = max(len(x) for x in strings)",
    });
    expect(signature(raisedInCandidate).key).toBe(
      "ValueError: <id>() iterable argument is empty | message max() iterable argument is empty | test test_longest | assert candidate([]) == None | at longest: maxlen = max(len(x) for x in strings)",
    );
  });

  it("finds the candidate frame of a plain Python traceback and of a Node stack", () => {
    expect(signature(pythonNameError).frame).toBe("has_close_elements: for idx, elem in enumerate(numbrs):");
    expect(signature(pyIndex).frame).toBe("below_zero: return ops[len(ops)]");
    expect(signature(bareAssert)).toMatchObject({
      assertion: "assert add(2, 3) == 5",
      key: "AssertionError | assert add(2, 3) == 5",
    });
    expect(signature(nodeTypeError)).toMatchObject({ frame: "doubleAll" });
    expect(signature(nodeReference).frame).toBe("sum");
  });

  it("keeps the values the candidate returned in the key, not in the headline", () => {
    const three = junitAssert("0x7f622e19cfe0", 10, "3.5", "0.5", "3.0");
    const oneAndAHalf = junitAssert("0x7f542ce9cf40", 10, "3.5", "0.5", "1.5");
    expect(signature(three).signature).toBe("AssertionError: assert <num> == <num>");
    expect(signature(oneAndAHalf).signature).toBe(signature(three).signature);
    expect(signature(three).message).toBe("assert 3.0 == 0.5");
    expect(signature(oneAndAHalf).key).not.toBe(signature(three).key);
  });

  it("reads the test's name from pytest's summary line", () => {
    expect(signature("FAILED test_other.py::test_below_zero - assert 7 == -2").test).toBe("test_below_zero");
  });
});
