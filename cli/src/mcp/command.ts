/**
 * `loopsmith mcp`: registration only (the server is `server.ts`, loaded when the command
 * runs, with the MCP SDK). A configured NATS URL is checked first (exit 3 at once).
 */
import { Option, type Command } from "commander";
import type { Logger } from "pino";
import type { CommandRunner } from "../errors.js";
import { PROVIDERS } from "@loopsmith/shared/contracts/values";
import { checkNatsListening, configuredNats } from "../preflight.js";
import type { McpOptions } from "./session.js";

/** Registers `mcp` on the program. */
export function registerMcp(program: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  program
    .command("mcp")
    .description(
      "serve loopsmith's tools (solve, status, show, history, improve_status) over the Model Context Protocol on stdio, for editors and agents",
    )
    .addOption(new Option("--provider <name>", "LLM provider of the services it starts").choices(PROVIDERS))
    .option("--model <id>", "model id (every role that names none)")
    .option("--script <file>", "replies file for the scripted provider")
    .option("--base-url <url>", "provider base URL")
    .option("--transcript <file>", "append every prompt and reply to this JSONL file")
    .option("--config <file>", "configuration file (JSON)")
    .addHelpText(
      "after",
      "\nstdout carries the protocol; logs go to stderr. The server uses the running stack (NATS_URL, or `loopsmith up`)\n" +
        "or starts one as solve does, and stops it when the client closes the connection. Setup: docs/MCP.md\n",
    )
    .action(async (opts: McpOptions) =>
      run(undefined, async () => {
        const nats = await configuredNats(opts);
        if (nats) await checkNatsListening(nats);
        const { serveMcp } = await import("./server.js");
        return serveMcp(opts, await logger());
      }),
    );
}
