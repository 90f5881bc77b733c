export * from "./common.js";
export * from "./repo.js";
export * from "./task.js";
export * from "./plan.js";
export * from "./execution.js";
export * from "./memory.js";
export * from "./steps.js";
export * from "./events.js";
