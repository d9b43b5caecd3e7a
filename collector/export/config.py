"""The export config section: OTLP evaluation spans and its retries and queue."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from collector.configtypes import Seconds, Strict


class Retry(Strict):
    """Backoff between failed export attempts.  There is no give-up time: a result leaves
    only when the downstream acknowledges it (or refuses it as malformed)."""

    initial_interval: Seconds = 1.0
    max_interval: Seconds = 30.0
    multiplier: float = Field(default=2.0, ge=1.0)

    @field_validator("max_interval")
    @classmethod
    def _ordered(cls, value: float, info: ValidationInfo) -> float:
        if value < info.data.get("initial_interval", 0.0):
            raise ValueError("must be at least initial_interval")
        return value


class OtlpExport(Strict):
    """Evaluation spans (and optionally ``gen_ai.evaluation.result`` log records) downstream."""

    endpoint: str  # http://host:4317 plaintext, https://host:4317 TLS; for http, the base URL
    protocol: Literal["grpc", "http"] = "grpc"
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: Seconds = 10.0
    compression: Literal["gzip", "none"] = "gzip"
    logs: bool = False  # also send each result as a gen_ai.evaluation.result log record
    batch_size: int = Field(default=512, gt=0)
    queue_size: int = Field(default=100_000, gt=0)  # results held while the downstream is away
    retry: Retry = Retry()

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in ("http", "https") or not rest.strip("/"):
            raise ValueError(
                f"{value!r} is not a URL: write http://host:4317 (plaintext) or https://host:4317 (TLS)"
            )
        return value.rstrip("/")

    @property
    def tls(self) -> bool:
        return self.endpoint.startswith("https://")

    @property
    def authority(self) -> str:
        """host:port for gRPC (default port 4317 for grpc, 4318 for http)."""
        rest = self.endpoint.partition("://")[2].partition("/")[0]
        if rest.rpartition(":")[2].isdigit() and not rest.endswith("]"):
            return rest
        return f"{rest}:{4317 if self.protocol == 'grpc' else 4318}"


class Export(Strict):
    otlp: OtlpExport | None = None
