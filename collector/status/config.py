"""The status API's config section."""

from __future__ import annotations

from collector.configtypes import Endpoint
from collector.receiver.config import Secured


class Status(Secured):
    """/metrics and /v1/sessions need the token when auth is on; /healthz and /readyz stay
    open for Kubernetes probes.  ``endpoint: 127.0.0.1:9464`` keeps it on this host."""

    endpoint: Endpoint = "0.0.0.0:9464"
