"""The `mlgoodput demo`: a supervisor that runs, kills and restarts a training-like workload."""
