"""An operator process's options: one table, from which the command line, the environment
fallback and the documentation's table are all made.

Each `Setting` is one row: its flag, its environment variable, how its text is read, its
default and its help. A flag given wins; else its environment variable when set and not empty;
else the default. A bad value in the environment is refused like a bad flag, naming the
variable. Rows without a flag are the variables read elsewhere in the process (the pod's name,
the clock offset of the tests); they are here so that the table lists every variable an
operator reads. `parse_options` returns `Options`, parsed before the operator is built.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from shared.api.clock import OFFSET_ENV
from shared.client import leader
from shared.client.kube import DEFAULT_BURST, DEFAULT_QPS
from shared.controller.kopf_adapter import RESYNC_PERIOD, RESYNC_PERIOD_ENV
from shared.controller.serving import (
    DEFAULT_BLIND_AFTER,
    DEFAULT_INSECURE_METRICS_PORT,
    DEFAULT_METRICS_PORT,
    DEFAULT_PROBE_PORT,
)
from shared.controller.workqueue import DEFAULT_MAX_CONCURRENT_RECONCILES

LOG_FORMATS = ("full", "json", "plain")
WATCH_FAILURE_TIMEOUT_ENV = "WATCH_FAILURE_TIMEOUT"  # seconds a watch may fail before /healthz does
N = TypeVar("N", int, float)


def at_least(minimum: N, convert: Callable[[str], N]) -> Callable[[str], N]:
    """An argparse type: a finite number (`int` or `float`, as `convert`) >= `minimum`."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not {'an integer' if convert is int else 'a number'}: {text!r}"
            ) from None
        if not minimum <= value < math.inf:
            raise argparse.ArgumentTypeError(f"must be a finite number >= {minimum:g}, not {text}")
        return value

    return parse


def boolean(text: str) -> bool:
    """An argparse type for Go-style booleans: `--flag`, `--flag=true`, `--flag=false`."""
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes", "on"):
        return True
    if value in ("", "0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


@dataclass(frozen=True)
class Setting:
    """One option: `flag` ("": environment only), `env` ("": flag only), `parse` of its text,
    `default` (shown as `shown` when it is computed), `help`; `kind` says how the flag is given."""

    flag: str
    env: str
    parse: Callable[[str], Any] | None
    default: Any
    help: str
    kind: Literal["value", "bool", "switch", "append", "env"] = "value"
    short: str = ""
    choices: tuple[str, ...] = ()
    shown: str = ""

    @property
    def dest(self) -> str:
        return (self.flag or self.env).lstrip("-").replace("-", "_").lower()


def _durations() -> Iterable[Setting]:
    for name, default, what in (
        ("lease-duration", leader.LEASE_DURATION, "how long standbys wait before taking an unrenewed Lease"),
        ("renew-deadline", leader.RENEW_DEADLINE, "how long the leader acts without a successful renewal"),
        ("retry-period", leader.RETRY_PERIOD, "how often the leader renews and standbys try"),
    ):
        env = f"LEADER_ELECTION_{name.replace('-', '_').upper()}"
        yield Setting(f"--leader-election-{name}", env, at_least(0.0, float), default, f"{what}, in seconds")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "--namespace",
        "WATCH_NAMESPACE",
        str,
        (),
        "namespace to watch (repeat or comma-separate); none: all",
        kind="append",
        short="-n",
        shown="all",
    ),
    Setting("--all-namespaces", "", None, False, "watch all namespaces", kind="switch", short="-A"),
    Setting(
        "--metrics-port",
        "METRICS_PORT",
        int,
        None,
        "port of /metrics",
        shown=f"{DEFAULT_METRICS_PORT} ({DEFAULT_INSECURE_METRICS_PORT} with --metrics-secure=false)",
    ),
    Setting(
        "--metrics-secure",
        "METRICS_SECURE",
        boolean,
        True,
        "serve /metrics over HTTPS, only to callers the API server authenticates and allows `get` "
        "on /metrics; false: plain HTTP to anyone, for development",
        kind="bool",
    ),
    Setting(
        "--metrics-cert-dir",
        "METRICS_CERT_DIR",
        str,
        "",
        "directory with tls.crt and tls.key for /metrics; without them a self-signed certificate "
        "is made at start",
    ),
    Setting("--health-port", "HEALTH_PORT", int, DEFAULT_PROBE_PORT, "port of /healthz and /readyz"),
    Setting("--log-format", "LOG_FORMAT", str, "plain", "log line format", choices=LOG_FORMATS),
    Setting("--verbose", "", None, False, "log at debug level", kind="switch", short="-v"),
    Setting(
        "--max-concurrent-reconciles",
        "MAX_CONCURRENT_RECONCILES",
        at_least(1, int),
        DEFAULT_MAX_CONCURRENT_RECONCILES,
        "reconcile passes per controller at once",
    ),
    Setting(
        "--kube-api-qps",
        "KUBE_API_QPS",
        at_least(0.0, float),
        DEFAULT_QPS,
        "client-side limit of API requests per second, 0 = none (as controller-runtime)",
    ),
    Setting(
        "--kube-api-burst",
        "KUBE_API_BURST",
        at_least(0, int),
        DEFAULT_BURST,
        "API requests at once above --kube-api-qps",
    ),
    Setting(
        "--leader-elect",
        "LEADER_ELECT",
        boolean,
        False,
        "elect a leader on a Lease, so that replicas can stand by; only the leader reconciles",
        kind="bool",
    ),
    Setting(
        "--leader-election-namespace",
        "LEADER_ELECTION_NAMESPACE",
        str,
        "",
        "namespace of the Lease",
        shown="$POD_NAMESPACE, else the first watched namespace",
    ),
    Setting("--leader-election-id", "LEADER_ELECTION_ID", str, "", "name of the Lease", shown="<app>-leader"),
    *_durations(),
    Setting("", "POD_NAMESPACE", str, "", "the pod's namespace (downward API): the Lease's", kind="env"),
    Setting("", "POD_NAME", str, "", "the pod's name (downward API): the process' identity", kind="env"),
    Setting(
        "",
        WATCH_FAILURE_TIMEOUT_ENV,
        float,
        DEFAULT_BLIND_AFTER,
        "seconds a watch may fail before /healthz does",
        kind="env",
    ),
    Setting(
        "", RESYNC_PERIOD_ENV, float, RESYNC_PERIOD, "seconds between relists of every watch", kind="env"
    ),
    Setting("", OFFSET_ENV, float, 0.0, "seconds added to the clock (tests of schedules only)", kind="env"),
)


@dataclass(frozen=True)
class Options:
    namespaces: tuple[str, ...] = ()
    metrics_port: int = DEFAULT_METRICS_PORT
    probe_port: int = DEFAULT_PROBE_PORT
    log_format: str = "plain"
    verbose: bool = False
    max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES
    kube_api_qps: float = DEFAULT_QPS
    kube_api_burst: int = DEFAULT_BURST
    leader_elect: bool = False
    leader_election_namespace: str = ""  # resolved by parse_options when leader_elect
    leader_election_id: str = ""  # "": leases.lease_name(app)
    lease_duration: float = leader.LEASE_DURATION
    renew_deadline: float = leader.RENEW_DEADLINE
    retry_period: float = leader.RETRY_PERIOD
    metrics_secure: bool = True  # HTTPS + TokenReview/SubjectAccessReview on /metrics
    metrics_cert_dir: str = ""  # tls.crt + tls.key there, else a self-signed certificate

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def split_namespaces(values: Iterable[str]) -> tuple[str, ...]:
    """Flatten comma-separated namespace lists, dropping blanks and duplicates, keeping order."""
    seen: dict[str, None] = {}
    for value in values:
        for ns in value.split(","):
            if ns.strip():
                seen.setdefault(ns.strip(), None)
    return tuple(seen)


def _default_text(s: Setting) -> str:
    if s.shown:
        return s.shown
    if isinstance(s.default, bool):
        return str(s.default).lower()
    if isinstance(s.default, float):
        return f"{s.default:g}"
    return str(s.default) if s.default not in ("", None) else ""


def _own(s: Setting, defaults: Mapping[str, Any]) -> Setting:
    """`s` with an operator's own default (`defaults`, by `dest`), if it has one."""
    return dataclasses.replace(s, default=defaults[s.dest]) if s.dest in defaults else s


def parser(prog: str = "", defaults: Mapping[str, Any] | None = None) -> argparse.ArgumentParser:
    """The command line of `SETTINGS` (no defaults: a flag not given is `None`); `defaults`: an
    operator's own, by `dest`, for the help text."""
    made = argparse.ArgumentParser(prog=prog, description=f"Run the {prog} operator.")
    for s in SETTINGS:
        if s.kind == "env":
            continue
        names = [n for n in (s.short, s.flag) if n]
        default = _default_text(_own(s, defaults or {}))
        fallback = " / ".join(x for x in (f"${s.env}" if s.env else "", default) if x)
        text = f"{s.help} (default: {fallback})" if fallback else s.help
        if s.kind == "switch":
            made.add_argument(*names, dest=s.dest, action="store_true", help=text)
        elif s.kind == "append":
            made.add_argument(*names, dest=s.dest, action="append", default=None, help=text)
        elif s.kind == "bool":
            made.add_argument(*names, dest=s.dest, type=s.parse or str, nargs="?", const=True, help=text)
        else:
            made.add_argument(*names, dest=s.dest, type=s.parse or str, choices=s.choices or None, help=text)
    return made


def values(
    argv: Sequence[str] | None,
    env: Mapping[str, str],
    prog: str = "",
    defaults: Mapping[str, Any] | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    """Each flag's value: given, else its environment variable's (parsed), else its default (the
    operator's own in `defaults`, by `dest`, else the table's)."""
    made = parser(prog, defaults)
    args = vars(made.parse_args(list(argv) if argv is not None else None))
    found: dict[str, Any] = {}
    for s in SETTINGS:
        if s.kind == "env":
            continue
        s = _own(s, defaults or {})  # noqa: PLW2901 -- the same setting, its default the operator's
        given = args.get(s.dest)
        if given is not None and not (s.kind == "switch" and given is False):
            found[s.dest] = given
            continue
        raw = env.get(s.env, "") if s.env else ""
        if not raw:
            found[s.dest] = given if s.kind == "switch" else s.default
        elif s.kind == "append":
            found[s.dest] = [raw]
        else:
            try:
                found[s.dest] = s.parse(raw) if s.parse is not None else raw
            except (ValueError, argparse.ArgumentTypeError) as exc:
                made.error(f"${s.env}: {exc}")
            if s.choices and found[s.dest] not in s.choices:
                made.error(f"${s.env}: {raw!r} is not one of {', '.join(s.choices)}")
    return made, found


def parse_options(
    argv: Sequence[str] | None,
    env: Mapping[str, str] | None = None,
    prog: str = "",
    defaults: Mapping[str, Any] | None = None,
) -> Options:
    """The options of `argv` (None: the command line) over the environment `env` (None: the
    process') over `defaults` (an operator's own, by `dest`); a bad value or combination exits
    with the parser's usage and error."""
    env = os.environ if env is None else env
    made, v = values(argv, env, prog, defaults)
    if v["kube_api_qps"] > 0 and v["kube_api_burst"] < 1:
        made.error("--kube-api-burst must be at least 1 when --kube-api-qps is not 0")
    namespaces = () if v["all_namespaces"] else split_namespaces(v["namespace"])
    lease_namespace = ""
    if v["leader_elect"]:
        if errors := leader.duration_errors(
            v["leader_election_lease_duration"],
            v["leader_election_renew_deadline"],
            v["leader_election_retry_period"],
        ):
            made.error("; ".join(errors))
        # The pod's own namespace, as controller-runtime's in-cluster default; on a host, the
        # first watched namespace: where the operator's RBAC surely reaches.
        lease_namespace = (
            v["leader_election_namespace"] or env.get("POD_NAMESPACE") or next(iter(namespaces), "")
        )
        if not lease_namespace:
            made.error(
                "--leader-elect needs a namespace for the Lease: set --leader-election-namespace "
                "(LEADER_ELECTION_NAMESPACE), or POD_NAMESPACE (the downward API does in a pod), or "
                "watch a namespace (--namespace)"
            )
    metrics_port = v["metrics_port"]
    if metrics_port is None:
        metrics_port = DEFAULT_METRICS_PORT if v["metrics_secure"] else DEFAULT_INSECURE_METRICS_PORT
    return Options(
        namespaces,
        metrics_port,
        v["health_port"],
        v["log_format"],
        v["verbose"],
        max_concurrent_reconciles=v["max_concurrent_reconciles"],
        kube_api_qps=v["kube_api_qps"],
        kube_api_burst=v["kube_api_burst"],
        leader_elect=v["leader_elect"],
        leader_election_namespace=lease_namespace,
        leader_election_id=v["leader_election_id"],
        lease_duration=v["leader_election_lease_duration"],
        renew_deadline=v["leader_election_renew_deadline"],
        retry_period=v["leader_election_retry_period"],
        metrics_secure=v["metrics_secure"],
        metrics_cert_dir=v["metrics_cert_dir"],
    )


def markdown() -> str:
    """The table of `SETTINGS` for the documentation."""
    rows = ["| flag | environment | default | what |", "|---|---|---|---|"]
    for s in SETTINGS:
        flag = ", ".join(f"`{n}`" for n in (s.short, s.flag) if n) or "(none)"
        env = f"`{s.env}`" if s.env else ""
        default = _default_text(s)
        what = s.help + (f" (one of {', '.join(s.choices)})" if s.choices else "")
        rows.append(f"| {flag} | {env} | {f'`{default}`' if default else ''} | {what} |")
    return "\n".join(rows) + "\n"


def read(env_name: str, env: Mapping[str, str] | None = None) -> Any:
    """The value of an environment-only setting: its variable's, parsed, else its default."""
    (s,) = [s for s in SETTINGS if s.env == env_name]
    raw = (os.environ if env is None else env).get(env_name, "")
    return s.parse(raw) if raw and s.parse is not None else s.default
