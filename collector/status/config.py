"""The status API's config section."""

from __future__ import annotations

from collector.configtypes import Endpoint, Seconds
from collector.receiver.config import Secured


class Status(Secured):
    """/metrics and /v1/sessions need the token when auth is on; /healthz and /readyz stay
    open for Kubernetes probes.  ``endpoint: 127.0.0.1:9464`` keeps it on this host."""

    endpoint: Endpoint = "0.0.0.0:9464"
    # One info line this often summing up what was evaluated (only when something was);
    # null: none.  Nothing is logged per evaluated session at info.
    summary_interval: Seconds | None = 60.0
