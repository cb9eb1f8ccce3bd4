import os
import pwd
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shared.controller.options import Options, parse_options, split_namespaces
from shared.controller.runtime import operator_identity

REPO = Path(__file__).resolve().parents[2]


def test_defaults_watch_all_namespaces():
    opts = parse_options([], env={})
    assert opts == Options()
    assert opts.clusterwide and opts.metrics_port == 8443 and opts.probe_port == 8081
    # Secure by default, as controller-runtime's scaffold: HTTPS, TokenReview + SubjectAccessReview.
    assert opts.metrics_secure and opts.metrics_cert_dir == ""


def test_metrics_security_options():
    """Plain HTTP only when asked (development), then on the old port unless one is named."""
    plain = parse_options(["--metrics-secure=false"], env={})
    assert (plain.metrics_secure, plain.metrics_port) == (False, 8080)
    assert parse_options([], env={"METRICS_SECURE": "false"}).metrics_port == 8080
    assert parse_options(["--metrics-secure=false", "--metrics-port", "9"], env={}).metrics_port == 9
    assert parse_options([], env={"METRICS_SECURE": "false", "METRICS_PORT": "7"}).metrics_port == 7
    assert parse_options(["--metrics-secure"], env={"METRICS_SECURE": "false"}).metrics_secure
    opts = parse_options(["--metrics-cert-dir", "/certs"], env={"METRICS_CERT_DIR": "/elsewhere"})
    assert opts.metrics_cert_dir == "/certs"
    assert parse_options([], env={"METRICS_CERT_DIR": "/mounted"}).metrics_cert_dir == "/mounted"


def test_environment_is_read():
    env = {"WATCH_NAMESPACE": "a, b,,a", "METRICS_PORT": "9000", "HEALTH_PORT": "9001", "LOG_FORMAT": "json"}
    opts = parse_options([], env=env)
    assert opts.namespaces == ("a", "b")
    assert (opts.metrics_port, opts.probe_port, opts.log_format) == (9000, 9001, "json")
    assert not opts.clusterwide


def test_command_line_wins_over_environment():
    env = {"WATCH_NAMESPACE": "a"}
    assert parse_options(["-n", "x,y", "--namespace", "z"], env=env).namespaces == ("x", "y", "z")
    assert parse_options(["--all-namespaces"], env=env).clusterwide
    assert parse_options(["--metrics-port", "1234"], env={"METRICS_PORT": "9"}).metrics_port == 1234


def test_split_namespaces_keeps_order():
    assert split_namespaces(["b,a", " c ", "a"]) == ("b", "a", "c")


IDENTITY_PROBE = "from shared.controller.runtime import operator_identity; print(operator_identity())"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to switch UID")
@pytest.mark.slow  # a Python subprocess under another UID
def test_identity_for_a_uid_without_passwd_entry():
    """How containers run: a UID with no /etc/passwd entry and no USER in the environment.

    kopf's own detection (getpass.getuser) raises KeyError there; that crash-looped the images.
    """
    uid = 65532
    with pytest.raises(KeyError):
        pwd.getpwuid(uid)  # the premise: no entry on this machine either
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            sys.executable,
            "-c",
            IDENTITY_PROBE,
        ],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"uid{uid}@{socket.gethostname()}"


def test_identity_prefers_the_pod_name(monkeypatch):
    monkeypatch.setenv("POD_NAME", "webserver-operator-7d9-abcde")
    assert operator_identity() == "webserver-operator-7d9-abcde"


def test_max_concurrent_reconciles_option():
    assert parse_options([], env={}).max_concurrent_reconciles == 8
    # An operator's own default (its description's), under the environment and the flag.
    own64 = {"max_concurrent_reconciles": 64}
    assert parse_options([], env={}, defaults=own64).max_concurrent_reconciles == 64
    own = parse_options([], env={"MAX_CONCURRENT_RECONCILES": "3"}, defaults=own64)
    assert own.max_concurrent_reconciles == 3
    assert parse_options([], env={"MAX_CONCURRENT_RECONCILES": "3"}).max_concurrent_reconciles == 3
    cli = parse_options(["--max-concurrent-reconciles", "5"], env={"MAX_CONCURRENT_RECONCILES": "3"})
    assert cli.max_concurrent_reconciles == 5
    for bad in ("0", "-1", "x"):
        with pytest.raises(SystemExit):
            parse_options(["--max-concurrent-reconciles", bad], env={})


def test_the_metric_reports_the_limit_the_controllers_run_with():
    """controller_runtime_max_concurrent_reconciles is the option's value, applied to every
    managed controller, not the size of kopf's thread pool."""
    from shared.client.kube import KubeClient
    from shared.controller.runtime import Runtime
    from shared.controller.workqueue import Controller

    async def reconcile(body):
        return None

    runtime = Runtime(app="demo", controllers=("demo",), options=Options(max_concurrent_reconciles=3))
    controller = Controller("demo", reconcile, metrics=runtime.metrics)
    runtime.manage(controller, KubeClient())
    runtime.apply_options()
    assert controller.max_concurrent_reconciles == 3
    sample = runtime.metrics.registry.get_sample_value(
        "controller_runtime_max_concurrent_reconciles", {"controller": "demo"}
    )
    assert sample == 3


def test_kube_api_rate_limit_options():
    opts = parse_options([], env={})
    # No client-side limit by default, as controller-runtime; the burst applies once a QPS is set.
    assert (opts.kube_api_qps, opts.kube_api_burst) == (0.0, 100)
    env = {"KUBE_API_QPS": "20", "KUBE_API_BURST": "30"}
    assert parse_options([], env=env).kube_api_qps == 20.0
    assert parse_options([], env=env).kube_api_burst == 30
    cli = parse_options(["--kube-api-qps", "0.5", "--kube-api-burst", "2"], env=env)
    assert (cli.kube_api_qps, cli.kube_api_burst) == (0.5, 2)
    assert parse_options(["--kube-api-qps", "0", "--kube-api-burst", "0"], env={}).kube_api_qps == 0  # off
    assert parse_options(["--kube-api-burst", "0"], env={}).kube_api_burst == 0  # no limit to burst over
    for bad in (
        ["--kube-api-qps", "-1"],
        ["--kube-api-qps", "x"],
        ["--kube-api-qps", "5", "--kube-api-burst", "0"],
    ):
        with pytest.raises(SystemExit):
            parse_options(bad, env={})


def test_the_managed_clients_get_the_rate_limit_options():
    from shared.client.kube import KubeClient
    from shared.controller.runtime import Runtime
    from shared.controller.workqueue import Controller

    async def reconcile(body):
        return None

    runtime = Runtime(app="demo", controllers=("demo",), options=Options(kube_api_qps=7, kube_api_burst=9))
    kube = KubeClient()
    runtime.manage(Controller("demo", reconcile), kube)
    runtime.apply_options()
    assert kube.rate_limit == (7, 9)


def test_leader_election_is_off_unless_asked_for():
    opts = parse_options([], env={"POD_NAMESPACE": "ops"})
    assert not opts.leader_elect and opts.leader_election_namespace == ""


@pytest.mark.parametrize(
    ("argv", "env", "namespace"),
    [
        # In a pod: the downward API's namespace (the bundle sets POD_NAMESPACE and the flag).
        (["--leader-elect"], {"POD_NAMESPACE": "ops", "WATCH_NAMESPACE": "a"}, "ops"),
        (["--leader-elect=true"], {"POD_NAMESPACE": "ops"}, "ops"),
        ([], {"LEADER_ELECT": "true", "POD_NAMESPACE": "ops"}, "ops"),
        # On a host: the first watched namespace, where the operator's rules surely reach.
        (["--leader-elect", "-n", "b,a"], {}, "b"),
        (["--leader-elect"], {"WATCH_NAMESPACE": "a"}, "a"),
        # Named explicitly: wins over both.
        (["--leader-elect", "--leader-election-namespace", "x"], {"POD_NAMESPACE": "ops"}, "x"),
        (["--leader-elect"], {"LEADER_ELECTION_NAMESPACE": "y", "POD_NAMESPACE": "ops"}, "y"),
    ],
)
def test_the_lease_namespace(argv, env, namespace):
    opts = parse_options(argv, env=env)
    assert opts.leader_elect and opts.leader_election_namespace == namespace


def test_the_flag_turns_off_what_the_environment_turned_on():
    assert not parse_options(["--leader-elect=false"], env={"LEADER_ELECT": "1"}).leader_elect


def test_leader_election_without_a_namespace_is_refused_with_what_to_set(capsys):
    with pytest.raises(SystemExit):
        parse_options(["--leader-elect", "--all-namespaces"], env={})
    assert "--leader-election-namespace" in capsys.readouterr().err


def test_lease_name_and_durations():
    opts = parse_options(["--leader-elect"], env={"POD_NAMESPACE": "ops"})
    assert (opts.leader_election_id, opts.lease_duration, opts.renew_deadline, opts.retry_period) == (
        "",  # the Runtime makes it <app>-leader
        15.0,
        10.0,
        2.0,
    )
    env = {
        "POD_NAMESPACE": "ops",
        "LEADER_ELECTION_ID": "mine",
        "LEADER_ELECTION_LEASE_DURATION": "30",
        "LEADER_ELECTION_RENEW_DEADLINE": "20",
        "LEADER_ELECTION_RETRY_PERIOD": "4",
    }
    opts = parse_options(["--leader-elect", "--leader-election-retry-period", "5"], env=env)
    assert (opts.leader_election_id, opts.lease_duration, opts.renew_deadline, opts.retry_period) == (
        "mine",
        30.0,
        20.0,
        5.0,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--leader-election-lease-duration", "10"],  # not above the renew deadline
        ["--leader-election-renew-deadline", "2", "--leader-election-retry-period", "2"],
        ["--leader-election-retry-period", "x"],
        ["--leader-elect=maybe"],
    ],
)
def test_bad_leader_election_settings_are_refused(argv):
    with pytest.raises(SystemExit):
        parse_options(["--leader-elect", *argv], env={"POD_NAMESPACE": "ops"})


def test_without_leader_election_the_gate_is_readiness_alone():
    from shared.controller.runtime import Runtime

    runtime = Runtime(app="demo", controllers=("demo",))
    runtime.readiness.expect(1)
    assert not runtime.active()
    runtime.readiness.watch_started("pods@*")
    runtime.readiness.watch_listed("pods@*")
    assert runtime.active() and runtime.elector is None
