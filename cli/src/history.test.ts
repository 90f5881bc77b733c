import { describe, expect, it } from "vitest";
import { HISTORY_PAGE_MAX, type History, type TaskRecord } from "@loopsmith/shared/contracts";
import { readHistoryPages } from "./history.js";
import { parseSince } from "./preflight.js";

const task = (i: number) => ({ taskId: `t-${i}` }) as unknown as TaskRecord;

describe("history pages", () => {
  it("reads past one page in requests of at most HISTORY_PAGE_MAX, stopping when memory runs out", async () => {
    const stored = Array.from({ length: 1_234 }, (_, i) => task(i));
    const asked: Array<[number, number]> = [];
    const page = async (limit: number, offset: number): Promise<History> => {
      asked.push([limit, offset]);
      return { tasks: stored.slice(offset, offset + limit) };
    };
    const all = await readHistoryPages(5_000, page);
    expect(all.tasks.map((t) => t.taskId)).toEqual(stored.map((t) => t.taskId));
    expect(asked).toEqual([
      [HISTORY_PAGE_MAX, 0],
      [HISTORY_PAGE_MAX, 500],
      [HISTORY_PAGE_MAX, 1_000],
    ]);
    asked.length = 0;
    const some = await readHistoryPages(600, page);
    expect(some.tasks).toHaveLength(600);
    expect(asked).toEqual([
      [500, 0],
      [100, 500],
    ]);
  });
});

describe("stats --since", () => {
  const now = new Date("2026-11-25T12:00:00.000Z");
  it("takes an age in minutes, hours, days or weeks, or an ISO-8601 date", () => {
    expect(parseSince("30m", now)).toBe("2026-11-25T11:30:00.000Z");
    expect(parseSince("24h", now)).toBe("2026-11-24T12:00:00.000Z");
    expect(parseSince("7d", now)).toBe("2026-11-18T12:00:00.000Z");
    expect(parseSince("2W", now)).toBe("2026-11-11T12:00:00.000Z");
    expect(parseSince("2026-11-01", now)).toBe("2026-11-01T00:00:00.000Z");
    expect(parseSince("2026-11-01T08:00:00+02:00", now)).toBe("2026-11-01T06:00:00.000Z");
  });
  it("refuses anything else with a message naming the forms", () => {
    for (const bad of ["", "yesterday", "7", "7y", "2026-13-45", "-1d"]) {
      expect(() => parseSince(bad, now), bad).toThrow(/ISO-8601 date .* or an age such as 30m/);
    }
  });
});
