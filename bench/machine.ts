/**
 * The machine's state beside a bench's figures: one home, `cli/src/bench/machine.ts`, which
 * `loopsmith bench` also records in its summary.
 */
export { TICK_S, cpuShares, cpuTimes, machineLine, referenceMs, type CpuTimes } from "../cli/src/bench/machine.js";
