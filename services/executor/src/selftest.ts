/**
 * The self-test run at executor start: a probe in a real sandbox container reports what
 * confinement it actually sees (network interfaces and routes, user, capabilities,
 * no-new-privileges, cgroup limits, read-only root, and whether it can reach the supervisor
 * that reports its result). Anything missing refuses the start.
 */
import { LoopsmithError } from "@loopsmith/shared/runtime";
import type { RawRun } from "./sandbox.js";

/** The probe: `key=value` lines; works on cgroup v1 and v2 with only sh and coreutils. */
export const PROBE = String.raw`
echo "uid=$(id -u)"
echo "net=$(ls /sys/class/net | tr '\n' ',')"
echo "routes=$(tail -n +2 /proc/net/route | wc -l)"
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -d ' \t' | sed 's/:/=/'
if [ -r /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
  echo "mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
  echo "swap=$(( $(cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes) - $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) ))"
  echo "pids=$(cat /sys/fs/cgroup/pids/pids.max)"
  echo "cpu=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)/$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
else
  echo "mem=$(cat /sys/fs/cgroup/memory.max)"
  echo "swap=$(cat /sys/fs/cgroup/memory.swap.max)"
  echo "pids=$(cat /sys/fs/cgroup/pids.max)"
  echo "cpu=$(cut -d' ' -f1 /sys/fs/cgroup/cpu.max)/$(cut -d' ' -f2 /sys/fs/cgroup/cpu.max)"
fi
if touch /usr/.loopsmith-probe 2>/dev/null; then echo rootfs=rw; else echo rootfs=ro; fi
echo "supervisor_uid=$(stat -c %u /proc/$PPID 2>/dev/null || echo unknown)"
if head -c 1 /proc/$PPID/environ >/dev/null 2>&1; then echo supervisor_readable=1; else echo supervisor_readable=0; fi
if kill -0 $PPID 2>/dev/null; then echo supervisor_signalable=1; else echo supervisor_signalable=0; fi
`;

/** What the sandbox must show. */
export interface Expected {
  memoryBytes: number;
  pidsLimit: number;
  cpus: number;
}

/**
 * Checks the probe's report; returns the list of problems (empty when all is confined).
 */
export function checkProbe(report: string, want: Expected): string[] {
  const kv = new Map<string, string>();
  for (const line of report.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) kv.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
  }
  const problems: string[] = [];
  const expect = (ok: boolean, what: string): void => {
    if (!ok) problems.push(what);
  };
  expect(
    kv.get("uid") !== undefined && kv.get("uid") !== "0",
    `the command runs as root (uid ${kv.get("uid") ?? "?"})`,
  );
  const nets = (kv.get("net") ?? "").split(",").filter(Boolean);
  expect(
    nets.length > 0 && nets.every((n) => n === "lo"),
    `network interfaces other than loopback: ${nets.join(" ") || "?"}`,
  );
  expect(kv.get("routes") === "0", `the container has network routes (${kv.get("routes") ?? "?"})`);
  expect(/^0+$/.test(kv.get("CapEff") ?? "x"), `effective capabilities are not empty (${kv.get("CapEff") ?? "?"})`);
  expect(/^0+$/.test(kv.get("CapBnd") ?? "x"), `the capability bounding set is not empty (${kv.get("CapBnd") ?? "?"})`);
  expect(kv.get("NoNewPrivs") === "1", "no-new-privileges is not set");
  expect(kv.get("Seccomp") === "2", `no seccomp filter is in force (Seccomp ${kv.get("Seccomp") ?? "?"})`);
  expect(
    Number(kv.get("mem")) === want.memoryBytes,
    `the memory limit is ${kv.get("mem") ?? "?"} bytes, not ${want.memoryBytes}`,
  );
  expect(kv.get("swap") === "0", `swap is allowed beyond the memory limit (${kv.get("swap") ?? "?"})`);
  expect(
    Number(kv.get("pids")) === want.pidsLimit,
    `the pids limit is ${kv.get("pids") ?? "?"}, not ${want.pidsLimit}`,
  );
  const [quota, period] = (kv.get("cpu") ?? "").split("/").map(Number);
  expect(
    quota !== undefined &&
      period !== undefined &&
      quota > 0 &&
      period > 0 &&
      Math.abs(quota / period - want.cpus) < 0.01,
    `the CPU quota is ${kv.get("cpu") ?? "?"}, not ${want.cpus} CPUs`,
  );
  expect(kv.get("rootfs") === "ro", "the root file system is writable");
  // The verdict's producer must be out of the command's reach (docs/SANDBOX.md, "Verdicts").
  expect(
    /^\d+$/.test(kv.get("supervisor_uid") ?? "") && kv.get("supervisor_uid") !== kv.get("uid"),
    `the supervisor runs as the command's user (uid ${kv.get("supervisor_uid") ?? "?"})`,
  );
  expect(kv.get("supervisor_readable") === "0", "the command can read the supervisor's /proc entries");
  expect(kv.get("supervisor_signalable") === "0", "the command can signal the supervisor");
  return problems;
}

/**
 * Runs the probe through `runProbe` (the executor's own run path) and checks it.
 * @throws LoopsmithError `sandbox_error` (not retryable) listing every missing confinement,
 *   or when the probe could not run at all.
 */
export async function selfTest(image: string, want: Expected, runProbe: () => Promise<RawRun>): Promise<void> {
  const raw = await runProbe();
  const report = raw.stdout.toString("utf8");
  if (raw.trailer?.exitCode !== 0) {
    throw new LoopsmithError(
      "sandbox_error",
      `the sandbox self-test could not run in ${image}: ${raw.stderr.toString("utf8").slice(0, 500)}`,
      {
        retryable: false,
        details: { image, stdout: report.slice(0, 2000), trailer: raw.trailer },
      },
    );
  }
  const problems = checkProbe(report, want);
  if (problems.length) {
    throw new LoopsmithError(
      "sandbox_error",
      `the sandbox in ${image} is not confined: ${problems.join("; ")}; refusing to run code`,
      {
        retryable: false,
        details: { image, problems },
      },
    );
  }
}
