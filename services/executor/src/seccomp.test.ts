import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NEVER_ALLOWED, SHIPPED_SECCOMP_PROFILE, loadSeccompProfile } from "./seccomp.js";

interface Rule {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: Array<{ value: number; op: string }>;
}

describe("the shipped seccomp profile", () => {
  const profile = JSON.parse(loadSeccompProfile()) as { defaultAction: string; syscalls: Rule[] };
  const allowed = new Set(
    profile.syscalls.filter((r) => r.action === "SCMP_ACT_ALLOW" && !r.args).flatMap((r) => r.names),
  );

  it("denies by default and allows what tests need", () => {
    expect(profile.defaultAction).toBe("SCMP_ACT_ERRNO");
    for (const n of [
      "read",
      "write",
      "openat",
      "execve",
      "fork",
      "futex",
      "mmap",
      "epoll_wait",
      "getrandom",
      "wait4",
      "kill",
    ])
      expect(allowed.has(n), n).toBe(true);
  });

  it("denies io_uring, tracing and reaching into other processes", () => {
    for (const n of [...NEVER_ALLOWED, "userfaultfd", "keyctl", "bpf", "mount", "unshare", "setns", "perf_event_open"])
      expect(allowed.has(n), n).toBe(false);
  });

  it("allows clone only without namespace flags, and makes clone3 fall back to clone (ENOSYS)", () => {
    const clone = profile.syscalls.find((r) => r.names.includes("clone"));
    expect(clone?.args?.[0]).toMatchObject({ op: "SCMP_CMP_MASKED_EQ", value: 0x7e020000 });
    expect(profile.syscalls.find((r) => r.names.includes("clone3"))).toMatchObject({
      action: "SCMP_ACT_ERRNO",
      errnoRet: 38,
    });
  });
});

describe("loadSeccompProfile", () => {
  const dir = mkdtempSync(join(tmpdir(), "seccomp-"));
  const write = (name: string, body: unknown): string => {
    const p = join(dir, name);
    writeFileSync(p, typeof body === "string" ? body : JSON.stringify(body));
    return p;
  };

  it("refuses a missing file, a non-profile, an allow-by-default profile and one that allows io_uring", () => {
    expect(() => loadSeccompProfile(join(dir, "nope.json"))).toThrow(/cannot read the seccomp profile/);
    expect(() => loadSeccompProfile(write("junk.json", "{not json"))).toThrow(/cannot read/);
    expect(() => loadSeccompProfile(write("shape.json", { hello: 1 }))).toThrow(/not a seccomp profile/);
    expect(() => loadSeccompProfile(write("open.json", { defaultAction: "SCMP_ACT_ALLOW", syscalls: [] }))).toThrow(
      /allows by default/,
    );
    expect(() =>
      loadSeccompProfile(
        write("uring.json", {
          defaultAction: "SCMP_ACT_ERRNO",
          syscalls: [{ names: ["io_uring_setup"], action: "SCMP_ACT_ALLOW" }],
        }),
      ),
    ).toThrow(/allows io_uring_setup/);
  });

  it("reads the shipped profile from deploy/", () => {
    expect(SHIPPED_SECCOMP_PROFILE).toMatch(/deploy\/seccomp\/sandbox\.json$/);
  });
});
