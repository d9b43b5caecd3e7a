"""The receiver's failures, sorted once and translated to OTLP answers at one boundary.

Every answer OTLP 1.11 asks for, in one table: bad data is permanent (INVALID_ARGUMENT /
400), an oversized request is permanent (RESOURCE_EXHAUSTED without RetryInfo / 413),
backpressure is retryable (UNAVAILABLE with RetryInfo / 503 with Retry-After), a missing
or wrong bearer token is UNAUTHENTICATED / 401.  The chain's own failures
(``collector.component.Permanent`` / ``Retryable``) are translated here too (``sorted_error``).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc import code_pb2, error_details_pb2, status_pb2

from collector.component import Permanent, Retryable


class ReceiveError(Exception):
    """Base of everything a receiver turns into an OTLP error answer."""

    grpc_code = grpc.StatusCode.INTERNAL
    http_status = 500
    rpc_code = code_pb2.INTERNAL
    retry_after: float | None = None
    reason = "internal"


class InvalidRequest(ReceiveError):
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 400
    rpc_code = code_pb2.INVALID_ARGUMENT
    reason = "invalid"


class UnsupportedMedia(InvalidRequest):
    http_status = 415
    reason = "unsupported_media_type"


class TooLarge(ReceiveError):
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 413
    rpc_code = code_pb2.RESOURCE_EXHAUSTED
    reason = "too_large"


class ReadTimeout(ReceiveError):
    """The client did not send its whole body in time (a stalled or slowloris client)."""

    grpc_code = grpc.StatusCode.DEADLINE_EXCEEDED
    http_status = 408
    rpc_code = code_pb2.DEADLINE_EXCEEDED
    reason = "read_timeout"


class Unauthenticated(ReceiveError):
    """No valid bearer token.  Permanent for this request: the client must fix its headers."""

    grpc_code = grpc.StatusCode.UNAUTHENTICATED
    http_status = 401
    rpc_code = code_pb2.UNAUTHENTICATED
    reason = "unauthenticated"


class Backpressure(ReceiveError):
    grpc_code = grpc.StatusCode.UNAVAILABLE
    http_status = 503
    rpc_code = code_pb2.UNAVAILABLE
    reason = "backpressure"

    def __init__(self, message: str, retry_after: float = 5.0, reason: str = "backpressure") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.reason = reason


# What a receiver catches: its own errors and the chain's.
ANSWERED = (ReceiveError, Permanent, Retryable)


def sorted_error(error: Exception) -> ReceiveError:
    """The receiver error a failure answers as: the chain's ``Retryable`` is backpressure
    (counted under its own reason: ``backpressure``, ``storage_error``), its ``Permanent`` is
    invalid data."""
    if isinstance(error, ReceiveError):
        return error
    if isinstance(error, Retryable):
        return Backpressure(str(error), retry_after=error.retry_after, reason=error.reason)
    return InvalidRequest(str(error))


@dataclass(frozen=True, slots=True)
class Answer:
    """What a transport sends back for an error."""

    status: status_pb2.Status
    grpc_code: grpc.StatusCode
    http_status: int
    retry_after: float | None

    @property
    def message(self) -> str:
        return str(self.status.message)

    def grpc_trailers(self) -> tuple[tuple[str, bytes], ...]:
        # RetryInfo both in the standard details trailer (Go clients, the Collector) and
        # in the key the Python SDK exporter reads.
        if self.retry_after is None:
            return ()
        info = _retry_info(self.retry_after)
        return (
            ("grpc-status-details-bin", self.status.SerializeToString()),
            ("google.rpc.retryinfo-bin", info.SerializeToString()),
        )


def _retry_info(seconds: float) -> error_details_pb2.RetryInfo:
    whole = int(seconds)
    return error_details_pb2.RetryInfo(
        retry_delay=Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))
    )


def answer(error: ReceiveError) -> Answer:
    status = status_pb2.Status(code=error.rpc_code, message=str(error) or error.reason)
    if error.retry_after is not None:
        status.details.add().Pack(_retry_info(error.retry_after))
    return Answer(status, error.grpc_code, error.http_status, error.retry_after)
