import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { BLOB_MIN_BYTES, BLOB_REF_KEY, compact, decode, encode, isBlobRef, refsOf, stubText } from "./blobs.js";

const BUDGET = 64 * 1024;
const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

/** Decodes `text` reading the blobs of `encoded`. */
async function roundTrip(encoded: ReturnType<typeof encode>): Promise<unknown> {
  const byDigest = new Map(encoded.blobs.map((b) => [b.digest, b.data]));
  const { state } = await decode(JSON.parse(encoded.text), async (digest) => {
    const data = byDigest.get(digest);
    if (!data) throw new Error(`no blob ${digest}`);
    return data;
  });
  return state;
}

describe("checkpoint documents and their blobs", () => {
  it("keeps a state that fits the budget whole, with no blob", () => {
    const state = {
      status: "running",
      eventSeq: 3,
      files: [{ path: "a.py", content: "x".repeat(BLOB_MIN_BYTES * 2) }],
    };
    const out = encode(state, BUDGET);
    expect(out.blobs).toEqual([]);
    expect(JSON.parse(out.text)).toEqual(state);
  });

  it("moves the longest strings out first, by sha256, until the document fits; decoding gives the state back", async () => {
    const big = "é".repeat(300_000); // 600 kB of UTF-8
    const medium = "m".repeat(40_000);
    const state = {
      status: "running",
      eventSeq: 7,
      files: [
        { path: "big.py", content: big },
        { path: "m.py", content: medium },
      ],
      note: "short",
    };
    const out = encode(state, BUDGET);
    expect(bytes(out.text)).toBeLessThanOrEqual(BUDGET);
    const doc = JSON.parse(out.text) as { files: Array<{ content: unknown }>; note: string };
    // The 600 kB string alone moved: the 40 kB one fits with it gone.
    expect(isBlobRef(doc.files[0]?.content)).toBe(true);
    expect(doc.files[1]?.content).toBe(medium);
    expect(doc.note).toBe("short");
    expect(out.blobs.map((b) => b.digest)).toEqual([
      createHash("sha256").update(Buffer.from(big, "utf8")).digest("hex"),
    ]);
    expect(refsOf(doc)).toEqual(out.blobs.map((b) => b.digest));
    expect(await roundTrip(out)).toEqual(state);
  });

  it("moves a large array of small values (a 2,000-case test list) when strings alone cannot make it fit", async () => {
    const tests = Array.from({ length: 2_000 }, (_, i) => ({
      name: `test_case_${i}`,
      classname: "suite",
      status: i % 3 ? "passed" : "failed",
      message: "assert 1 == 2 ".repeat(5),
      durationMs: i,
    }));
    const state = { status: "running", eventSeq: 1, lastExecution: { status: "failed", tests } };
    expect(bytes(JSON.stringify(state))).toBeGreaterThan(BUDGET);
    const out = encode(state, BUDGET);
    expect(bytes(out.text)).toBeLessThanOrEqual(BUDGET);
    expect(out.blobs).toHaveLength(1);
    expect(await roundTrip(out)).toEqual(state);
  });

  it("names a part that did not change by the same digest in the next checkpoint", () => {
    const content = "y".repeat(200_000);
    const a = encode({ status: "running", eventSeq: 1, content }, BUDGET);
    const b = encode({ status: "running", eventSeq: 2, content }, BUDGET);
    expect(b.blobs.map((x) => x.digest)).toEqual(a.blobs.map((x) => x.digest));
    expect(a.text).not.toBe(b.text);
  });

  it("refuses a blob whose bytes do not have its digest", async () => {
    const out = encode({ content: "z".repeat(100_000) }, 1_000);
    await expect(decode(JSON.parse(out.text), async () => new TextEncoder().encode("tampered"))).rejects.toThrow(
      /does not have its digest/,
    );
  });

  it("compacts a final state to fit without blobs: long strings become a note of their size and digest", () => {
    const big = "q".repeat(500_000);
    const state = { status: "final", eventSeq: 9, content: big, keep: "k".repeat(100) };
    const out = compact(state, BUDGET, "task");
    expect(out.blobs).toEqual([]);
    const doc = JSON.parse(out.text) as { content: string; keep: string };
    expect(doc.content).toBe(stubText(500_000, createHash("sha256").update(big).digest("hex"), "task"));
    expect(doc.keep).toBe(state.keep);
    expect(JSON.stringify(doc)).not.toContain(BLOB_REF_KEY);
  });
});
