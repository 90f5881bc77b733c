import { describe, expect, it } from "vitest";
import { cutBytes } from "@loopsmith/shared/text";
import { Capture, type CaptureEvent } from "./capture.js";

/** One Docker multiplexed frame. */
function frame(stream: 1 | 2, data: string | Buffer): Buffer {
  const body = typeof data === "string" ? Buffer.from(data) : data;
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}

const MARK = "\u0000LOOPSMITH-abc:";

describe("Capture", () => {
  it("demultiplexes frames split at any byte and splits the trailer off stdout", () => {
    const events: CaptureEvent[] = [];
    const c = new Capture(1024, MARK, (e) => events.push(e));
    const raw = Buffer.concat([
      frame(1, "hello "),
      frame(2, "warn"),
      frame(2, MARK),
      frame(1, `world${MARK}{"phase":"run"}\n`),
    ]);
    for (let i = 0; i < raw.length; i += 3) c.write(raw.subarray(i, i + 3));
    c.end();
    expect(c.stdout().toString()).toBe("hello world");
    expect(c.stderr().toString()).toBe("warn");
    expect(c.trailer()).toBe('{"phase":"run"}');
    expect(events).toEqual(["trailer"]);
    expect(c.truncated).toBe(false);
  });

  it("reports the trailer only once stderr's marker has arrived too", () => {
    const events: CaptureEvent[] = [];
    const c = new Capture(1024, MARK, (e) => events.push(e));
    c.write(frame(1, `out${MARK}{"phase":"run"}\n`));
    expect(events).toEqual([]);
    c.write(frame(2, "late stderr"));
    c.write(frame(2, MARK.slice(0, 5)));
    expect(events).toEqual([]);
    c.write(frame(2, MARK.slice(5)));
    expect(events).toEqual(["trailer"]);
    expect(c.stderr().toString()).toBe("late stderr");
    expect(c.stdout().toString()).toBe("out");
  });

  it("keeps the head and the tail within the cap, the note between them, and reports output_limit once", () => {
    const events: CaptureEvent[] = [];
    const c = new Capture(100, MARK, (e) => events.push(e));
    c.write(frame(1, "HEAD" + "x".repeat(96)));
    expect(events).toEqual([]);
    c.write(frame(1, "y".repeat(500)));
    c.write(frame(1, "TAIL"));
    c.write(frame(2, "err"));
    c.end();
    const out = c.stdout().toString();
    expect(out.length).toBeLessThanOrEqual(100);
    expect(out.startsWith("HEAD")).toBe(true);
    expect(out.endsWith("TAIL")).toBe(true);
    const note = /\n\[… (\d+) bytes cut …\]\n/.exec(out);
    expect(out.length - (note?.[0].length ?? 0) + Number(note?.[1])).toBe(604);
    expect(c.stderr().toString()).toBe("err");
    expect(c.truncated).toBe(true);
    expect(events).toEqual(["output_limit"]);
  });

  it("cuts what it captures as the shared cut cuts the whole output, frames split at any byte", () => {
    const body = Buffer.from("ünïcödé ✓ 😀 line\n".repeat(200));
    const raw = Buffer.concat([frame(1, body.subarray(0, 1_000)), frame(1, body.subarray(1_000)), frame(1, MARK)]);
    for (const step of [1, 7, 4096]) {
      const c = new Capture(1024, MARK, () => undefined);
      for (let i = 0; i < raw.length; i += step) c.write(raw.subarray(i, i + step));
      c.end();
      expect(c.stdout().equals(cutBytes(body, { max: 1024 }))).toBe(true);
    }
  });

  it("returns binary bytes unchanged and releases held-back bytes at the end", () => {
    const bytes = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 256));
    const c = new Capture(1024, MARK, () => undefined);
    c.write(frame(1, bytes));
    c.end();
    expect(c.stdout().equals(bytes)).toBe(true);
    expect(c.trailer()).toBeNull();
  });

  it("has no trailer when the marker never completes", () => {
    const c = new Capture(1024, MARK, () => undefined);
    c.write(frame(1, `${MARK}{"partial":`));
    c.end();
    expect(c.trailer()).toBeNull();
  });
});
