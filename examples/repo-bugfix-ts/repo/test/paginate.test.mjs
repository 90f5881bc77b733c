import assert from "node:assert/strict";
import { test } from "node:test";
import { clampPage, pageCount, paginate } from "../src/index.js";

const letters = [..."abcdefghijklmnopqrstuvwxy"]; // 25 items

test("pageCount rounds up and never returns 0", () => {
  assert.equal(pageCount(25, 10), 3);
  assert.equal(pageCount(20, 10), 2);
  assert.equal(pageCount(0, 10), 1);
});

test("pageCount rejects a page size below 1", () => {
  assert.throws(() => pageCount(10, 0), RangeError);
});

test("clampPage moves a page into range", () => {
  assert.equal(clampPage(0, 3), 1);
  assert.equal(clampPage(9, 3), 3);
  assert.equal(clampPage(2, 3), 2);
});

test("paginate returns the items of a middle page", () => {
  const p = paginate(letters, 2, 10);
  assert.deepEqual(p.items, [..."klmnopqrst"]);
  assert.equal(p.hasPrevious, true);
  assert.equal(p.hasNext, true);
});

test("the last page holds the remaining items", () => {
  const p = paginate(letters, 3, 10);
  assert.deepEqual(p.items, [..."uvwxy"]);
  assert.deepEqual([p.page, p.pages, p.hasNext], [3, 3, false]);
});
