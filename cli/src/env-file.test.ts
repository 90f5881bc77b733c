import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadEnvFile } from "./env-file.js";
import { CliError } from "./errors.js";

describe("--env-from", () => {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-env-from-"));

  it("sets what the environment leaves unset or empty, and keeps what it sets", () => {
    const file = join(dir, "client.env");
    writeFileSync(
      file,
      "# the client\nNATS_URL=nats://127.0.0.1:4222\nNATS_USER=client\nNATS_PASSWORD=abc=def\nNATS_INBOX_PREFIX=_INBOX_client\n",
    );
    const env: NodeJS.ProcessEnv = { NATS_URL: "", NATS_USER: "someone-else" };
    expect(loadEnvFile(file, env).sort()).toEqual(["NATS_INBOX_PREFIX", "NATS_PASSWORD", "NATS_URL"]);
    expect(env).toEqual({
      NATS_URL: "nats://127.0.0.1:4222",
      NATS_USER: "someone-else",
      NATS_PASSWORD: "abc=def",
      NATS_INBOX_PREFIX: "_INBOX_client",
    });
  });

  it("fails as a usage error (exit 2) when the file cannot be read", () => {
    let err: unknown;
    try {
      loadEnvFile(join(dir, "missing.env"), {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).message).toMatch(/cannot read the --env-from file .*missing\.env/);
  });
});
