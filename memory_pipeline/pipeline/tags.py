"""Run tags shared by the jobs and the instance file (kept free of imports: `make run` reads it)."""

# Runs carrying this tag write the store or the index; dagster.yaml lets one of them run at a time.
WRITER_TAG = "memory_pipeline/writer"

# A run of a job with these tags is retried once, from the start, when its worker dies
# (dagster.yaml retries crashes only): for jobs that are safe to run twice.
RETRY_ON_CRASH = {"dagster/max_retries": "1", "dagster/retry_strategy": "ALL_STEPS"}
