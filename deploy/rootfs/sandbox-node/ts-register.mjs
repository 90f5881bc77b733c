// loopsmith sandbox: run TypeScript with no build step. Used as `node --import /opt/loopsmith/ts-register.mjs`.
import { register } from "node:module";

register("./ts-hooks.mjs", import.meta.url);
