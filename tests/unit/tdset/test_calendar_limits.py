"""The TDSet calendar over the whole input space its schema admits, extremes included.

Strategies are built from the CRD schema's constraints (the patterns of times and dates admit
the years 0000 to 9999; every zone of ``zoneinfo.available_timezones()`` and names that only
match the pattern; local times in the gaps and folds of daylight-saving changes), from the
override annotation's form and from what a holidays ConfigMap may hold. The property: the
calendar's checks, parsers and decision either answer or raise ``ValueError`` (the module's
error, which the pass turns into a condition); a spec whose checks pass is always decided. A
pass over any admitted TDSet, on the fake API server, ends with conditions in its status and,
when ``Degraded``, a Warning Event.

List lengths are kept small (a few windows, overrides and holidays, where the schema allows
48, 32 and 366): the failures looked for come from values, which are drawn from their whole
range, not from how many there are.
"""

from __future__ import annotations

import asyncio
import datetime
import zoneinfo
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from operators.tdset import schedule
from operators.tdset.description import DESCRIPTION
from operators.tdset.reconciler import VALIDATOR, TDSetReconciler
from operators.tdset.schema import CRD
from shared.api import conditions
from shared.api.clock import Clock
from shared.api.errors import ReconcileError
from shared.api.validation import FieldError
from shared.client.kube import namespaced
from shared.controller.builder import Operator
from tests.framework.fakekube import FakeKube
from tests.framework.properties import examples

UTC = datetime.UTC
ZONES = sorted(zoneinfo.available_timezones())
ZONE_PATTERN = CRD.openapi_schema()["properties"]["spec"]["properties"]["timeZone"]["pattern"]
# Zones whose offset changes (DST, or a change of standard time), for gaps and folds.
CHANGING = [z for z in ZONES if not (z == "UTC" or z.startswith("Etc/"))]
EXTREME_YEARS = (0, 1, 2, 1969, 1970, 1971, 2998, 2999, 3000, 9998, 9999)
SETTINGS = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# Names the pattern admits that are no zone are drawn too, less often than real zones (an
# unknown zone stops the checks before the dates are looked at).
zone_names = st.one_of(
    st.sampled_from(ZONES),
    st.sampled_from(ZONES),
    st.sampled_from(ZONES),
    st.from_regex(ZONE_PATTERN, fullmatch=True).filter(lambda name: len(name) <= 64),
)
years = st.one_of(st.sampled_from(EXTREME_YEARS), st.integers(0, 9999))


@st.composite
def wall_texts(draw: st.DrawFn) -> str:
    """A date and time as the pattern admits it (valid or not as a calendar date)."""
    year = draw(years)
    month = draw(st.one_of(st.integers(1, 12), st.sampled_from([0, 13, 99])))
    day = draw(st.one_of(st.integers(1, 28), st.sampled_from([0, 29, 30, 31, 32, 99])))
    hour, minute = draw(st.integers(0, 24)), draw(st.integers(0, 59))
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}"
    return text + draw(st.sampled_from(["", ":00", ":59"]))


@st.composite
def offset_texts(draw: st.DrawFn) -> str:
    base = draw(wall_texts())
    if len(base) == 16:
        base += ":00"
    sign = draw(st.sampled_from("+-"))
    offset = draw(st.one_of(st.sampled_from(["Z", f"{sign}23:59", f"{sign}14:00", f"{sign}00:00"])))
    return base + offset


@st.composite
def dst_wall_texts(draw: st.DrawFn, zone_name: str | None = None) -> str:
    """A local time within two hours of an offset change of a zone: in a gap, a fold, or beside."""
    zone = zoneinfo.ZoneInfo(zone_name if zone_name in CHANGING else draw(st.sampled_from(CHANGING)))
    start = draw(
        st.datetimes(datetime.datetime(1970, 1, 1), datetime.datetime(2999, 1, 1), timezones=st.just(UTC))
    )
    change = schedule.next_offset_change(zone, start, start + datetime.timedelta(days=400))
    before = (change - datetime.timedelta(minutes=1)).astimezone(zone).replace(tzinfo=None)
    wall = before + datetime.timedelta(minutes=draw(st.integers(-120, 120)))
    return wall.strftime("%Y-%m-%dT%H:%M")


# The first and last instants datetime can hold, and the edges of the calendar's range, in
# every form: the values at which an offset or a day added leaves datetime's range.
EDGE_TIMES = (
    "9999-12-31T23:00",
    "9999-12-31T23:59:59",
    "9999-12-31T23:59:59-23:59",
    "9999-12-31T00:00:00Z",
    "0001-01-01T00:00",
    "0001-01-01T00:59:59+23:59",
    "0000-01-01T00:00",
    "1969-12-31T23:59",
    "1970-01-01T00:00",
    "1970-01-01T00:00:00+14:00",
    "2999-12-31T23:59:59",
    "2999-12-31T23:59:59-12:00",
    "3000-01-01T00:00",
)
EDGE_DATES = (
    "0000-01-01",
    "0001-01-01",
    "1969-12-31",
    "1970-01-01",
    "2999-12-31",
    "3000-01-01",
    "9999-12-31",
)


def time_texts(zone_name: str | None = None) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(EDGE_TIMES),
        wall_texts(),
        offset_texts(),
        dst_wall_texts(zone_name),
        st.from_regex(schedule.TIME_PATTERN, fullmatch=True),
    )


date_texts = st.one_of(
    st.sampled_from(EDGE_DATES),
    st.builds(
        lambda y, m, d: f"{y:04d}-{m:02d}-{d:02d}",
        years,
        st.one_of(st.integers(1, 12), st.just(13)),
        st.one_of(st.integers(1, 28), st.sampled_from([0, 29, 30, 31, 32])),
    ),
    st.dates(datetime.date(1, 1, 1), datetime.date(9999, 12, 31)).map(datetime.date.isoformat),
    st.from_regex(schedule.DATE_PATTERN, fullmatch=True),
)
names = st.from_regex(r"^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$", fullmatch=True)
replicas = st.one_of(st.sampled_from([0, 1, schedule.MAX_REPLICAS]), st.integers(0, schedule.MAX_REPLICAS))
bounds = st.one_of(st.none(), st.integers(1, schedule.MAX_REPLICAS))
durations = st.one_of(
    st.sampled_from(["24h", "23h59m59s", "99h9999m99999s", "0s", "1m"]),
    st.from_regex(schedule.DURATION_PATTERN, fullmatch=True).filter(lambda d: 2 <= len(d) <= 16),
)


def _without_none(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None}


windows = st.builds(
    lambda start, start_min, end, end_min, replica, days, name, lead, low, high: _without_none(
        {
            "startTime": start,
            "startMinute": start_min,
            "endTime": end,
            "endMinute": end_min,
            "replica": replica,
            "days": days,
            "name": name,
            "leadTime": lead,
            "minReplicas": low,
            "maxReplicas": high,
        }
    ),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 23),
    st.integers(0, 59),
    replicas,
    st.one_of(st.none(), st.lists(st.sampled_from(schedule.DAYS), min_size=1, max_size=7, unique=True)),
    st.one_of(st.none(), names),
    st.one_of(st.none(), durations),
    bounds,
    bounds,
)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """A TDSet spec the CRD's OpenAPI schema admits (its CEL rules are checked again by the
    controller, so specs they would refuse are drawn too: objects stored before a rule)."""
    zone = draw(zone_names)
    spec: dict[str, Any] = {
        "schedulingConfig": draw(st.lists(windows, max_size=4)),
        "defaultReplica": draw(st.integers(1, schedule.MAX_REPLICAS)),
        "timeZone": zone,
    }
    overrides = draw(
        st.lists(
            st.builds(
                lambda name, start, end, n, low, high: _without_none(
                    {
                        "name": name,
                        "start": start,
                        "end": end,
                        "replicas": n,
                        "minReplicas": low,
                        "maxReplicas": high,
                    }
                ),
                names,
                time_texts(zone),
                time_texts(zone),
                replicas,
                bounds,
                bounds,
            ),
            max_size=3,
            unique_by=lambda o: o["name"],
        )
    )
    if overrides:
        spec["overrides"] = overrides
    if draw(st.booleans()):
        spec["holidays"] = {
            "replicas": draw(replicas),
            "dates": draw(st.lists(date_texts, max_size=4, unique=True)),
        }
    for key, strategy in (("leadTime", durations), ("minReplicas", bounds), ("maxReplicas", bounds)):
        value = draw(st.one_of(st.none(), strategy))
        if value is not None:
            spec[key] = value
    return spec


@st.composite
def annotations(draw: st.DrawFn, zone_name: str | None = None) -> dict[str, str]:
    form = draw(st.sampled_from(["none", "until", "from-until", "text"]))
    if form == "none":
        return {}
    if form == "text":
        return {schedule.OVERRIDE_ANNOTATION: draw(st.text(max_size=80))}
    text = f"replicas={draw(st.integers(0, 2 * schedule.MAX_REPLICAS))},until={draw(time_texts(zone_name))}"
    if form == "from-until":
        text += f",from={draw(time_texts(zone_name))}"
    return {schedule.OVERRIDE_ANNOTATION: text}


configmap_data = st.dictionaries(
    st.from_regex(r"^[a-z0-9._-]{1,20}$", fullmatch=True),
    st.lists(st.one_of(date_texts, st.text(max_size=12)), max_size=6).map("\n".join),
    max_size=3,
)
nows = st.datetimes(
    datetime.datetime(1970, 1, 2), datetime.datetime(2999, 12, 30), timezones=st.just(UTC)
) | st.sampled_from(
    [datetime.datetime(1970, 1, 2, tzinfo=UTC), datetime.datetime(2999, 12, 30, 23, 59, tzinfo=UTC)]
)


@SETTINGS
@given(text=time_texts(), zone=st.sampled_from(ZONES))
def test_a_time_is_read_or_refused_with_a_value_error(text, zone):
    try:
        instant = schedule.parse_time(text, zoneinfo.ZoneInfo(zone))
    except ValueError:
        return
    assert instant.tzinfo is not None
    assert schedule.EARLIEST_YEAR - 1 <= instant.year <= schedule.LATEST_YEAR + 1


@SETTINGS
@given(text=date_texts)
def test_a_date_is_read_or_refused_with_a_value_error(text):
    try:
        day = schedule.parse_date(text)
    except ValueError:
        return
    assert schedule.EARLIEST_YEAR <= day.year <= schedule.LATEST_YEAR


@SETTINGS
@given(data=configmap_data)
def test_a_holidays_configmap_is_read_whatever_it_holds_and_each_bad_word_reported(data):
    """One bad date in a shared ConfigMap is reported (each TDSet reading it says so), and the
    valid dates keep applying: never an exception."""
    dates, problems = schedule.parse_holiday_data(data)
    words = [
        w
        for v in data.values()
        for line in v.splitlines()
        for w in line.split("#", 1)[0].replace(",", " ").split()
    ]
    bad = []
    for word in words:
        try:
            schedule.parse_date(word)
        except ValueError:
            bad.append(word)
    assert all(schedule.EARLIEST_YEAR <= d.year <= schedule.LATEST_YEAR for d in dates)
    assert bool(problems) == bool(bad) or len(dates) > schedule.MAX_CONFIGMAP_DATES
    assert len(dates) == len({schedule.parse_date(w) for w in words if w not in bad})


@SETTINGS
@given(data=st.data(), spec=specs(), now=nows, holiday_data=configmap_data)
def test_any_admitted_spec_is_decided_or_its_checks_name_the_field(data, spec, now, holiday_data):
    """The whole admitted input space: either the checks name the fields (InvalidSpec), or the
    calendar decides, with the annotation and the ConfigMap's dates whatever they hold."""
    assume(not VALIDATOR.errors(spec))
    errors = schedule.check(spec)
    if errors:
        assert all(isinstance(e, FieldError) and e.path.startswith("spec") for e in errors)
        return
    notes = data.draw(annotations(spec["timeZone"]))
    holidays, _ = schedule.parse_holiday_data(holiday_data)
    decision = schedule.decide(spec, now, notes, holidays=holidays)
    assert 0 <= decision.replicas <= schedule.MAX_REPLICAS
    assert decision.next_transition is None or decision.next_transition > now
    assert schedule.recheck_delay(spec, decision, now) > 0
    if notes and decision.annotation_error is None:
        assert schedule.parse_annotation(
            notes[schedule.OVERRIDE_ANNOTATION], zoneinfo.ZoneInfo(spec["timeZone"])
        )


@settings(max_examples=examples(200), deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    until=st.sampled_from(
        ["9999-12-31T23:00", "9999-12-31T23:59:59", "0001-01-01T00:00", "3000-01-01T00:00"]
    ),
)
def test_an_annotation_at_the_calendars_limits_is_ignored_with_a_message_in_every_zone(zone, until):
    """``until=9999-12-31T23:00`` west of UTC (and year 1 east of it) overflows: the annotation is
    refused, naming the range, and the calendar runs on rather than stopping silently."""
    spec = {"schedulingConfig": [], "defaultReplica": 2, "timeZone": zone}
    decision = schedule.decide(
        spec,
        datetime.datetime(2026, 6, 1, tzinfo=UTC),
        {schedule.OVERRIDE_ANNOTATION: f"replicas=1,until={until}"},
    )
    assert decision.replicas == 2
    assert decision.annotation_error is not None and schedule.RANGE_MESSAGE in decision.annotation_error


# -- a whole pass, on the fake API server ---------------------------------------------------

TDS_PATH = namespaced("ns", "tdsets", "shop", "schedule.rs/v1")


def _one_pass(
    spec: dict[str, Any], notes: dict[str, str], holiday_data: dict[str, str], now: datetime.datetime
):
    body = {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": "shop", "namespace": "ns", "annotations": notes},
        "spec": {**spec, "container": {"image": "nginx:1.27", "port": 80}},
    }
    if holiday_data:
        body["spec"].setdefault("holidays", {"replicas": 0})["configMapRef"] = {"name": "days"}
    kube = FakeKube(body)
    operator = Operator(
        DESCRIPTION, TDSetReconciler, kube=kube, clock=Clock(now - datetime.datetime.now(UTC))
    )
    reconciler = operator.reconciler
    assert isinstance(reconciler, TDSetReconciler)
    if holiday_data:
        # Stored on the fake server: the pass reads a referenced ConfigMap by name.
        configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "days", "namespace": "ns"}}
        kube.add({**configmap, "data": holiday_data})
        reconciler.holidays.changed("ADDED", {**configmap, "kind": "PartialObjectMetadata"})

    async def run() -> None:
        try:
            # Through the builder, as the work queue calls it: its net is part of the pass.
            await operator._reconcile(kube.object(TDS_PATH) or {})
        except ReconcileError:
            pass
        finally:
            await operator.events.flush()

    asyncio.run(run())
    obj = kube.object(TDS_PATH)
    assert obj is not None
    return obj.get("status") or {}, kube.events()


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data(), spec=specs(), now=nows, holiday_data=configmap_data)
def test_any_admitted_tdset_gets_conditions_and_a_warning_when_degraded(data, spec, now, holiday_data):
    assume(not VALIDATOR.errors(spec))
    notes = data.draw(annotations(spec["timeZone"]))
    st_, events = _one_pass(spec, notes, holiday_data, now)
    conds = st_.get("conditions") or []
    assert {c["type"] for c in conds} >= {conditions.DEGRADED, conditions.READY}
    degraded = conditions.get(conds, conditions.DEGRADED)
    assert degraded is not None
    if degraded["status"] == "True":
        assert ("Warning", degraded["reason"]) in {(kind, reason) for kind, reason, _ in events}


def test_an_override_ending_in_year_9999_west_of_utc_is_degraded_with_the_field_and_an_event():
    """The measured case: such a TDSet never got a status. Now: InvalidSpec naming the field."""
    spec = {
        "schedulingConfig": [],
        "defaultReplica": 1,
        "timeZone": "America/Los_Angeles",
        "overrides": [{"name": "x", "start": "2026-01-01T00:00", "end": "9999-12-31T23:00", "replicas": 2}],
    }
    st_, events = _one_pass(spec, {}, {}, datetime.datetime(2026, 6, 1, tzinfo=UTC))
    degraded = conditions.get(st_["conditions"], conditions.DEGRADED)
    assert degraded["status"] == "True" and degraded["reason"] == "InvalidSpec"
    assert "spec.overrides[0].end" in degraded["message"] and schedule.RANGE_MESSAGE in degraded["message"]
    assert conditions.get(st_["conditions"], conditions.READY)["status"] == "False"
    assert [(k, r) for k, r, _ in events] == [("Warning", "InvalidSpec")]


def test_a_bad_date_in_a_shared_configmap_is_reported_by_each_reader_and_the_good_ones_apply():
    """``9999-12-31`` in a holidays ConfigMap stopped every TDSet reading it. Now each reports
    HolidaysUnavailable naming the word, and the ConfigMap's valid dates still decide."""
    now = datetime.datetime(2026, 12, 25, 12, tzinfo=UTC)
    spec = {"schedulingConfig": [], "defaultReplica": 3, "holidays": {"replicas": 0}}
    st_, events = _one_pass(spec, {}, {"dates": "2026-12-25\n9999-12-31"}, now)
    degraded = conditions.get(st_["conditions"], conditions.DEGRADED)
    assert degraded["reason"] == "HolidaysUnavailable" and "9999-12-31" in degraded["message"]
    assert st_["scheduledReplicas"] == 0 and st_["decidedBy"]["layer"] == "holiday"
    assert ("Warning", "HolidaysUnavailable") in {(k, r) for k, r, _ in events}


def test_what_the_calendar_still_raises_is_a_calendar_error_with_an_event_once(monkeypatch):
    """A bug, or an input the checks did not foresee: Degraded/CalendarError naming the
    calendar's fields, a Warning Event once (not per retry), replicas left as they are."""

    def broken(*_: Any, **__: Any) -> Any:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(schedule, "Lookahead", broken)
    spec = {"schedulingConfig": [], "defaultReplica": 1}
    body = {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": "shop", "namespace": "ns"},
        "spec": {**spec, "container": {"image": "nginx:1.27", "port": 80}},
    }
    kube = FakeKube(body)
    operator = Operator(DESCRIPTION, TDSetReconciler, kube=kube)

    async def run() -> list[str]:
        reasons = []
        for _ in range(2):
            try:
                await operator._reconcile(kube.object(TDS_PATH) or {})
            except ReconcileError as exc:
                reasons.append(exc.reason)
            await operator.events.flush()
        return reasons

    assert asyncio.run(run()) == ["CalendarError", "CalendarError"]
    st_ = kube.object(TDS_PATH)["status"]
    degraded = conditions.get(st_["conditions"], conditions.DEGRADED)
    assert degraded["reason"] == "CalendarError" and "spec.overrides" in degraded["message"]
    assert [(k, r) for k, r, _ in kube.events()] == [("Warning", "CalendarError")]
    assert not kube.objects("deployments", "ns", "apps")
