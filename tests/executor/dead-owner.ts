/**
 * A stand-in for an executor that dies by SIGKILL in another pid namespace (its containers
 * say pid 1, which is alive on every host): it creates a sandbox the way the executor does,
 * optionally starts a run that would last 10 minutes (its deadline too), prints the container
 * id, and kills itself.
 * Run: node --import tsx tests/executor/dead-owner.ts <instance> idle|running [python|node]
 */
import { hostname } from "node:os";
import Docker from "dockerode";
import { loadConfig } from "@loopsmith/shared/runtime";
import { LABEL, LABEL_HOST, LABEL_PID, Sandbox, loadSeccompProfile } from "@loopsmith/executor";

const [instance = "deadowner", mode = "idle", kind = "python"] = process.argv.slice(2);
if (kind !== "python" && kind !== "node") throw new Error(`no sandbox image of kind ${kind}`);
const config = loadConfig({ env: { ...process.env, NATS_URL: "" } });
const sandbox = await Sandbox.create(new Docker(), {
  image: config.images[kind],
  kind,
  memoryBytes: 512 * 1024 * 1024,
  cpus: 1,
  pidsLimit: 64,
  tmpfsMb: 16,
  labels: { [LABEL]: instance, [LABEL_HOST]: hostname(), [LABEL_PID]: "1" },
  seccomp: loadSeccompProfile(),
});
process.stdout.write(`${sandbox.id}\n`);
if (mode === "running") {
  void sandbox.run(
    {
      argv: ["sleep", "600"],
      env: { PATH: "/usr/bin:/bin" },
      files: [],
      resultPath: "/tmp/.loopsmith/result.xml",
      resultLimitBytes: 65536,
    },
    { timeoutMs: 600_000, outputLimitBytes: 65536, memoryBytes: 512 * 1024 * 1024 },
  );
  // Killed only once the command runs, so the supervisor is in its run, not its wait.
  for (let i = 0; i < 200; i++) {
    const top = await sandbox.container.top().catch(() => ({ Processes: [] as string[][] }));
    if ((top.Processes ?? []).some((row: string[]) => row.join(" ").includes("sleep 600"))) break;
    await new Promise((r) => setTimeout(r, 50));
  }
}
process.kill(process.pid, "SIGKILL");
