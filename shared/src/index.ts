/** @loopsmith/shared: contracts, subjects, the typed bus, configuration, logging, errors, LLM types. */
export * from "./errors.js";
export * from "./contracts/index.js";
export * from "./subjects.js";
export * from "./bus.js";
export * from "./config.js";
export * from "./log.js";
export * from "./runtime.js";
export * from "./llm/index.js";
export * from "./prompts.js";
export * from "./streams.js";
export * from "./idempotency.js";
export * from "./runner-config.js";
