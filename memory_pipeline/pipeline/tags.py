"""Run tags shared by the jobs and the instance file (kept free of imports: `make run` reads it)."""

# Runs carrying this tag write the store or the index; dagster.yaml lets one of them run at a time.
WRITER_TAG = "memory_pipeline/writer"
