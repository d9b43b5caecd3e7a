"""Detection: spans and log records in, ``evaluators.evidence`` out, as they arrive."""

from collector import spans
from collector.config import Sessions
from collector.detect import facts, messages
from collector.detect.expectations import EXPECTED_SKILLS_ATTRIBUTE
from collector.detect.session import SessionEvidence

# Views read, in their one pass, every key a detector reads plus the default session keys
# and end attribute.  A deployment that configures other keys still works: those are found
# by a full scan of the span's attributes, which costs a little more per span.
_DEFAULTS = Sessions.model_validate({})
spans.index(
    keys=(
        *facts.READ_KEYS,
        *messages.READ_KEYS,
        EXPECTED_SKILLS_ATTRIBUTE,
        _DEFAULTS.end_attribute,
        *(key.split(":", 1)[1] for key in _DEFAULTS.keys),
    ),
    prefixes=messages.READ_PREFIXES,
    event_fields=(*facts.READ_EVENT_FIELDS, *messages.READ_EVENT_FIELDS),
)

__all__ = ["SessionEvidence"]
