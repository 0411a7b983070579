"""Op coverage reports: which ATen overloads work on a device through eagerc, and how.

``python -m eagerc.coverage --device eagerc --out DIR`` runs every aten overload the
dispatcher knows, per dtype, on the device and on CPU eager, and gives each one status
(pass, extern, aliased, runtime, random, mismatch, ...; docs/coverage.md), written to
``DIR/report.json``, ``report.md`` and ``report.html``.

One module per job: enumerate (the overloads and their static facts), samples (OpInfo
recording and schema samples), execute and classify (one task in a worker), check (the
comparison with CPU eager), op_worker and runner (processes, timeouts, resume), report_json /
report_md / report_html, compare (regressions against an older report), coverage_command.
"""
