"""Interpreter settings for skillgauge's long-running processes (``serve`` and its
workers), in one place, with why each differs from Python's default."""

import os
from pathlib import Path


def child_env() -> dict[str, str]:
    """The environment of a worker started with ``python -m``: it imports this very copy of
    the package, installed or not."""
    package_root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


# How long a thread may hold the GIL while another waits for it (Python's default is 5 ms).
# The spool's writer and the receivers' loop each need it back after every SQLite call or
# socket wait; at 5 ms, a busy pipeline loop made every commit wait tens of milliseconds.
SWITCH_INTERVAL = 0.0005

# Most of what the pipeline frees is freed by reference counting, yet each young collection
# visits every container made since the last: with Python's 700, ~9 % of the detection
# worker's time in process.  At 50,000 most of those have died first (the worker's loop in
# process: 1.8 % fewer instructions, ~5 % less time; end to end, within noise).  Full
# collections scan every open session's evidence (80 ms at ~90k objects under load) and ran
# every 2-3 s with the defaults; here one runs after 100 second-generation collections, 50
# million allocations (tens of seconds at saturation).
GC_THRESHOLDS = (50_000, 10, 100)

# The detection worker makes almost no reference cycles: 30 s at saturation, ~1 million
# spans, left 1,206 objects for the collector to free (the server: ~10,000, from asyncio and
# gRPC).  Its young collections, ~10 ms each over fresh evidence, were 4.8 % of its CPU for
# nothing; one per million containers made is ~0 %, and still bounds what a cycle can hold.
# (Measured with ``gc.callbacks`` timing each collection; the server keeps its thresholds,
# since its collections pause the event loop that acknowledges requests.)
DETECTION_GC_THRESHOLDS = (1_000_000, 10, 100)
