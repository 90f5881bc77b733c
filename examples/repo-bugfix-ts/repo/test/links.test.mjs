import assert from "node:assert/strict";
import { test } from "node:test";
import { GAP, pageLinks } from "../src/index.js";

test("a short pager shows every page", () => {
  assert.deepEqual(pageLinks(2, 4), [1, 2, 3, 4]);
});

test("gaps on both sides of the window", () => {
  assert.deepEqual(pageLinks(10, 20), [1, GAP, 8, 9, 10, 11, 12, GAP, 20]);
});

test("a gap of one page shows that page instead (start)", () => {
  assert.deepEqual(pageLinks(5, 20), [1, 2, 3, 4, 5, 6, 7, GAP, 20]);
});

test("a gap of one page shows that page instead (end)", () => {
  assert.deepEqual(pageLinks(16, 20), [1, GAP, 14, 15, 16, 17, 18, 19, 20]);
});

test("out-of-range pages are clamped", () => {
  assert.deepEqual(pageLinks(99, 9), [1, GAP, 7, 8, 9]);
  assert.deepEqual(pageLinks(-3, 9), [1, 2, 3, GAP, 9]);
});
