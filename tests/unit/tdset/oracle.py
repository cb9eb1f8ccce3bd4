"""What the TDSet schedule tests' oracles share: the weekly minute table and window strategies.

The table is deliberately naive: every (weekday, hour, minute) a window covers, found by
walking minute by minute from its start on each of its ``days`` until its end, first writer
wins. It shares no code with ``operators.tdset.schedule``, which computes the same from
bit masks and offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

Minute = tuple[int, int, int]  # (weekday, hour, minute) on the wall clock


def weekly_table(
    items: Sequence[Mapping[str, Any]], label: Callable[[int, Mapping[str, Any]], Any]
) -> dict[Minute, tuple[int, Any]]:
    """(replicas, ``label(index, item)``) of the first window covering each minute of the week."""
    table: dict[Minute, tuple[int, Any]] = {}
    for index, item in enumerate(items):
        start = (item["startTime"], item.get("startMinute", 0))
        end = (item["endTime"], item.get("endMinute", 0))
        for day in item.get("days", DAY_NAMES):
            weekday, (hour, minute) = DAY_NAMES.index(day), start
            while True:
                table.setdefault((weekday, hour, minute), (item["replica"], label(index, item)))
                minute += 1
                if minute == 60:
                    hour, minute = hour + 1, 0
                if hour == 24:
                    hour, weekday = 0, (weekday + 1) % 7
                if (hour, minute) == end:
                    break
    return table


def window_items(
    *,
    replicas: st.SearchStrategy[int],
    start_minutes: Iterable[int],
    end_minutes: Iterable[int],
    days: bool = True,
    **optional: st.SearchStrategy[Any],
) -> st.SearchStrategy[dict[str, Any]]:
    """Windows of ``schedulingConfig`` the schema admits (start != end), with ``optional`` fields."""

    def valid(item: Mapping[str, Any]) -> bool:
        return (item["startTime"], item.get("startMinute", 0)) != (item["endTime"], item.get("endMinute", 0))

    return st.fixed_dictionaries(
        {"startTime": st.integers(0, 23), "endTime": st.integers(0, 23), "replica": replicas},
        optional={
            "startMinute": st.sampled_from(list(start_minutes)),
            "endMinute": st.sampled_from(list(end_minutes)),
            **({"days": st.lists(st.sampled_from(DAY_NAMES), min_size=1, unique=True)} if days else {}),
            **optional,
        },
    ).filter(valid)
