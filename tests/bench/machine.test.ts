import { describe, expect, it } from "vitest";
import { cpuShares, cpuTimes, referenceMs } from "../../bench/machine.js";

describe("bench/machine: the state a benchmark ran in", () => {
  it("counts stolen time apart from busy time, as shares of the whole", () => {
    const before = { busy: 100, idle: 50, steal: 10 };
    const after = { busy: 160, idle: 70, steal: 30 };
    const { busyPct, stealPct } = cpuShares(before, after);
    expect(busyPct).toBeCloseTo(60, 5); // 60 of 100 CPU-s
    expect(stealPct).toBeCloseTo(20, 5);
    expect(cpuShares(after, after)).toEqual({ busyPct: 0, stealPct: 0 });
  });

  it("reads this machine's CPU times, which only grow, and times the reference work", () => {
    const a = cpuTimes();
    const ms = referenceMs();
    const b = cpuTimes();
    expect(a.busy + a.idle).toBeGreaterThan(0);
    expect(b.busy).toBeGreaterThan(a.busy); // the reference work itself was busy time
    expect(ms).toBeGreaterThan(1);
    expect(ms).toBeLessThan(30_000);
  });
});
