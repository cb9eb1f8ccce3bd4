import logging

import kopf

from shared.ownership import managed_selector
from shared.runtime import PROGRESS_PREFIX, Options, configure_settings, parse_options, split_namespaces


def test_defaults_watch_all_namespaces():
    opts = parse_options([], env={})
    assert opts == Options()
    assert opts.clusterwide and opts.metrics_port == 8080 and opts.probe_port == 8081


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


def test_configure_settings():
    settings = kopf.OperatorSettings()
    configure_settings(settings, "webserver", ["pods", "services"])
    assert settings.peering.standalone is True
    assert settings.scanning.disabled is True
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert settings.persistence.progress_storage.prefix == PROGRESS_PREFIX
    assert settings.posting.level == logging.WARNING
    assert dict(settings.watching.label_selectors.items()) != {}
    selectors = set(settings.watching.label_selectors.values())
    assert selectors == {managed_selector("webserver")}
