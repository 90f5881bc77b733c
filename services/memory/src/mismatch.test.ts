import { describe, expect, it } from "vitest";
import { mismatch } from "./mismatch.js";

describe("mismatch", () => {
  it("names a returned None", () => {
    expect(mismatch("E       assert None == 4\nE        +  where None = <function f at 0x7f>(2)")).toBe(
      "returned none",
    );
  });
  it("names numbers off by one, and which way", () => {
    expect(mismatch("E   assert 3 == 2")).toBe("returned more off by one");
    expect(mismatch("AssertionError: Test 1\nassert 0 == 1")).toBe("returned less off by one returned zero");
  });
  it("tells a list missing its last item from one in another order", () => {
    expect(mismatch("E   assert [1, 2] == [1, 2, 3]")).toBe("shorter by one item missing the tail");
    expect(mismatch("E   assert [3, 1, 2] == [1, 2, 3]")).toBe("same items other order");
    expect(mismatch("E   assert [] == [1, 2]")).toBe("returned empty shorter");
  });
  it("compares the one differing item of a tuple", () => {
    expect(mismatch("E   assert (1, 1) == (1, 2)")).toBe("one item differs items off by one returned less off by one");
  });
  it("names a letter case difference and a flipped boolean", () => {
    expect(mismatch("E   assert 'abc' == 'ABC'")).toContain("letter case differs");
    expect(mismatch("E   assert False == True")).toBe("returned false not true");
    expect(mismatch("E   assert False\nE    +  where False = <function f at 0x7f>(30)")).toBe(
      "returned false not true",
    );
  });
  it("names a value of the wrong type", () => {
    expect(mismatch("E   assert 2.5 == 2")).toBe("returned float not int returned more");
    expect(mismatch("E   assert '3' == 3")).toBe("returned str not int");
  });
  it("gives nothing for a report cut short, a non-literal or no assertion", () => {
    expect(mismatch("E   assert [1, 2, 3, ...] == [1, 2]")).toBe("");
    expect(mismatch("E   assert <function f at 0x1> == 3")).toBe("");
    expect(mismatch("TypeError: 'float' object is not iterable")).toBe("");
  });
});
