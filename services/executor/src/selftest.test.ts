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
  "mem=536870912",
  "swap=0",
  "pids=128",
  "cpu=100000/100000",
  "rootfs=ro",
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
      .replace("mem=536870912", "mem=9223372036854771712")
      .replace("swap=0", "swap=536870912")
      .replace("pids=128", "pids=max")
      .replace("cpu=100000/100000", "cpu=-1/100000")
      .replace("rootfs=ro", "rootfs=rw");
    expect(checkProbe(bad, want)).toHaveLength(9);
    expect(checkProbe("", want).length).toBeGreaterThan(5);
  });
});
