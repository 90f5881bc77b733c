/**
 * The state of the machine a benchmark ran on, printed beside its figures so that figures
 * from different runs can be compared. CPU-bound figures here moved by 2x between sessions
 * with the same code (bench:throughput: 4.0 CPU-s a task one day, 1.6 another), so a bench
 * that prints tasks/min or start-up seconds also prints:
 *
 * - a **reference workload**: the wall time of a fixed amount of single-threaded work
 *   ({@link referenceMs}), measured before the run; a machine that is slower, throttled or
 *   shared with a busy neighbour takes longer for the same work;
 * - the **CPU steal** over the run (from `/proc/stat`): the share of the time the hypervisor
 *   ran other guests on this machine's virtual CPUs, which is neither busy nor idle here.
 *
 * `loopsmith bench` records the same in its summary ({@link machineState}), and the scripts
 * under `bench/` print it ({@link machineLine}). Linux only (`/proc/stat`); elsewhere the
 * steal reads as 0.
 */
import { readFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { median } from "simple-statistics";
import { z } from "zod";

/** Seconds per clock tick in `/proc/stat` and `/proc/<pid>/stat` (USER_HZ is 100 on Linux). */
export const TICK_S = 0.01;

/** CPU time of the whole machine so far, in CPU-seconds (all cores). */
export interface CpuTimes {
  /** user + nice + system + irq + softirq: work done here. */
  busy: number;
  /** idle + iowait. */
  idle: number;
  /** Time the hypervisor gave to other guests while this machine wanted to run. */
  steal: number;
}

/** Reads `/proc/stat`'s first line; all zeros where there is none. */
export function cpuTimes(): CpuTimes {
  try {
    const t = (readFileSync("/proc/stat", "utf8").split("\n")[0] as string).trim().split(/\s+/).slice(1).map(Number);
    const at = (i: number): number => t[i] ?? 0;
    return {
      busy: (at(0) + at(1) + at(2) + at(5) + at(6)) * TICK_S,
      idle: (at(3) + at(4)) * TICK_S,
      steal: at(7) * TICK_S,
    };
  } catch {
    return { busy: 0, idle: 0, steal: 0 };
  }
}

/** Busy and steal shares of the machine's time between two readings, in percent. */
export function cpuShares(before: CpuTimes, after: CpuTimes): { busyPct: number; stealPct: number } {
  const busy = after.busy - before.busy;
  const steal = after.steal - before.steal;
  const all = busy + steal + (after.idle - before.idle);
  return all > 0 ? { busyPct: (100 * busy) / all, stealPct: (100 * steal) / all } : { busyPct: 0, stealPct: 0 };
}

/**
 * Wall time of the reference workload, in ms: 500,000 pseudo-random numbers (a fixed-seed
 * linear congruential generator) sorted with a JavaScript comparator, the median of three
 * (about 0.1–0.3 s each on the 2-core machines here). Plain JIT-compiled code, like the
 * services', rather than a hashing routine the CPU may run in dedicated instructions.
 */
export function referenceMs(): number {
  const times: number[] = [];
  for (let r = 0; r < 3; r++) {
    let x = 12345;
    const xs = Array.from({ length: 500_000 }, () => (x = (x * 1103515245 + 12345) % 2147483648));
    const t = performance.now();
    xs.sort((a, b) => a - b);
    times.push(performance.now() - t);
  }
  return median(times);
}

/** One line for a bench's output: the reference time and the busy and steal shares of a run. */
export function machineLine(refMs: number, before: CpuTimes, after: CpuTimes): string {
  const { busyPct, stealPct } = cpuShares(before, after);
  return `machine: reference workload ${Math.round(refMs)} ms (sorting 500,000 numbers in JavaScript, one thread; lower is faster); over the run the CPUs were ${busyPct.toFixed(0)}% busy, ${stealPct.toFixed(1)}% stolen by the hypervisor`;
}

/**
 * The machine a bench run ran on, as `summary.json` records it: CPUs and memory (GiB), the
 * reference workload's time before the run (ms, {@link referenceMs}), the busy and steal
 * shares over the run (percent), and the load averages (1, 5, 15 minutes) at its end.
 */
export const MachineState = z.object({
  cpus: z.number().int().nonnegative(),
  memoryGiB: z.number().nonnegative(),
  referenceMs: z.number().nonnegative(),
  busyPct: z.number().min(0).max(100),
  stealPct: z.number().min(0).max(100),
  loadAverage: z.array(z.number()).length(3),
});
export type MachineState = z.infer<typeof MachineState>;

/** The busy share (percent) over which a task that ran out of time counts as the machine's failure, not the agent's. */
export const BUSY_MACHINE_PCT = 90;

/** {@link MachineState} of a run between two readings of `/proc/stat`. */
export function machineState(refMs: number, before: CpuTimes, after: CpuTimes): MachineState {
  const { busyPct, stealPct } = cpuShares(before, after);
  const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
  return {
    cpus: cpus().length,
    memoryGiB: round(totalmem() / 1024 ** 3),
    referenceMs: round(refMs),
    busyPct: round(Math.min(100, busyPct)),
    stealPct: round(Math.min(100, stealPct)),
    loadAverage: loadavg().map((x) => round(x, 2)),
  };
}
