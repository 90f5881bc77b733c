#!/usr/bin/env node
// The `loopsmith` command: runs the TypeScript CLI through tsx (no build step).
import { register } from "tsx/esm/api";

register();
await import("../src/main.ts");
