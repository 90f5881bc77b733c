-- loopsmith memory, first schema: tasks, failures and successes.
-- Applied by node-pg-migrate's programmatic runner (services/memory/src/db.ts).
-- Embeddings are stored untyped (`vector` without a dimension) so that embedders of any size
-- can share a table; each embedder gets its own partial HNSW index on
-- `(embedding::vector(<dims>))` with `WHERE embedder = '<id>'`, created when memory opens.

-- Up Migration
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS loopsmith;

CREATE TABLE loopsmith.tasks (
  task_id      text PRIMARY KEY,
  goal         text NOT NULL,
  language     text NOT NULL,
  status       text NOT NULL,
  stop_reason  text NOT NULL,
  iterations   integer NOT NULL,
  usage        jsonb NOT NULL,
  cost_usd     double precision NOT NULL DEFAULT 0,
  duration_ms  double precision NOT NULL,
  scripted     boolean NOT NULL,
  finished_at  timestamptz NOT NULL,
  recorded_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_finished_at_idx ON loopsmith.tasks (finished_at DESC);

CREATE TABLE loopsmith.failures (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  idempotency_key  text NOT NULL UNIQUE,
  task_id          text NOT NULL,
  iteration        integer NOT NULL,
  language         text NOT NULL,
  goal             text NOT NULL,
  signature        text NOT NULL,
  error_type       text NOT NULL,
  error_text       text NOT NULL,
  failing_tests    jsonb NOT NULL,
  output_tail      text NOT NULL,
  status           text NOT NULL,
  reflection       jsonb,
  embedder         text NOT NULL,
  embedding        vector NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  fixed_at         timestamptz
);
CREATE INDEX failures_embedder_language_idx ON loopsmith.failures (embedder, language);
CREATE INDEX failures_task_idx ON loopsmith.failures (task_id);

CREATE TABLE loopsmith.successes (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  idempotency_key  text NOT NULL UNIQUE,
  task_id          text NOT NULL,
  iteration        integer NOT NULL,
  language         text NOT NULL,
  goal             text NOT NULL,
  files            jsonb NOT NULL,
  embedder         text NOT NULL,
  embedding        vector NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX successes_embedder_language_idx ON loopsmith.successes (embedder, language);

-- Down Migration
DROP TABLE loopsmith.successes;
DROP TABLE loopsmith.failures;
DROP TABLE loopsmith.tasks;
DROP SCHEMA loopsmith;
