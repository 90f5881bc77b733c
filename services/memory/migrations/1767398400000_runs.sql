-- Every finished task's whole run, for `loopsmith show`, `export` and `replay`: the task as
-- submitted, its progress events (the LLM steps carry the validated model replies) and its
-- result. One row per task; recording a task again replaces its row.

-- Up Migration
CREATE TABLE loopsmith.runs (
  task_id           text PRIMARY KEY,
  task              jsonb NOT NULL,
  result            jsonb,
  events            jsonb NOT NULL,
  events_truncated  boolean NOT NULL DEFAULT false,
  events_total      integer,
  recorded_at       timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE loopsmith.runs;
