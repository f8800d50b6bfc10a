"""The `mr` type's executors, one module each (ensure_mr, reconcile_mr, ci_retry,
check_empty_diff, drift_check), and the modules only they use (merging, rebasing,
merge blockers, outcomes, CI retry rules)."""
