"""Detection: spans and log records in, ``evaluators.evidence`` out, as they arrive."""
