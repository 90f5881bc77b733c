/**
 * Logging: pino JSON with `service`, and `taskId`/`iteration`/`phase` added by children.
 * Secrets are redacted by path. `LOG_FORMAT=pretty` prints for people (pino-pretty).
 */
import { pino, type Logger } from "pino";

/** Paths redacted in every log line. */
export const REDACT_PATHS = [
  "apiKey",
  "*.apiKey",
  "*.*.apiKey",
  "password",
  "*.password",
  "authorization",
  "*.authorization",
  "*.headers.authorization",
  '*.headers["x-api-key"]',
  "databaseUrl",
  "*.databaseUrl",
  "natsUrl",
  "*.natsUrl",
];

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** The service (or `cli`) this logger belongs to. */
  service: string;
  /** pino level; empty means the default. @defaultValue process.env.LOG_LEVEL, else "info" */
  level?: string;
  /** `json` or `pretty`. @defaultValue process.env.LOG_FORMAT ?? "json" */
  format?: "json" | "pretty";
  /** Where lines go: a file descriptor. @defaultValue 2 (stderr), so stdout stays for results */
  fd?: number;
}

/** Creates the process logger. */
export function createLogger(opts: LoggerOptions): Logger {
  const format = opts.format ?? (process.env.LOG_FORMAT === "pretty" ? "pretty" : "json");
  const level = opts.level || process.env.LOG_LEVEL || "info";
  const fd = opts.fd ?? 2;
  const base = { service: opts.service, pid: process.pid };
  const redact = { paths: REDACT_PATHS, censor: "[redacted]" };
  if (format === "pretty") {
    return pino({
      level,
      base,
      redact,
      transport: { target: "pino-pretty", options: { destination: fd, colorize: false } },
    });
  }
  return pino({ level, base, redact }, pino.destination({ fd, sync: true }));
}
