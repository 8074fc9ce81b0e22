"""Running a plan: engines per model, stage-1 and stage-2 requests, scoring, per-cell metrics."""
