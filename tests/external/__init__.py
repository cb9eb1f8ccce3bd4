"""Tests that judge our output with tools outside Python, with no cluster: CronJob's own parser
(robfig/cron, a Go tool), kstatus and opm (Go tools built by ``localcluster.gotools``), promtool
and Lua 5.1 (Debian packages, ``make system-deps``). ``make test`` runs them; ``make unit``
leaves them out so that it needs Python alone.
"""
