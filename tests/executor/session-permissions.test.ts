/** The NATS permission matrix lets agent mode's session calls through: who may send them, who may serve them. */
import { describe, expect, it } from "vitest";
import { Endpoints, natsPermissions, replicaSubject } from "@loopsmith/shared/bus";

/** Whether a NATS permission subject (`*` one token, `>` the rest) covers `subject`. */
function covers(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i;
    if (i >= s.length || (p[i] !== "*" && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

describe("NATS permissions of sessions", () => {
  it("let the architect alone publish session_open and any replica's session_call and session_close, and the executor serve them", () => {
    const perms = natsPermissions();
    const subjects = [
      Endpoints.executor.sessionOpen.subject,
      replicaSubject(Endpoints.executor.sessionCall, "a1b2c3d4e5f6"),
      replicaSubject(Endpoints.executor.sessionClose, "a1b2c3d4e5f6"),
    ];
    for (const subject of subjects) {
      expect(
        perms.architect.publish.some((p) => covers(p, subject)),
        subject,
      ).toBe(true);
      expect(
        perms.executor.subscribe.some((p) => covers(p, subject)),
        subject,
      ).toBe(true);
      for (const role of ["client", "builder", "reviewer", "memory", "executor"] as const)
        expect(
          perms[role].publish.some((p) => covers(p, subject)),
          `${role} ${subject}`,
        ).toBe(false);
    }
    expect(() => replicaSubject(Endpoints.executor.sessionCall, "a.b")).toThrow(/not valid/);
  });
});
