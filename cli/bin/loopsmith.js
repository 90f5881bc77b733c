#!/usr/bin/env node
// The `loopsmith` command. It runs the JavaScript that `npm run build` made (dist/app) when
// that build was made from exactly the sources here (build-stamp.js), which loads in a tenth
// of the time; otherwise the TypeScript sources through tsx (no build step needed).
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { currentBuild } from "./build-stamp.js";

const build = currentBuild(fileURLToPath(new URL("../../", import.meta.url)));
if (build) {
  await import(pathToFileURL(join(build, "dist", "cli.js")).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/main.ts");
}
