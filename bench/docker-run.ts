/**
 * The executor's limits as `docker run` arguments, for the benchmarks' plain-container
 * baselines (bench/executor.ts, bench/repo.ts, bench/suite.ts): one spelling of them.
 */
import { SHIPPED_SECCOMP_PROFILE } from "@loopsmith/executor";
import type { Config } from "@loopsmith/shared/runtime";

/** Options of {@link dockerRunLimits}. */
interface DockerRunLimitsOptions {
  /**
   * Mount `/tmp` `noexec`, as the executor's sandbox does (`createOptions` in
   * services/executor/src/sandbox.ts); without it `/tmp` allows exec.
   */
  tmpNoexec: boolean;
  /** Memory and memory plus swap of the container, MiB (default 512: `ExecutionRequest`'s default `memoryMb`). */
  memoryMb?: number;
}

/**
 * The `docker run` arguments that mirror the confinement of the executor's sandbox
 * (`createOptions` in services/executor/src/sandbox.ts): no network, a read-only root,
 * docker-init, the sandbox user 10001:10001, tmpfs `/workspace` and `/tmp` of
 * `cfg.tmpfsMb` MiB each owned by that user (modes 0755 and 1777), the memory limit with no
 * swap beyond it, `cfg.cpus` CPUs, `cfg.pidsLimit` processes, no capabilities,
 * no-new-privileges, the shipped seccomp profile, no log driver, and `/workspace` as the
 * working directory. The image and the command are the caller's, after these.
 * (The sandbox's inode bounds, ulimits and supervisor capabilities have no counterpart here.)
 */
export function dockerRunLimits(cfg: Config["executor"], opts: DockerRunLimitsOptions): string[] {
  const memory = `${opts.memoryMb ?? 512}m`;
  return [
    "--network",
    "none",
    "--read-only",
    "--init",
    "--user",
    "10001:10001",
    "--tmpfs",
    `/workspace:rw,exec,nosuid,nodev,size=${cfg.tmpfsMb}m,uid=10001,gid=10001,mode=0755`,
    "--tmpfs",
    `/tmp:rw,${opts.tmpNoexec ? "noexec," : ""}nosuid,nodev,size=${cfg.tmpfsMb}m,uid=10001,gid=10001,mode=1777`,
    "--memory",
    memory,
    "--memory-swap",
    memory,
    `--cpus=${cfg.cpus}`,
    "--pids-limit",
    String(cfg.pidsLimit),
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--security-opt",
    `seccomp=${SHIPPED_SECCOMP_PROFILE}`,
    "--log-driver",
    "none",
    "-w",
    "/workspace",
  ];
}
