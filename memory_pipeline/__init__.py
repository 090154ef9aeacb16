"""memory-pipeline: long-term memory for AI agents."""
