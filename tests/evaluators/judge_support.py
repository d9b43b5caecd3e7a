"""Sessions built by hand and a runner that collects what it delivers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from collector.config import Config, parse
from collector.evaluate.metrics import EvaluateMetrics
from collector.evaluate.runner import Runner
from collector.state.recorder import Evaluated
from collector.testing import RecordingConsumer
from evaluators.evidence import Catalog, CatalogEntry, Session, SkillLoad, ToolCall, Turn
from evaluators.judge.base import Judge
from evaluators.result import Coverage, EvaluationResult

SKILLS = Path(__file__).parents[1] / "fixtures" / "skills"
RELEASE_BODY = (SKILLS / "release-notes" / "SKILL.md").read_text()
T0 = 1_700_000_000_000_000_000
TRACE = "ab" * 16


def catalog(*names: str) -> Catalog:
    c = Catalog()
    c.advertise(
        [CatalogEntry(n, f"Use {n} when the user asks for {n.replace('-', ' ')}.") for n in names], "test"
    )
    return c


def session(
    sid: str = "s-1",
    loads: list[SkillLoad] | None = None,
    cat: Catalog | None = None,
    turns: list[Turn] | None = None,
    calls: list[ToolCall] | None = None,
    **kw: Any,
) -> Session:
    return Session(
        sid,
        framework="test",
        turns=turns
        if turns is not None
        else [Turn("Write release notes for v1.2", "01" * 8, TRACE, T0, "Done.")],
        tool_calls=calls if calls is not None else [],
        skill_loads=loads or [],
        catalog=cat if cat is not None else catalog("release-notes", "csv-cleanup"),
        first_agent_span=(TRACE, "0f" * 8),
        content_capture="present",
        **kw,
    )


def load(
    skill: str = "release-notes",
    status: str = "loaded",
    body: str | None = RELEASE_BODY,
    n: int = 1,
    message: str | None = None,
) -> SkillLoad:
    return SkillLoad(
        skill, status, "skill_tool", f"{n:016x}", TRACE, T0 + n * 1000, body=body, message=message
    )  # type: ignore[arg-type]


def config(data: dict[str, Any] | None = None, **judge: Any) -> Config:
    data = dict(data or {})
    data["judge"] = {**data.get("judge", {}), **judge}
    return parse(data)


class Collected:
    """A runner that keeps every coverage it delivers."""

    def __init__(
        self,
        cfg: Config | None = None,
        judge: Judge | None = None,
        clock: Any = None,
    ) -> None:
        self._recorded: RecordingConsumer[Evaluated] = RecordingConsumer()
        self.metrics = EvaluateMetrics(CollectorRegistry())
        extra = {"clock": clock} if clock else {}
        self.runner = Runner(
            self._recorded,
            cfg or config(),
            self.metrics,
            judge,
            **extra,
        )

    @property
    def coverages(self) -> list[Coverage]:
        return [item.coverage for item in self._recorded.items]

    async def run(self, *sessions: Session) -> list[Coverage]:
        for s in sessions:
            await self.runner.consume(s)
        await self.runner.drain(10)
        return self.coverages

    def of(self, session_id: str) -> Coverage:
        """The coverage of one session: sessions finish in whatever order their judge calls do."""
        (coverage,) = [c for c in self.coverages if c.session.session_id == session_id]
        return coverage

    def rows(self, evaluation: str | None = None) -> list[EvaluationResult]:
        return [
            r for c in self.coverages for r in c.results if evaluation is None or r.evaluation == evaluation
        ]


def only(rows: list[EvaluationResult], evaluation: str) -> EvaluationResult:
    (row,) = [r for r in rows if r.evaluation == evaluation]
    return row
