"""Facts about how harnesses record skills, one module per job: everything here is a fact about
some harness's output format (tool names, argument keys, attribute keys, event names, message
shapes, catalog formats, refusal phrases).

The detectors read these tables and name no harness themselves: they recognise evidence by its
shape, and a row here is a fast path, a tie-breaker or a marker, never the only way in.
"""
