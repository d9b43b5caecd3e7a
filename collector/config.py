"""One typed configuration, loaded from YAML and validated with errors that name the fix.

Every key is optional; the defaults here are the whole of ``skillgauge serve`` with no file.
Strings may hold ``${env:VAR}`` (or ``${env:VAR:-default}``); expansion happens on parsed
values, so an environment variable can never inject YAML structure.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import (
    ValidationError,
    ValidationInfo,
    model_validator,
)

from collector.configerrors import Loc, explain, line_number, locate
from collector.configtypes import _ENV, FROM_FILE, ConfigError, Strict
from collector.detect.config import Expectation
from collector.evaluate.config import Evaluators, Judge, Skills
from collector.evaluate.prices import model_problem
from collector.export.config import Export
from collector.receiver.config import NO_LIMITS, BearerAuth, Listener, Receivers, Redact, TenantLimits
from collector.sessions.config import Sessions
from collector.state.config import Storage
from collector.status.config import Status

__all__ = ["Config", "ConfigError", "parse"]

# Validation context key: ``parse`` runs ``cross_problems`` itself.
_DEFERRED = "cross_checks_deferred"


class Config(Strict):
    receivers: Receivers = Receivers()
    status: Status = Status()
    storage: Storage = Storage()
    sessions: Sessions = Sessions.model_validate({})
    judge: Judge = Judge()
    export: Export = Export()
    skills: Skills = Skills()
    evaluators: Evaluators = Evaluators()
    expectations: tuple[Expectation, ...] = ()
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    auth: BearerAuth | None = None  # every listener without an ``auth`` of its own
    redact: Redact = Redact()

    def auth_for(self, listener: Listener | Status) -> BearerAuth | None:
        """The auth a listener enforces: its own, else the top-level one; ``none`` = open."""
        if listener.auth == "none":
            return None
        return listener.auth or self.auth

    @property
    def connection_caps(self) -> dict[str, int]:
        """Each listener's ``max_connections``, by its config field."""
        otlp = self.receivers.otlp
        caps = {"status.max_connections": self.status.max_connections}
        if otlp.grpc is not None:
            caps["receivers.otlp.grpc.max_connections"] = otlp.grpc.max_connections
        if otlp.http is not None:
            caps["receivers.otlp.http.max_connections"] = otlp.http.max_connections
        return caps

    @property
    def tenant_limits(self) -> dict[str, TenantLimits]:
        """The tenants the receivers' tokens name, each with its own limits (merged over
        the entries and auth sections that name it)."""
        merged: dict[str, TenantLimits] = {}
        otlp = self.receivers.otlp
        for listener in (otlp.grpc, otlp.http):
            auth = self.auth_for(listener) if listener is not None else None
            for tenant, limits in (auth.tenant_limits if auth is not None else {}).items():
                merged[tenant] = merged.get(tenant, NO_LIMITS).merged(limits, tenant)
        return merged

    @model_validator(mode="after")
    def _tenant_limits_agree(self) -> Config:
        self.tenant_limits  # noqa: B018 - raises when two sections give a tenant different limits
        return self

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Config:
        # ``parse`` runs these checks itself, with the fields' problems, to report every
        # problem of a file at once; code that validates a Config directly gets the first.
        if not (info.context and info.context.get(_DEFERRED)):
            problems = cross_problems(self)
            if problems:
                raise ValueError(problems[0])
        return self


def cross_problems(config: Config, every_model_priced: bool = False) -> list[str]:
    """The problems that span sections, each ``field: problem - fix``: a redacted session
    key, a judge model without a price (every model with ``every_model_priced``, else only
    once a judge is configured), an expectation naming a skill ``skills.paths`` does not hold."""
    problems = []
    keys = [k.partition(":")[2] for k in config.sessions.keys] + [config.sessions.end_attribute]
    for key in keys:
        if config.redact.matches(key):
            problems.append(
                f"redact.attributes: {key!r} groups spans into sessions (sessions.keys / "
                "end_attribute) and cannot be redacted - remove it from one of the lists"
            )
    # Every judged row carries its cost, and a USD ceiling that ignores an unpriced model
    # is no ceiling: a model the judge may use must have a price.
    named = [(f"evaluators.{name}.model", e.model) for name, e in config.evaluators.judged() if e.model]
    for where, model in named:  # judge.model is checked by the judge section itself
        problem = model_problem(config.judge.provider, model)
        if problem is not None:
            problems.append(f"{where}: {problem} (judge.provider is {config.judge.provider})")
    if config.judge.configured or every_model_priced:
        problems += [price_fix(field, model) for field, model in unpriced(config)]
    return problems + unknown_skills(config)


def unknown_skills(config: Config) -> list[str]:
    """Expectations naming a skill that ``skills.paths`` does not hold (none without paths:
    the agents' own skills are not known here)."""
    if not config.skills.paths:
        return []
    from evaluators.registry import RegistryError, load_registry

    try:
        registry = load_registry(config.skills.paths)
    except RegistryError:
        return []  # reported by skills.paths itself
    names = sorted(s.name for s in registry.skills.values())
    problems = []
    for i, rule in enumerate(config.expectations):
        for j, skill in enumerate(rule.expect):
            if registry.get(skill) is None:
                close = difflib.get_close_matches(skill, names, n=1, cutoff=0.6)
                fix = f"did you mean {close[0]}?" if close else "check the name against the SKILL.md files"
                problems.append(
                    f"expectations.{i}.expect.{j}: no skill {skill!r} in skills.paths - {fix} "
                    f"(skills there: {', '.join(names) or 'none'})"
                )
    return problems


def _expand(node: Any, where: str, unset: list[str] | None = None) -> Any:
    if isinstance(node, str):

        def repl(match: re.Match[str]) -> str:
            value = os.environ.get(match.group(1), match.group(2))
            if value is None and unset is not None:
                unset.append(
                    f"{where}: environment variable {match.group(1)} is not set here - checked as if "
                    "the key were absent; serve will refuse to start without it"
                )
                return ""
            if value is None:
                raise ConfigError(
                    f"{where}: environment variable {match.group(1)} is not set - export it or write ${{env:{match.group(1)}:-default}}"
                )
            return value

        return _ENV.sub(repl, node)
    if isinstance(node, dict):
        return {k: _expand(v, f"{where}.{k}" if where else str(k), unset) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand(v, f"{where}.{i}" if where else str(i), unset) for i, v in enumerate(node)]
    return node


def _drop_empty(node: Any) -> Any:
    # `${env:ANTHROPIC_API_KEY}` expanding to "" means "not set": treat as absent.
    if isinstance(node, dict):
        return {k: _drop_empty(v) for k, v in node.items() if v != ""}
    return node


# What the environment supplies for a judge setting left unset, by provider (first set wins).
JUDGE_ENV: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "anthropic": (("api_key", ("ANTHROPIC_API_KEY",)), ("base_url", ("ANTHROPIC_BASE_URL",))),
    "bedrock": (("aws_region", ("AWS_REGION", "AWS_DEFAULT_REGION")),),
    "vertex": (
        ("project_id", ("ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT")),
        ("region", ("CLOUD_ML_REGION",)),
    ),
}
# The settings that decide whether the Claude API judge is configured: check-config leaves
# them out, so that a file passes or fails the same with or without ANTHROPIC_API_KEY.
_ANTHROPIC_SETTINGS = frozenset({"api_key", "base_url"})


def parse(
    data: Any,
    source: str = "config",
    *,
    anthropic_env: bool = True,
    line_of: Callable[[Loc, bool], int | None] | None = None,
    unset: list[str] | None = None,
    every_model_priced: bool = False,
) -> Config:
    """Validate already-parsed YAML data and report every problem of it at once (each field's,
    and those that span sections: ``cross_problems``; ``every_model_priced`` as there), then apply the judge's settings the file leaves
    unset from the environment (``JUDGE_ENV``; ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL only
    with ``anthropic_env``).  With ``line_of`` (see ``collector.configfile``) every problem
    is prefixed with ``source`` and its line.  With an ``unset`` list, a ``${env:VAR}`` whose
    variable is not set reads as absent and is noted there instead of being an error."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys such as receivers, sessions, judge"
        )
    try:
        data = _drop_empty(_expand(data, "", unset))
    except ConfigError as err:
        raise ConfigError(locate(str(err), source if line_of else None, line_of)) from None
    judge = data.setdefault("judge", {}) if isinstance(data.get("judge", {}), dict) else data["judge"]
    if isinstance(judge, dict):
        for key, envs in JUDGE_ENV.get(str(judge.get("provider", "anthropic")), ()):
            if key in _ANTHROPIC_SETTINGS and not anthropic_env:
                continue
            given = next((os.environ[e] for e in envs if os.environ.get(e)), None)
            if key not in judge and f"{key}_file" not in judge and given:
                judge[key] = given
    where = source if line_of else None
    context = {FROM_FILE: True, _DEFERRED: True}
    problems: list[str] = []
    failed: set[str] = set()
    config: Config | None = None
    try:
        config = Config.model_validate(data, context=context)
    except ValidationError as err:
        problems = explain(err, Config, line_of, where).splitlines()
        failed = {str(e["loc"][0]) for e in err.errors() if e["loc"]}
        if all(e["loc"] for e in err.errors()):
            # The sections that are fine, validated alone, so that their cross-section
            # problems are reported in the same pass.
            try:
                config = Config.model_validate(
                    {k: v for k, v in data.items() if k not in failed}, context=context
                )
            except ValidationError:
                config = None
    if config is not None:
        problems += [
            locate(problem, where, line_of)
            for problem in cross_problems(config, every_model_priced)
            if problem.partition(".")[0].partition(":")[0] not in failed
            and not ("judge" in failed and problem.partition(":")[0].endswith(".model"))
        ]
    if problems:
        raise ConfigError("\n".join(sorted(problems, key=line_number)))
    assert config is not None  # no problem means it validated
    return config


def unpriced(config: Config) -> list[tuple[str, str]]:
    """(field, model) for each model the judge may use that has no price (``serve`` refuses
    them once a judge is configured; ``check-config`` whether or not one is)."""
    ev = config.evaluators
    uses = [("judge.model", config.judge.model)]
    uses += [
        (f"evaluators.{name}.model", e.model)
        for name, e in ev.judged()
        if e.model and not name.startswith("custom.")
    ]
    uses += [(f"evaluators.custom.{i}.model", c.model) for i, c in enumerate(ev.custom) if c.model]
    found: dict[str, str] = {}
    for field, model in uses:
        if config.judge.price(model) is None:
            found.setdefault(model, field)
    return [(field, model) for model, field in found.items()]


def price_fix(field: str, model: str) -> str:
    return (
        f"{field}: no price for model {model!r} - add "
        f"judge.prices.{model}: {{input: <USD per Mtok>, output: <USD per Mtok>}}"
    )
