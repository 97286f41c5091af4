"""Report stage: everything here is *derived* from results records and regenerated, never edited.

* :mod:`harness.report.metrics` -- per-record metrics (E_lib, U_roof, speed-of-light
  score S, verdict bucket) and the rules that pick records and candidates;
* :mod:`harness.report.leaderboard` -- the schema-versioned leaderboard dict,
  its JSON file and its text table;
* :mod:`harness.report.compare` -- paired comparison of two generators with
  bootstrap confidence intervals, and the report's comparison of every
  generator version with its previous one;
* :mod:`harness.report.html` -- a self-contained HTML page and a Markdown
  summary, with the charts of :mod:`harness.report.plots` (roofline, fast_p;
  they need the optional ``matplotlib``).

Importing this package does no work; matplotlib and numpy load inside the
functions that need them.
"""
