"""The options table: every environment variable the operators read is one of its rows, and
each flag's environment variable is its fallback."""

import ast
import pathlib

import pytest

from shared.controller import options
from shared.controller.options import SETTINGS, parse_options

REPO = pathlib.Path(__file__).resolve().parents[2]


def _constants() -> dict[str, str]:
    """Module-level string constants named *_ENV, by name."""
    found: dict[str, str] = {}
    for path in [*REPO.joinpath("shared").rglob("*.py"), *REPO.joinpath("operators").rglob("*.py")]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.endswith("_ENV"):
                        found[target.id] = str(node.value.value)
    return found


def _read_variables() -> set[str]:
    """The variables read with `<environ or env>.get(NAME)` in shared/ (the operators' own
    modules read none: their `env` is a container's, in a spec)."""
    constants, names = _constants(), set()
    for path in REPO.joinpath("shared").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = ast.unparse(node.func.value)
            if node.func.attr != "get" or not (
                "environ" in owner or owner in ("env", "(os.environ if env is None else env)")
            ):
                continue
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
            elif node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in constants:
                names.add(constants[node.args[0].id])
    return names


def test_every_variable_the_operators_read_is_in_the_table():
    read = _read_variables()
    assert {"WATCH_RESYNC_PERIOD", "POD_NAME", "OPERATOR_CLOCK_OFFSET"} <= read
    # The API client's in-cluster detection is the Kubernetes convention, not an option.
    assert read - {"KUBERNETES_SERVICE_HOST", "POD_ID"} <= {s.env for s in SETTINGS}


FIELDS = {
    "health_port": "probe_port",
    "leader_election_lease_duration": "lease_duration",
    "leader_election_renew_deadline": "renew_deadline",
    "leader_election_retry_period": "retry_period",
}
# A value each takes (the election's durations must stay ordered, so each its own).
VALUES = {"LEADER_ELECTION_LEASE_DURATION": "30", "LEADER_ELECTION_RENEW_DEADLINE": "5", "LOG_FORMAT": "json"}
VALUED = [s for s in SETTINGS if s.flag and s.env and s.kind == "value" and s.dest != "metrics_port"]


@pytest.mark.parametrize("setting", VALUED, ids=[s.flag for s in VALUED])
def test_a_flag_falls_back_on_its_variable_then_its_default(setting):
    value = VALUES.get(setting.env, "1" if setting.parse is not str else "x")
    elect = ["--leader-elect"] if setting.env.startswith("LEADER_ELECTION_") else []
    name = FIELDS.get(setting.dest, setting.dest)
    from_env = parse_options(elect, env={setting.env: value, "POD_NAMESPACE": "ops"})
    assert getattr(from_env, name) == setting.parse(value)
    if name != "leader_election_namespace":  # resolved: $POD_NAMESPACE when not set
        assert getattr(parse_options(elect, env={"POD_NAMESPACE": "ops"}), name) == setting.default


def test_a_bad_value_in_the_environment_is_refused_naming_the_variable(capsys):
    with pytest.raises(SystemExit):
        parse_options([], env={"MAX_CONCURRENT_RECONCILES": "0"})
    assert "$MAX_CONCURRENT_RECONCILES" in capsys.readouterr().err


def test_the_docs_table_has_a_row_per_setting():
    table = options.markdown().splitlines()
    assert len(table) == 2 + len(SETTINGS)
    assert all(f"`{s.env}`" in row for s, row in zip(SETTINGS, table[2:], strict=True) if s.env)
