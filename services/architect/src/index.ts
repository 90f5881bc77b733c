/** @loopsmith/architect: the conductor (task lifecycle) and planning/reflection. */
import type { Logger } from "pino";
import type { NatsConnection } from "@nats-io/transport-node";
import { Endpoints, handle } from "@loopsmith/shared/bus";
import { LoopsmithError, type Config, type ServiceModule } from "@loopsmith/shared/runtime";
import { type ImproveRequest, type Task } from "@loopsmith/shared/contracts";
import {
  ROLES,
  admitBudget,
  unpricedModels,
  unpricedWarning,
  createProvider,
  type LlmProvider,
} from "@loopsmith/shared/llm";
import { openApprovalStore, type ApprovalStore } from "./approvals.js";
import { startConductor } from "./conductor.js";
import { readEventsPage } from "./events-page.js";
import { createPlanner } from "./planner.js";
import { busChildTasks, busSteps, type Steps } from "./steps.js";
import { openRecordOutbox, type RecordOutbox } from "./outbox.js";
import type { Improver, ImproverOptions } from "./improve/consumer.js";

export { CANCEL_POLL_MS, startConductor, type Conductor, type ConductorOptions } from "./conductor.js";
export {
  CHECKPOINT_HEADROOM_BYTES,
  HEARTBEAT_MS,
  RETRY_DELAY_MS,
  checkpointStore,
  maxPayloadOf,
  runDurableConsumer,
  type BlobStore,
  type CheckpointStore,
  type Checkpointed,
  type DurableConsumer,
  type DurableConsumerOptions,
  type DurableContext,
  type DurableHandler,
} from "./durable/index.js";
export { readEventsPage } from "./events-page.js";
export { createPlanner, type Planner } from "./planner.js";
export { runLoop, finalState, verdictFiles, fallbackPlan, type VerdictFiles } from "./loop.js";
export { busChildTasks, busSteps, type ChildTasks, type LoopIO, type Steps } from "./steps.js";
export { OUTBOX_RETRY_MS, openRecordOutbox, type RecordOutbox } from "./outbox.js";
export { TaskState, initialState, addStepUsage, kvStateStore, openStateStore, type StateStore } from "./state.js";
export { errorTextOf, failingTests, outputOf } from "./failure.js";
export type { Improver, ImproverOptions } from "./improve/consumer.js";
export { evaluationNames, gateChange, isTampering, tamperingConcerns } from "./tampering.js";
export { changeTampering, tamperingViolation } from "./improve/tampering.js";

/**
 * Starts the self-improvement consumer (see `improve/consumer.ts`). Its module (and its
 * statistics and property-testing dependencies) is loaded on this first call, not when the
 * architect starts importing: it is a good part of the service's start-up time.
 */
export async function startImprover(opts: ImproverOptions): Promise<Improver> {
  const { startImprover: start } = await import("./improve/consumer.js");
  return start(opts);
}

/**
 * The admission rules for USD budgets (`admitBudget`): a task with `limits.maxCostUsd` is refused
 * before any step when a role it can call (`TASK_ROLES`, primaries and fallbacks) has no known
 * price in `config` (neither `llm.prices` nor `@pydantic/genai-prices`); an improvement run
 * with `settings.budgetUsd` likewise, over every role (`ROLES`: its hypotheses call `improve`,
 * its generations' tasks the others). A task that carries its own replies (`Task.script`)
 * calls no model and is admitted. The unpriced models are resolved once, here, and `log`
 * warns of them.
 * @returns the `admit` hooks of {@link startConductor} (`task`) and of the improver (`run`);
 *   each throws `LoopsmithError` `config_invalid` (not retryable) naming each model, its roles
 *   and the `llm.prices` key
 * @throws LoopsmithError `config_invalid` when a role's model cannot be resolved
 */
export function budgetAdmission(
  config: Config,
  log?: Logger,
): { task: (task: Task) => void; run: (request: ImproveRequest) => void } {
  const forTasks = unpricedModels(config);
  const forRuns = unpricedModels(config, ROLES);
  if (forRuns.length) log?.warn({ unpriced: forRuns }, unpricedWarning(forRuns));
  return {
    task: (task) => admitBudget(forTasks, "task", { usd: task.limits.maxCostUsd !== undefined && !task.script }),
    run: (request) => admitBudget(forRuns, "generation", { usd: request.settings.budgetUsd !== undefined }),
  };
}

/**
 * The architect's service module: the conductor's consumer loop (started after the
 * endpoints), and `loopsmith.architect.status` / `.cancel`.
 * @throws LoopsmithError `config_invalid` when no provider can be built from the configuration.
 */
export async function architectService(deps: {
  nc: NatsConnection;
  config: Config;
  log: Logger;
  provider?: LlmProvider;
  /** Tasks run at once; @defaultValue `config.conductor.concurrency` */
  concurrency?: number;
}): Promise<ServiceModule> {
  const provider = deps.provider ?? createProvider({ config: deps.config, log: deps.log });
  const planner = createPlanner({ provider, log: deps.log });
  let conductor: Awaited<ReturnType<typeof startConductor>> | undefined;
  let improver: Improver | undefined;
  const need = () => {
    if (!conductor) throw new LoopsmithError("unavailable", "the conductor is starting; try again");
    return conductor;
  };
  const bus = busSteps(deps.nc, deps.config, planner);
  // A task's history record that memory cannot take now is kept and written later (outbox.ts).
  let outbox: RecordOutbox | undefined;
  // Dependency approvals: the requests of waiting tasks and the answers people send (approvals.ts).
  let approvalStore: ApprovalStore | undefined;
  const steps: Steps = {
    ...bus,
    recordTask: (record) => (outbox ? outbox.record(record) : bus.recordTask(record)),
    // A DAG task's children run on this conductor's consumer (or another's); a cancel goes through the conductor.
    children: busChildTasks(deps.nc, async (taskId, owner) => void (await need().cancel(taskId, owner))),
  };
  return {
    registrations: [
      handle(Endpoints.architect.status, async (req, ctx) => ({ state: await need().status(req.taskId, ctx.owner) })),
      handle(Endpoints.architect.cancel, async (req, ctx) => ({
        cancelled: await need().cancel(req.taskId, ctx.owner),
      })),
      handle(Endpoints.architect.events, async (req, ctx) => readEventsPage(deps.nc, ctx.owner, req)),
      handle(Endpoints.architect.approve, async (req, ctx) => {
        // Only for a task of the caller's that is still running, and a request it made.
        const state = await need().status(req.taskId, ctx.owner);
        if (!approvalStore || !state || state.status === "final") return { accepted: false };
        return { accepted: await approvalStore.answer(ctx.owner, req) };
      }),
      handle(Endpoints.architect.improveStatus, async (req, ctx) => {
        if (!improver) throw new LoopsmithError("unavailable", "the improver is starting; try again");
        return improver.status(req.runId, ctx.owner);
      }),
    ],
    start: async () => {
      const replicas = deps.config.nats.replicas;
      // An injected provider is the caller's: its prices are not the configuration's.
      const admission = deps.provider ? undefined : budgetAdmission(deps.config, deps.log);
      approvalStore = await openApprovalStore(deps.nc, { replicas });
      steps.approvals = approvalStore;
      outbox = await openRecordOutbox(deps.nc, bus.recordTask, deps.log.child({ part: "outbox" }), undefined, replicas);
      conductor = await startConductor({
        nc: deps.nc,
        steps,
        log: deps.log,
        replicas,
        concurrency: deps.concurrency ?? deps.config.conductor.concurrency,
        ...(admission ? { admit: admission.task } : {}),
      });
      const tasks = conductor;
      improver = await startImprover({
        nc: deps.nc,
        log: deps.log.child({ part: "improver" }),
        replicas,
        provider,
        execute: steps.execute,
        gate: steps.gate,
        tree: steps.tree,
        ...(steps.cacheDir ? { cacheDir: steps.cacheDir } : {}),
        cancelTask: async (taskId, owner) => void (await tasks.cancel(taskId, owner)),
        ...(admission ? { admit: admission.run } : {}),
      });
    },
    hooks: [
      { name: "improver", run: async () => improver?.stop() },
      { name: "conductor", run: async () => conductor?.stop() },
      { name: "outbox", run: async () => outbox?.stop() },
    ],
    metadata: { provider: provider.info.name, model: provider.info.model, scripted: String(provider.info.scripted) },
  };
}
