"""Detection: spans and log records in, ``evaluators.evidence`` out, as they arrive."""

from collector.detect.session import SessionEvidence

__all__ = ["SessionEvidence"]
