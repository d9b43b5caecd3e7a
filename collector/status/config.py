"""The status API's config section."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from collector.configtypes import Endpoint, Seconds
from collector.receiver.config import Secured


class Status(Secured):
    """/metrics, /v1/sessions and the /ui/ pages need the token when auth is on; /healthz and
    /readyz stay open for Kubernetes probes.  ``endpoint: 127.0.0.1:9464`` keeps it on this host.

    ``trace_url``: the operator's tracing backend, as a URL template in which ``{trace_id}``
    (32 hex digits) is replaced; a session page links each trace to it.  None: no link."""

    endpoint: Endpoint = "0.0.0.0:9464"
    # One info line this often summing up what was evaluated (only when something was);
    # null: none.  Nothing is logged per evaluated session at info.
    summary_interval: Seconds | None = 60.0
    # Without auth, /v1/sessions* answers loopback clients only; true serves every client
    # (what agents said, to anyone who can reach the port).  With auth, the token decides.
    sessions_open: bool = False
    trace_url: str | None = None
    # Beyond this many connections open at once, a new one is answered 503 and closed.
    max_connections: int = Field(default=256, gt=0)

    @field_validator("trace_url")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "{trace_id}" not in value:
            raise ValueError(
                "the template has no {trace_id} - put it where the trace id goes, e.g. "
                "https://jaeger.example/trace/{trace_id}"
            )
        if urlsplit(value.replace("{trace_id}", "0" * 32)).scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL (the browser opens it)")
        return value

    def trace_link(self, trace_id: str) -> str | None:
        """The link to a trace, or None when no template is configured."""
        return None if self.trace_url is None else self.trace_url.replace("{trace_id}", trace_id)
