import { describe, expect, it } from "vitest";
import { checkProbe } from "./selftest.js";

const want = { memoryBytes: 536870912, pidsLimit: 128, cpus: 1 };
const good = [
  "uid=10001",
  "net=lo,",
  "routes=0",
  "CapPrm=0000000000000000",
  "CapEff=0000000000000000",
  "CapBnd=0000000000000000",
  "NoNewPrivs=1",
  "Seccomp=2",
  "mem=536870912",
  "swap=0",
  "pids=128",
  "cpu=100000/100000",
  "rootfs=ro",
  "supervisor_uid=0",
  "supervisor_readable=0",
  "supervisor_signalable=0",
].join("\n");

describe("checkProbe", () => {
  it("accepts a confined sandbox", () => {
    expect(checkProbe(good, want)).toEqual([]);
  });

  it("names every missing confinement", () => {
    const bad = good
      .replace("uid=10001", "uid=0")
      .replace("net=lo,", "net=eth0,lo,")
      .replace("CapEff=0000000000000000", "CapEff=00000000a80425fb")
      .replace("NoNewPrivs=1", "NoNewPrivs=0")
      .replace("Seccomp=2", "Seccomp=0")
      .replace("mem=536870912", "mem=9223372036854771712")
      .replace("swap=0", "swap=536870912")
      .replace("pids=128", "pids=max")
      .replace("cpu=100000/100000", "cpu=-1/100000")
      .replace("rootfs=ro", "rootfs=rw");
    // uid 0 is also the supervisor's uid: the command could reach it.
    expect(checkProbe(bad, want)).toHaveLength(11);
    expect(checkProbe("", want).length).toBeGreaterThan(5);
  });

  it("refuses a supervisor the command can reach (same user, readable, signalable)", () => {
    const reachable = good
      .replace("supervisor_uid=0", "supervisor_uid=10001")
      .replace("supervisor_readable=0", "supervisor_readable=1")
      .replace("supervisor_signalable=0", "supervisor_signalable=1");
    const problems = checkProbe(reachable, want);
    expect(problems).toHaveLength(3);
    expect(problems.join("; ")).toMatch(/supervisor runs as the command's user/);
    expect(checkProbe("", want).length).toBeGreaterThan(5);
  });
});
