import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { Config } from "@loopsmith/shared/runtime";
import { duration, ensureStackImages, stackImages, type ImageEngine } from "./images.js";

/** An engine holding `held`; a load adds `fromArchive` to it. */
function fakeEngine(held: string[], fromArchive: string[] = []): ImageEngine & { loads: number } {
  const images = new Set(held);
  const engine = {
    loads: 0,
    getImage: (name: string) => ({
      inspect: () =>
        images.has(name)
          ? Promise.resolve({})
          : Promise.reject(Object.assign(new Error("no such image"), { statusCode: 404 })),
    }),
    loadImage: () => {
      engine.loads += 1;
      for (const i of fromArchive) images.add(i);
      const s = new PassThrough();
      s.end();
      return Promise.resolve(s);
    },
    modem: {
      followProgress: (_s: NodeJS.ReadableStream, done: (e: Error | null, out: unknown[]) => void) => done(null, []),
    },
  };
  return engine;
}

const config = Config.parse({});
const all = stackImages(config);
const script = join(mkdtempSync(join(tmpdir(), "loopsmith-images-")), "build-images.sh");
writeFileSync(script, "exit 0\n");
let clock = 0;
const now = (): number => (clock += 61_500);

describe("stackImages", () => {
  it("needs NATS only when the CLI runs its own", () => {
    expect(all.map((i) => i.kind)).toEqual(["nats", "python", "node"]);
    expect(stackImages(Config.parse({ natsUrl: "nats://elsewhere:4222" })).map((i) => i.kind)).toEqual([
      "python",
      "node",
    ]);
  });
});

describe("ensureStackImages", () => {
  it("does nothing and says nothing when every image is there", async () => {
    const said: string[] = [];
    const r = await ensureStackImages(config, all, {
      engine: fakeEngine(all.map((i) => i.image)),
      say: (l) => said.push(l),
    });
    expect(r.action).toBe("present");
    expect(said).toEqual([]);
  });

  it("builds only the missing ones as root, naming them and the time taken", async () => {
    const said: string[] = [];
    const calls: Array<{ args: string[]; env: NodeJS.ProcessEnv }> = [];
    const r = await ensureStackImages(config, all, {
      engine: fakeEngine([config.images.nats]),
      isRoot: true,
      buildScript: script,
      now,
      say: (l) => said.push(l),
      runBuild: (_s, args, env) => (calls.push({ args, env }), Promise.resolve(0)),
    });
    expect(r).toMatchObject({ action: "built", images: [config.images.python, config.images.node], ms: 61_500 });
    expect(calls[0]?.args).toEqual(["python", "node"]);
    expect(calls[0]?.env.LOOPSMITH_SANDBOX_PYTHON_IMAGE).toBe(config.images.python);
    expect(said[0]).toMatch(
      /building loopsmith\/sandbox-python:local, loopsmith\/sandbox-node:local from Debian packages \(first use/,
    );
    expect(said[1]).toBe("loopsmith: built 2 image(s) in 1 min 2 s");
  });

  it("tells a user who is not root the one command to run, and builds nothing", async () => {
    let built = false;
    await expect(
      ensureStackImages(config, all, {
        engine: fakeEngine([]),
        isRoot: false,
        buildScript: script,
        say: () => undefined,
        runBuild: () => ((built = true), Promise.resolve(0)),
      }),
    ).rejects.toMatchObject({
      code: "unavailable",
      message: expect.stringMatching(/are missing; .*sudo loopsmith images/),
    });
    expect(built).toBe(false);
  });

  it("reports a failed build with its exit code", async () => {
    await expect(
      ensureStackImages(config, all, {
        engine: fakeEngine([]),
        isRoot: true,
        buildScript: script,
        say: () => undefined,
        runBuild: () => Promise.resolve(4),
      }),
    ).rejects.toThrow(/building the images failed \(deploy\/build-images.sh exit 4\)/);
  });

  it("loads from a configured archive first, and says when it does not hold an image", async () => {
    const withArchive = Config.parse({ executor: { imageArchive: script } });
    const images = stackImages(withArchive);
    const said: string[] = [];
    const engine = fakeEngine(
      [],
      images.map((i) => i.image),
    );
    const r = await ensureStackImages(withArchive, images, { engine, now, say: (l) => said.push(l), isRoot: false });
    expect(r.action).toBe("loaded");
    expect(engine.loads).toBe(1);
    expect(said[1]).toMatch(/^loopsmith: loaded 3 image\(s\) in /);
    await expect(
      ensureStackImages(withArchive, images, {
        engine: fakeEngine([], [withArchive.images.nats]),
        say: () => undefined,
      }),
    ).rejects.toThrow(/build-images.sh does not hold loopsmith\/sandbox-python:local, loopsmith\/sandbox-node:local/);
  });

  it("names an archive that does not exist", async () => {
    const missing = Config.parse({ executor: { imageArchive: "/nonexistent/images.tar" } });
    await expect(
      ensureStackImages(missing, stackImages(missing), { engine: fakeEngine([]), say: () => undefined }),
    ).rejects.toThrow(/the image archive \/nonexistent\/images.tar does not exist/);
  });

  it("builds no image that is not loopsmith's own", async () => {
    const other = Config.parse({ images: { nats: "nats:2.10" } });
    await expect(
      ensureStackImages(other, stackImages(other), {
        engine: fakeEngine([]),
        isRoot: true,
        buildScript: script,
        say: () => undefined,
      }),
    ).rejects.toThrow(/nats:2.10 are not on the local engine and loopsmith builds only loopsmith\/\* names/);
  });
});

describe("duration", () => {
  it("says seconds below a minute, minutes and seconds above", () => {
    expect(duration(4_250)).toBe("4.3 s");
    expect(duration(245_000)).toBe("4 min 5 s");
  });
});
