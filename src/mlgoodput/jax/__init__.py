"""JAX integration: compile-time metrics, checkpoint logging and the profiler helpers."""
