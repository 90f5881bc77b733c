-- Lessons and the measured use of memories (docs/MEMORY.md).
-- `lessons`: what a task that passed after failing learned, one row per distinct signature of
-- its failures: the rule (cause and fix, free of the task's names and values), the signature it
-- came from, the source task, where the rule came from (`reflect` or `fallback`) and the lesson
-- prompt's version; embedded on the source task's goal (so a recall without an error can match
-- lessons by goal), with the embedder that made the vector.
-- `recall_uses`: one row per memory a recall showed to a task (kind, id, task, iteration).
-- What happened next (the next iteration passed, the task passed, its iterations) is read from
-- `successes` and `tasks` when asked, never copied.
-- `memory_verdicts`: memories left out of recall (`demoted`), by the utility rule or by hand,
-- and memories a person promoted back (`by_hand`: the rule no longer demotes them).

-- Up Migration
CREATE TABLE loopsmith.lessons (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id         text NOT NULL,
  iteration       integer NOT NULL,
  language        text NOT NULL,
  goal            text NOT NULL,
  signature       text NOT NULL,
  rule            text NOT NULL,
  source          text NOT NULL,
  prompt_version  integer NOT NULL,
  owner           text NOT NULL DEFAULT 'client',
  embedder        text NOT NULL,
  embedding       vector NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (task_id, signature)
);
CREATE INDEX lessons_language_signature_idx ON loopsmith.lessons (language, signature);

CREATE TABLE loopsmith.recall_uses (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id     text NOT NULL,
  iteration   integer NOT NULL,
  kind        text NOT NULL,
  memory_id   bigint NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (task_id, iteration, kind, memory_id)
);
CREATE INDEX recall_uses_memory_idx ON loopsmith.recall_uses (kind, memory_id);

CREATE TABLE loopsmith.memory_verdicts (
  kind        text NOT NULL,
  memory_id   bigint NOT NULL,
  demoted     boolean NOT NULL,
  by_hand     boolean NOT NULL DEFAULT false,
  reason      text NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, memory_id)
);

-- Down Migration
DROP TABLE loopsmith.memory_verdicts;
DROP TABLE loopsmith.recall_uses;
DROP TABLE loopsmith.lessons;
