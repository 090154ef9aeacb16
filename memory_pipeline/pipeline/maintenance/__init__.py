"""Keeping the memory healthy: the forgetting report and the scheduled health checks."""
