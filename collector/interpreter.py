"""Interpreter settings for skillgauge's long-running processes (``serve`` and its
detection worker), in one place so both run with the same."""

# How long a thread may hold the GIL while another waits for it (Python's default is 5 ms).
# The spool's writer and the receivers' loop each need it back after every SQLite call or
# socket wait; at 5 ms, a busy pipeline loop made every commit wait tens of milliseconds.
SWITCH_INTERVAL = 0.0005

# Full garbage collections scan every open session's evidence (80 ms at ~90k objects under
# load), and with Python's default thresholds they ran every 2-3 s.  Most of what the
# pipeline frees is freed by reference counting; young generations are still collected as
# usual, and a full collection now runs after 1,000 second-generation ones (minutes apart).
GC_THRESHOLDS = (700, 10, 1000)
