"""The receivers' config: OTLP listeners (gRPC, HTTP), their TLS and bearer auth, redaction."""

from __future__ import annotations

import re
import ssl
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from collector.configerrors import explain
from collector.configtypes import Bytes, Endpoint, Seconds, Strict, read_secret

TENANT_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")
ALL_TENANTS = "*"  # an operator's token: reads every tenant's sessions
_TENANT_HELP = (
    "a tenant is a short slug (lowercase letters, digits and '-', at most 32 characters, "
    'e.g. team-a), or "*" for an operator token that reads every tenant\'s sessions'
)


def _token_lines(bearer_token: SecretStr | None, bearer_token_file: str | None, where: str) -> list[str]:
    """The tokens one entry names: its ``bearer_token``, or each line of its file."""
    if (bearer_token is None) == (bearer_token_file is None):
        raise ValueError(
            f"{where}set exactly one of bearer_token (e.g. ${{env:SKILLGAUGE_TOKEN}}) or bearer_token_file"
        )
    if bearer_token is not None:
        lines = [bearer_token.get_secret_value()]
    else:
        lines = read_secret(str(bearer_token_file), "bearer_token_file").splitlines()
    tokens = [line.strip() for line in lines if line.strip()]
    if not tokens:
        raise ValueError(f"{where}the bearer token is empty - an empty token would let anyone in")
    if any(not t.isascii() or not t.isprintable() or " " in t for t in tokens):
        raise ValueError(f"{where}a bearer token must be printable ASCII without spaces")
    return tokens


class TenantLimits(Strict):
    """One tenant's own limits (None: none of its own; the global ones always apply):
    ``judge_usd_per_day`` of judge spend a UTC day, beyond which its evaluations are
    ``skipped / budget_exhausted``; ``max_open_sessions`` open at once, at which its
    requests are refused with backpressure (UNAVAILABLE / 503 and a retry delay)."""

    judge_usd_per_day: float | None = Field(default=None, gt=0)
    max_open_sessions: int | None = Field(default=None, gt=0)

    def merged(self, other: TenantLimits, tenant: str) -> TenantLimits:
        """These limits and ``other``'s (another entry of the same tenant); one value per limit."""
        values = {}
        for name in ("judge_usd_per_day", "max_open_sessions"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is not None and theirs is not None and mine != theirs:
                raise ValueError(
                    f"tenant {tenant!r} has {name} {mine:g} in one entry and {theirs:g} in another"
                    " - set each of its limits once"
                )
            values[name] = mine if mine is not None else theirs
        return TenantLimits(**values)


NO_LIMITS = TenantLimits()


class TenantToken(TenantLimits):
    """One entry of ``auth.tokens``: a token (or a file of tokens), the tenant it names, and
    that tenant's own limits (``TenantLimits``)."""

    bearer_token: SecretStr | None = None
    bearer_token_file: str | None = None
    tenant: str = ""

    @model_validator(mode="after")
    def _limits_name_a_tenant(self) -> TenantToken:
        limited = self.judge_usd_per_day is not None or self.max_open_sessions is not None
        if limited and self.tenant == ALL_TENANTS:
            raise ValueError(
                'an operator token (tenant "*") has no limits of its own: set judge_usd_per_day and'
                " max_open_sessions on a tenant's entry"
            )
        return self

    @field_validator("tenant")
    @classmethod
    def _slug(cls, tenant: str) -> str:
        if tenant and tenant != ALL_TENANTS and not TENANT_PATTERN.match(tenant):
            raise ValueError(f"{tenant[:40]!r} is not a tenant: {_TENANT_HELP}")
        return tenant


class BearerAuth(Strict):
    """``Authorization: Bearer <token>`` required on every request to a listener.

    The token comes from the environment (``bearer_token: ${env:SKILLGAUGE_TOKEN}``) or a
    file (``bearer_token_file``, one token per line: several lines let clients move to a new
    token before the old one is removed).  Tokens are compared in constant time and never
    printed; a token that expands to nothing is an error, never an open door.

    ``tokens`` (instead of the two keys above) lists entries of the same form, each naming
    the ``tenant`` its requests belong to: sessions are kept apart per tenant, and a token
    reads only its tenant's sessions.  A token without a tenant is in the default tenant
    ``""``; a token with ``tenant: "*"`` is an operator's and reads every tenant's sessions
    (what it sends is in the default tenant).  The tenants are the operator's, so bounded.
    """

    bearer_token: SecretStr | None = None
    bearer_token_file: str | None = None
    tokens: tuple[TenantToken, ...] | None = None
    _tokens: tuple[tuple[bytes, str], ...] = PrivateAttr(default=())
    _limits: dict[str, TenantLimits] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _load(self) -> BearerAuth:
        if self.tokens is None:
            entries = [(self.bearer_token, self.bearer_token_file, "", "")]
        else:
            if self.bearer_token is not None or self.bearer_token_file is not None:
                raise ValueError(
                    "set either tokens (a list of {bearer_token or bearer_token_file, tenant}) "
                    "or bearer_token / bearer_token_file, not both"
                )
            if not self.tokens:
                raise ValueError("tokens is empty - list at least one {bearer_token: ..., tenant: ...}")
            entries = [
                (t.bearer_token, t.bearer_token_file, t.tenant, f"tokens.{i}: ")
                for i, t in enumerate(self.tokens)
            ]
        loaded: dict[str, str] = {}
        for bearer_token, bearer_token_file, tenant, where in entries:
            for token in _token_lines(bearer_token, bearer_token_file, where):
                if loaded.setdefault(token, tenant) != tenant:
                    raise ValueError(
                        f"{where}the same token is listed for tenants {loaded[token]!r} and {tenant!r} "
                        "- give each tenant a token of its own"
                    )
        self._tokens = tuple((token.encode(), tenant) for token, tenant in loaded.items())
        for entry in self.tokens or ():
            if entry.tenant != ALL_TENANTS:
                limits = TenantLimits(
                    judge_usd_per_day=entry.judge_usd_per_day, max_open_sessions=entry.max_open_sessions
                )
                self._limits[entry.tenant] = self._limits.get(entry.tenant, NO_LIMITS).merged(
                    limits, entry.tenant
                )
        return self

    @property
    def tenant_limits(self) -> dict[str, TenantLimits]:
        """Each tenant an entry names (``""`` for the default), with its own limits."""
        return dict(self._limits)

    @property
    def tokens_with_tenants(self) -> tuple[tuple[bytes, str], ...]:
        """Each token and the tenant it names (``""`` default, ``"*"`` every tenant)."""
        return self._tokens

    @property
    def tenants(self) -> frozenset[str]:
        """The tenants a request can be in (the default ``""`` included when a token names
        none, or names ``"*"``)."""
        return frozenset("" if tenant == ALL_TENANTS else tenant for _, tenant in self._tokens)


class Tls(Strict):
    """TLS for one listener (PEM files); with ``client_ca_file`` it is mutual TLS: every
    client must present a certificate signed by that CA."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    min_version: Literal["1.2", "1.3"] = "1.2"

    @model_validator(mode="after")
    def _loadable(self) -> Tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            raise ValueError(
                f"cannot load cert_file {self.cert_file!r} with key_file {self.key_file!r} "
                f"({err.strerror or err}) - both must be PEM files, the key matching the certificate"
            ) from None
        if self.client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(
                    f"cannot load client_ca_file {self.client_ca_file!r} ({err.strerror or err}) - "
                    "it must hold PEM CA certificates"
                ) from None
        return self


ListenerAuth = BearerAuth | Literal["none"] | None  # None: the top-level ``auth``; "none": open


class Secured(Strict):
    tls: Tls | None = None
    auth: ListenerAuth = None

    @field_validator("auth", mode="before")
    @classmethod
    def _one_auth(cls, value: Any) -> Any:
        # Validated here so that a mistake gets one message, not one per union member.
        if value is None or value == "none" or isinstance(value, BearerAuth):
            return value
        if not isinstance(value, dict):
            raise ValueError(
                "write auth: none (open), or auth: {bearer_token: ...}, {bearer_token_file: ...} "
                "or {tokens: [{bearer_token: ..., tenant: team-a}, ...]}"
            )
        try:
            return BearerAuth.model_validate(value)
        except ValidationError as err:
            raise ValueError(explain(err).replace("(top level): ", "")) from None


class Listener(Secured):
    endpoint: Endpoint
    max_request_bytes: Bytes = 16 * 1024**2  # after decompression, as OTLP specifies

    @property
    def host(self) -> str:
        return self.endpoint.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.endpoint.rpartition(":")[2])


class HttpListener(Listener):
    """An HTTP listener; ``read_timeout`` bounds both the wait for a request's headers on a
    connection (new or idle) and the read of its body, so a stalled client is dropped;
    beyond ``max_connections`` open at once, a new connection is answered 503 and closed
    before anything is read from it."""

    read_timeout: Seconds = Field(default=30.0, gt=0)
    max_connections: int = Field(default=1024, gt=0)


class KeepaliveServerParameters(Strict):
    """As the Collector's configgrpc ``keepalive.server_parameters``: a connection idle (no
    call) for ``max_connection_idle``, or open for ``max_connection_age``, is sent GOAWAY
    and closed ``max_connection_age_grace`` later, calls in flight or not; the server pings
    a connection quiet for ``time`` and drops it when no answer comes within ``timeout``.
    None: never."""

    max_connection_idle: Seconds | None = None
    max_connection_age: Seconds | None = None
    max_connection_age_grace: Seconds | None = None
    time: Seconds = 2 * 3600.0
    timeout: Seconds = 20.0


class KeepaliveEnforcementPolicy(Strict):
    """As configgrpc's ``keepalive.enforcement_policy``: a client pinging more often than
    ``min_time`` (or at all without a call in flight, unless ``permit_without_stream``) is
    told to calm down, then disconnected."""

    min_time: Seconds = 300.0
    permit_without_stream: bool = False


class Keepalive(Strict):
    server_parameters: KeepaliveServerParameters = KeepaliveServerParameters()
    enforcement_policy: KeepaliveEnforcementPolicy = KeepaliveEnforcementPolicy()


class GrpcListener(Listener):
    """The gRPC listener.  At most ``max_connections`` connections are held: one beyond
    that is closed as soon as it is accepted.  A connection must complete its handshake (TLS,
    and the client's HTTP/2 preface and SETTINGS) within ``handshake_timeout`` or it is
    closed, so connections that send nothing cannot hold their places.  A connection carries
    at most ``max_concurrent_streams`` calls at once.  Every call, its body included, must
    arrive within ``read_timeout`` of its start or it is cancelled (``DEADLINE_EXCEEDED``)."""

    max_connections: int = Field(default=1024, gt=0)
    handshake_timeout: Seconds = 10.0
    max_concurrent_streams: int = Field(default=100, gt=0)
    read_timeout: Seconds = Field(default=30.0, gt=0)
    keepalive: Keepalive = Keepalive()


class OtlpReceivers(Strict):
    grpc: GrpcListener | None = GrpcListener(endpoint="0.0.0.0:4317")
    http: HttpListener | None = HttpListener(endpoint="0.0.0.0:4318")


class Receivers(Strict):
    otlp: OtlpReceivers = OtlpReceivers()


class Redact(Strict):
    """Attribute keys whose values are replaced by ``[REDACTED]`` as requests arrive, so they
    never reach the spool, the judge, the status API or exported evaluation spans.  A key
    ending in ``.*`` matches every key under it (``user.*``)."""

    attributes: tuple[str, ...] = ()

    @field_validator("attributes")
    @classmethod
    def _keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            if not key.strip() or key.strip() != key or key in ("*", ".*"):
                raise ValueError(f"{key!r} is not an attribute key, e.g. user.email or user.*")
        return keys

    def matches(self, key: str) -> bool:
        return any(key == k or (k.endswith(".*") and key.startswith(k[:-1])) for k in self.attributes)
