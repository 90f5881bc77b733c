/**
 * The sandbox's seccomp profile: read once at executor creation from `executor.seccompProfile`
 * or the profile shipped with loopsmith (`deploy/seccomp/sandbox.json`, made by
 * `deploy/seccomp/generate.mjs`), checked, and handed to the engine as JSON text.
 */
import { readFileSync } from "node:fs";
import { LoopsmithError, assetPath } from "@loopsmith/shared/runtime";

/** The profile shipped with loopsmith. */
export const SHIPPED_SECCOMP_PROFILE = assetPath("deploy", "seccomp", "sandbox.json");

/** System calls the sandbox must never allow, whatever profile is configured. */
export const NEVER_ALLOWED = [
  "io_uring_setup",
  "io_uring_enter",
  "io_uring_register",
  "ptrace",
  "process_vm_readv",
  "process_vm_writev",
  "pidfd_getfd",
];

interface ProfileRule {
  names?: string[];
  action?: string;
}

/**
 * Reads and checks a seccomp profile; returns its JSON text for `SecurityOpt: seccomp=…`.
 * @param path - the profile's path; the shipped profile when undefined
 * @throws LoopsmithError `config_invalid` when the file cannot be read, is not a profile
 *   (JSON with `defaultAction` and `syscalls`), denies nothing by default, or allows a call
 *   in {@link NEVER_ALLOWED}
 */
export function loadSeccompProfile(path = SHIPPED_SECCOMP_PROFILE): string {
  let profile: { defaultAction?: unknown; syscalls?: ProfileRule[] };
  try {
    profile = JSON.parse(readFileSync(path, "utf8")) as typeof profile;
  } catch (err) {
    throw new LoopsmithError("config_invalid", `cannot read the seccomp profile ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (typeof profile.defaultAction !== "string" || !Array.isArray(profile.syscalls)) {
    throw new LoopsmithError(
      "config_invalid",
      `${path} is not a seccomp profile (it needs defaultAction and syscalls)`,
    );
  }
  if (!/^SCMP_ACT_(ERRNO|KILL|KILL_PROCESS|KILL_THREAD|TRAP)$/.test(profile.defaultAction)) {
    throw new LoopsmithError(
      "config_invalid",
      `the seccomp profile ${path} allows by default (${profile.defaultAction}); it must deny what it does not name`,
    );
  }
  const allowed = new Set(profile.syscalls.filter((r) => r.action === "SCMP_ACT_ALLOW").flatMap((r) => r.names ?? []));
  const bad = NEVER_ALLOWED.filter((n) => allowed.has(n));
  if (bad.length)
    throw new LoopsmithError(
      "config_invalid",
      `the seccomp profile ${path} allows ${bad.join(", ")}, which the sandbox must deny`,
    );
  return JSON.stringify(profile);
}
