"""Log-record intake: what a session's log records add to its evidence.

Log records report what spans may not: a prompt as typed, an answer, a tool call or its
result, a skill activation, a model call's messages (GenAI semconv events), the raw request
a harness sent (which repeats the history so far: only what this session's log records
have not read is scanned, ``Histories.unread_part``).
"""

from __future__ import annotations

from typing import Any

from collector.detect import log_calls, messages, names
from collector.detect.closing import json_text
from collector.detect.content import first_present, parse_json
from collector.detect.facts import logs as log_facts
from collector.detect.facts import prompts as prompt_facts
from collector.detect.gathered import Seen
from collector.detect.intake import Intake
from collector.otlp.views import Encoded, LogView
from evaluators.evidence import Turn

_LOGGED_MESSAGE_KEYS = (*prompt_facts.MESSAGE_BODY_KEYS, log_facts.LOG_MESSAGE_CALLS_KEY)


class LogIntake(Intake):
    """A session's evidence with log-record intake (``observe_log``)."""

    __slots__ = ()

    def observe_log(self, view: LogView) -> None:
        self._records += 1
        if not self.framework:
            self._name_framework(view, "")
        where = (f"a log record of trace {view.record.trace_id.hex()}", "a log record's resource")
        self._expect(self._rules.from_attributes(view.attrs, view.resource.attrs, where=where))
        record = view.record
        seen = Seen(
            record.trace_id.hex(),
            record.span_id.hex(),
            record.time_unix_nano or record.observed_time_unix_nano,
        )
        event = view.event_name.removeprefix(log_facts.LOG_EVENT_PREFIX)
        logged = log_calls.logged_call(view, event, seen.time_unix_nano)
        if logged is not None and logged.whole:
            self._observe_tool(logged.call)
        elif logged is not None:
            self._more().log_calls.append(logged)
        checked = log_calls.permission_check(view, seen.time_unix_nano)
        if checked is not None:
            self._more().log_calls.append(checked)
        prompt_key = log_facts.LOG_USER_PROMPTS.get(event)
        if prompt_key is not None:
            request = self._new_request(view.attrs.text(prompt_key) or "")
            if request:
                self.turns.append(
                    Turn(request, seen.span_id, seen.trace_id, seen.time_unix_nano, source=_FROM_LOG_PROMPT)
                )
        answer_key = log_facts.LOG_AGENT_RESPONSES.get(event)
        if answer_key is not None:
            answer = view.attrs.text(answer_key)
            if answer:
                self._answers.append((seen.time_unix_nano, answer))
        active_key = log_facts.LOG_ACTIVE_SKILL.get(event)
        if active_key is not None:
            active = names.decoded(view.attrs.text(active_key) or "")
            if active and active not in log_facts.REDACTED_SKILL_NAMES:
                self._more().active_skills.append((seen.time_unix_nano, seen.trace_id, active))
        if event in log_facts.LOG_SKILL_ACTIVATED:
            ok = all(
                str(view.attrs.get(key)).lower() != "false"
                for key in log_facts.LOG_SKILL_SUCCESS_KEYS
                if key in view.attrs
            )
            self._activation(view.attrs.text(log_facts.LOG_SKILL_ACTIVATED[event]), seen, ok)
        elif event in log_facts.LOG_TOOL_RESULTS:
            id_key, success_key = log_facts.LOG_TOOL_RESULTS[event]
            call_id = view.attrs.text(id_key)
            if call_id:
                self._more().log_results[call_id] = (str(view.attrs.get(success_key)).lower() == "true", seen)
        role = log_facts.LOG_MESSAGE_EVENTS.get(event)
        if role is not None:
            self._observe_logged_message(role, view.body, seen)
        # A request log record repeats the history so far: what this session read is skipped.
        for key in log_facts.LOG_CONTENT_ATTRIBUTES:
            if key in view.attrs:
                content = messages.encoded_text(view.attrs, key)
                if content:
                    self._content_seen = True
                    self._scan_unread(content, seen)
        for prompt in messages.other_prompt_texts(view.attrs):
            self._scan_unread(prompt, seen)

    def _scan_unread(self, raw: Encoded, seen: Seen) -> None:
        """``_scan`` what a log record's ``raw`` holds that this session's log records have
        not (``Histories.unread_part``)."""
        part = self.histories.unread_part(raw, "log")
        if part is None:
            part = raw.text()
        if part:
            self._scan(part, seen)

    def _observe_logged_message(self, role: str, body: Any, seen: Seen) -> None:
        """One message of a model call, logged as a GenAI semconv event
        (``log_facts.LOG_MESSAGE_EVENTS``): a request, an answer, and catalogs, calls, results and
        injected bodies, as in a span's recorded messages.  A body without content (content
        capture off) records nothing.  A body written as the message's JSON text (Semantic
        Kernel) is that message."""
        if isinstance(body, str) and body.startswith("{"):
            body = parse_json(body)
        message = (
            body.get(log_facts.LOG_CHOICE_MESSAGE_KEY)
            if role == "answer" and isinstance(body, dict)
            else body
        )
        if not isinstance(message, dict) or not any(message.get(key) for key in _LOGGED_MESSAGE_KEYS):
            return
        self._content_seen = True
        text = messages.message_text(first_present(message, prompt_facts.MESSAGE_BODY_KEYS))
        request = self._new_request(text) if role == "user" else ""
        if request:
            self.turns.append(
                Turn(request, seen.span_id, seen.trace_id, seen.time_unix_nano, source=_FROM_LOG_MESSAGE)
            )
        elif role == "answer" and text:
            self._answers.append((seen.time_unix_nano, text))
        self._scan(json_text(message), seen)


# Where a turn's request was read (``Turn.source``): a log record of the prompt
# (``log_facts.LOG_USER_PROMPTS``), a logged GenAI message event.
_FROM_LOG_PROMPT, _FROM_LOG_MESSAGE = "log_prompt", "log_message"
