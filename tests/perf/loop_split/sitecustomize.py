"""Thread CPU time by event-loop callback, for ``tests/perf/loop_split.py``; does nothing unless
``SKILLGAUGE_LOOP_SPLIT`` names a folder.

Python imports this module at start-up when its folder is first on ``PYTHONPATH``.  It wraps
``asyncio.events.Handle._run`` (every callback and task step an event loop runs) and adds the
calling thread's CPU time (``time.thread_time``: user + system, not the time other threads or
processes take) to the callback's key: ``task <qualname>`` for a step of a task (the task's
coroutine), else the callback's qualified name.  ``SKILLGAUGE_LOOP_PROBES`` (comma-separated
``module:attribute`` or ``module:Class.attribute``) times named functions too, wherever they
are called from: a generator's steps, a coroutine's own steps (not what it awaits), a plain
call whole; a probe is inclusive, so nested probes overlap.  Functions imported by name into
another module before the probe is set are not seen through that name.

Each key also counts the CPU time garbage collections took inside it (``gc.callbacks``).
Every second the totals (seconds, calls, seconds collecting) and the main thread's CPU seconds are appended as one
JSON line to ``<folder>/<pid>.jsonl``.  Measuring costs ~1 us a callback.
"""

from __future__ import annotations

import os

_FOLDER = os.environ.get("SKILLGAUGE_LOOP_SPLIT")

if _FOLDER:
    import asyncio.events
    import functools
    import gc
    import inspect
    import json
    import sys
    import threading
    import time
    from collections.abc import Callable
    from typing import Any

    _clock = time.thread_time
    _totals: dict[str, list[float]] = {}  # key -> [seconds, calls, seconds collecting garbage]
    _run = asyncio.events.Handle._run
    _collecting = [0.0, 0.0]  # CPU seconds collections took so far (any thread); when the one under way began

    def _gc_observe(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            _collecting[1] = _clock()
        else:
            _collecting[0] += _clock() - _collecting[1]

    gc.callbacks.append(_gc_observe)

    def _add(key: str, seconds: float, collected: float) -> None:
        entry = _totals.get(key)
        if entry is None:
            _totals[key] = [seconds, 1, collected]
        else:
            entry[0] += seconds
            entry[1] += 1
            entry[2] += collected

    def _key(handle: asyncio.events.Handle) -> str:
        callback = handle._callback
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, asyncio.Task):
            coro = owner.get_coro()
            code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
            return f"task {code.co_qualname if code is not None else type(coro).__name__}"
        return str(getattr(callback, "__qualname__", type(callback).__name__))

    def _timed_run(self: asyncio.events.Handle) -> None:
        began, collected = _clock(), _collecting[0]
        try:
            _run(self)
        finally:
            _add(_key(self), _clock() - began, _collecting[0] - collected)

    asyncio.events.Handle._run = _timed_run  # type: ignore[method-assign]

    class _Pass:
        """Awaits what the wrapped coroutine yielded, as its caller would have."""

        def __init__(self, item: Any) -> None:
            self.item = item

        def __await__(self) -> Any:
            return (yield self.item)

    def _probe(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isgeneratorfunction(function):

            def steps(*args: Any, **kwargs: Any) -> Any:
                inner = function(*args, **kwargs)
                while True:
                    began, collected = _clock(), _collecting[0]
                    try:
                        item = next(inner)
                    except StopIteration as done:
                        _add(name, _clock() - began, _collecting[0] - collected)
                        return done.value
                    _add(name, _clock() - began, _collecting[0] - collected)
                    yield item

            return functools.wraps(function)(steps)
        if inspect.iscoroutinefunction(function):

            async def own_steps(*args: Any, **kwargs: Any) -> Any:
                inner = function(*args, **kwargs)
                step: Callable[[], Any] = functools.partial(inner.send, None)
                while True:
                    began, collected = _clock(), _collecting[0]
                    try:
                        item = step()
                    except StopIteration as done:
                        _add(name, _clock() - began, _collecting[0] - collected)
                        return done.value
                    _add(name, _clock() - began, _collecting[0] - collected)
                    try:
                        answer = await _Pass(item)
                    except BaseException as err:  # handed to the coroutine
                        step = functools.partial(inner.throw, err)
                    else:
                        step = functools.partial(inner.send, answer)

            return functools.wraps(function)(own_steps)

        def whole(*args: Any, **kwargs: Any) -> Any:
            began, collected = _clock(), _collecting[0]
            try:
                return function(*args, **kwargs)
            finally:
                _add(name, _clock() - began, _collecting[0] - collected)

        return functools.wraps(function)(whole)

    def _set_probes() -> None:
        """Probe each named function once its module (and class) exists: a module is in
        ``sys.modules`` before its body has run."""
        wanted = [p.strip() for p in os.environ.get("SKILLGAUGE_LOOP_PROBES", "").split(",") if p.strip()]
        for _ in range(3000):
            for spec in list(wanted):
                module_name, _, path = spec.partition(":")
                module = sys.modules.get(module_name)
                *owner_path, attribute = path.split(".")
                owner: Any = module
                for part in owner_path:
                    owner = getattr(owner, part, None)
                if owner is None or not hasattr(owner, attribute):
                    continue
                function = inspect.getattr_static(owner, attribute)
                if callable(function):
                    setattr(owner, attribute, _probe(f"fn {spec}", function))
                wanted.remove(spec)
            if not wanted:
                return
            time.sleep(0.01)

    def _dump_every_second() -> None:
        pid = os.getpid()
        path = os.path.join(_FOLDER, f"{pid}.jsonl")
        ticks = os.sysconf("SC_CLK_TCK")
        while True:
            time.sleep(1.0)
            try:
                with open(f"/proc/{pid}/task/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                main_thread = (int(fields[11]) + int(fields[12])) / ticks
            except OSError:
                main_thread = float("nan")
            line = {
                "t": time.monotonic(),
                "main_thread": main_thread,
                "totals": {k: list(v) for k, v in list(_totals.items())},
            }
            with open(path, "a") as out:
                out.write(json.dumps(line) + "\n")

    os.makedirs(_FOLDER, exist_ok=True)
    threading.Thread(target=_set_probes, daemon=True).start()
    threading.Thread(target=_dump_every_second, daemon=True).start()
