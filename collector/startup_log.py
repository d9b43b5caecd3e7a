"""The startup log: what ``skillgauge serve`` listens on, keeps, closes and sends where, in a
few lines an operator reads once (never a secret: no token, no password in a URL)."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from collector import __version__
from collector.config import Config
from collector.evaluate.config import Budget
from collector.receiver.config import Listener
from collector.status.config import Status

log = logging.getLogger("skillgauge")


def log_status_up(cfg: Config, port: int) -> None:
    """Log that the status API answers, before what a previous process left is replayed."""
    log.info(
        'status %s:%d up: /healthz answers; /readyz answers 503 "starting" until what the '
        "spool holds is replayed and the receivers listen",
        _host(cfg.status.endpoint),
        port,
    )


def log_startup(cfg: Config, ports: dict[str, int], durable: bool, path: str) -> None:
    """Log what a started service listens on (``ports``, by receiver) and how it is set up;
    ``durable`` and ``path`` say where its spool is."""
    parts = []
    if "grpc" in ports:
        parts.append(
            f"OTLP/gRPC {_host(cfg.receivers.otlp.grpc.endpoint)}:{ports['grpc']}"  # type: ignore[union-attr]
            f" (TraceService, LogsService; {_guard(cfg, cfg.receivers.otlp.grpc)})"  # type: ignore[arg-type]
        )
    if "http" in ports:
        parts.append(
            f"OTLP/HTTP {_host(cfg.receivers.otlp.http.endpoint)}:{ports['http']}"  # type: ignore[union-attr]
            f" (/v1/traces, /v1/logs; {_guard(cfg, cfg.receivers.otlp.http)})"  # type: ignore[arg-type]
        )
    parts.append(
        f"status {_host(cfg.status.endpoint)}:{ports['status']} (/metrics, /healthz, /readyz, "
        f"/v1/sessions, /v1/sessions/{{id}}, /ui/; {_guard(cfg, cfg.status)}"
        f"{'; /healthz and /readyz open for probes' if cfg.auth_for(cfg.status) else ''}"
        f"{'' if cfg.auth_for(cfg.status) else '; ' + _sessions_access(cfg.status)})"
    )
    log.info("skillgauge %s listening: %s", __version__, " | ".join(parts))
    if cfg.redact.attributes:
        log.info(
            "redact: values of %s are replaced by [REDACTED] as requests arrive",
            ", ".join(cfg.redact.attributes),
        )
    if not durable:
        log.warning('storage.path is ":memory:": spans are NOT durable; a crash loses open sessions')
    else:
        log.info("spool: %s (acknowledged spans survive a crash)", path)
    s = cfg.sessions
    log.info(
        "sessions: keys %s; close after %gs idle, %gs max, %d spans, end attribute %s",
        ", ".join(s.keys),
        s.idle_timeout,
        s.max_duration,
        s.max_spans,
        s.end_attribute,
    )
    if cfg.export.otlp is not None:
        otlp = cfg.export.otlp
        log.info(
            "export: evaluation spans%s to %s over OTLP/%s; results wait in the %s outbox "
            "(up to %d) while the downstream is unavailable",
            " and gen_ai.evaluation.result log records" if otlp.logs else "",
            _safe_url(otlp.endpoint),
            "gRPC" if otlp.protocol == "grpc" else "HTTP",
            "spooled" if durable else "in-memory",
            otlp.queue_size,
        )
    else:
        log.info("export: no export.otlp endpoint; results are on /metrics and /v1/sessions/{id} only")
    if cfg.judge.configured:
        log.info(
            "judge: provider %s, model %s via %s; at most %d calls at a time; budget %s; "
            "at most %s input tokens a session",
            cfg.judge.provider,
            cfg.judge.model,
            _safe_url(cfg.judge.base_url) if cfg.judge.base_url else cfg.judge.endpoint,
            cfg.judge.max_concurrency,
            _budget(cfg.judge.budget),
            cfg.judge.max_session_input_tokens or "unlimited",
        )
    else:
        log.warning(
            "judge: NOT configured (no ANTHROPIC_API_KEY / judge.api_key or judge.base_url): "
            "judge evaluators will be reported as skipped/no_judge_configured"
        )


def _guard(cfg: Config, listener: Listener | Status) -> str:
    """How a listener is protected, for the startup line (never the secret itself)."""
    tls = listener.tls
    parts = [
        "plaintext" if tls is None else "TLS, client certificate required" if tls.client_ca_file else "TLS"
    ]
    auth = cfg.auth_for(listener)
    if auth is None:
        parts.append("no auth")
    else:
        parts.append("bearer token required")
        named = sorted(tenant for tenant in auth.tenants if tenant)
        if named:
            parts.append(f"tenants {' '.join(named)}")
    return ", ".join(parts)


def _budget(budget: Budget) -> str:
    """``judge.budget`` for the startup line: its ceilings, or that it has none."""
    limits = [f"{name} {value:g}" for name, value in budget.model_dump().items() if value is not None]
    return ", ".join(limits) if limits else "unlimited"


def _sessions_access(status_cfg: Status) -> str:
    """Who may read /v1/sessions* and /ui/ without auth, for the startup line."""
    if status_cfg.sessions_open:
        return "/v1/sessions open to every client (status.sessions_open: true), /ui/ too"
    return "/v1/sessions loopback clients only, /ui/ too (set status.sessions_open: true or auth to serve others)"


def _host(endpoint: str) -> str:
    return endpoint.rpartition(":")[0]


def _safe_url(url: str) -> str:
    """``url`` without user:password@ (a credential someone may have put in a URL)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))
