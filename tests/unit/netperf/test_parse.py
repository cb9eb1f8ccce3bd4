"""The parser on real termination messages captured with ``python -m tools.bench.capture_netperf``.

The fixtures are what the operator's client command wrote over a veth pair on this machine
(netperf 2.7.0 from Debian); ``tcp_crr`` and ``udp_rr`` are the same command run over loopback
(``--loopback``: same netperf, same format, loopback figures). Cases that cannot be provoked
on demand (throughput 0 from colliding data ports, a dropped selector) are made from a real
capture by one edit each, named in the test.
"""

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.netperf import desired
from operators.netperf import parse as parsing
from operators.netperf.parse import KEYS, ParseError, parse, stats
from operators.netperf.schema import MAX_RUNS
from tests.framework.properties import examples

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def values(text: str, key: str) -> list[float]:
    return [float(v) for v in re.findall(rf"^{key}=(.*)$", text, re.M)]


def test_tcp_stream_in_bits_per_second_with_statistics():
    text = fixture("tcp_stream")
    result = parse(text, "TCP_STREAM", 3)
    mbits = values(text, "THROUGHPUT")
    assert result.throughput_bits is not None
    assert list(result.throughput_bits.samples) == [m * 1e6 for m in mbits]
    assert result.speed_bits_per_sec == pytest.approx(sum(mbits) / 3 * 1e6)
    assert result.throughput_bits.ci95_low < result.speed_bits_per_sec < result.throughput_bits.ci95_high
    assert result.retransmits == sum(values(text, "LOCAL_TRANSPORT_RETRANS"))
    assert result.transactions is None and not result.latency_seconds


def test_tcp_rr_transactions_and_latency_in_seconds():
    text = fixture("tcp_rr")
    result = parse(text, "TCP_RR", 3)
    assert result.throughput_bits is None and result.speed_bits_per_sec is None
    assert result.transactions is not None
    assert list(result.transactions.samples) == values(text, "TRANSACTION_RATE")
    for name, key in (("mean", "MEAN_LATENCY"), ("p50", "P50_LATENCY"), ("p99", "P99_LATENCY")):
        assert result.latency_seconds[name] == pytest.approx(sum(values(text, key)) / 3 / 1e6)
    assert 0 < result.latency_seconds["p50"] <= result.latency_seconds["p99"] < 1


@pytest.mark.parametrize(("test_type", "protocol"), [("TCP_CRR", "TCP"), ("UDP_RR", "UDP")])
def test_crr_and_udp_rr_transactions_and_latency_percentiles(test_type, protocol):
    text = fixture(test_type.lower())
    assert set(values(text, "SAMPLE")) == {0, 1, 2} and f"PROTOCOL={protocol}" in text
    result = parse(text, test_type, 3)
    assert result.throughput_bits is None and result.speed_bits_per_sec is None
    assert result.transactions is not None
    assert list(result.transactions.samples) == values(text, "TRANSACTION_RATE")
    assert result.transactions.ci95_low <= result.transactions.mean <= result.transactions.ci95_high
    for name, key in (("mean", "MEAN_LATENCY"), ("p50", "P50_LATENCY"), ("p90", "P90_LATENCY")):
        assert result.latency_seconds[name] == pytest.approx(sum(values(text, key)) / 3 / 1e6)
    assert 0 < result.latency_seconds["p50"] <= result.latency_seconds["p99"] < 1
    # CRR's retransmission counter would be one connection's of thousands; UDP has none.
    assert result.retransmits is None
    assert "LOCAL_TRANSPORT_RETRANS" not in KEYS[test_type]


def test_rr_types_ask_for_their_keys_and_take_the_message_size_as_request_and_response():
    for test_type in ("TCP_RR", "TCP_CRR", "UDP_RR"):
        argv = desired.netperf_argv({"testType": test_type, "messageSize": 64}, "10.0.0.1")
        assert argv[argv.index("-t") + 1] == test_type
        assert argv[argv.index("-k") + 1] == ",".join(KEYS[test_type])
        assert argv[argv.index("-r") + 1] == "64,64" and "-m" not in argv


def test_a_udp_rr_output_is_not_a_tcp_crr_result():
    with pytest.raises(ParseError, match="used UDP, not TCP"):
        parse(fixture("udp_rr"), "TCP_CRR", 3)
    with pytest.raises(ParseError, match="unexpected THROUGHPUT_UNITS 'Trans/s'"):
        parse(fixture("udp_rr"), "UDP_STREAM", 3)


def test_parallel_streams_sum_per_sample_and_keep_each_streams_own_samples():
    text = fixture("tcp_stream_parallel")  # 3 samples x 4 streams started together
    result = parse(text, "TCP_STREAM", 3, parallel=4)
    per_run = [v * 1e6 for v in values(text, "THROUGHPUT")]  # sample-major, stream-minor
    sums = [math.fsum(per_run[i * 4 : i * 4 + 4]) for i in range(3)]
    assert result.throughput_bits is not None
    assert list(result.throughput_bits.samples) == pytest.approx(sums)
    assert result.speed_bits_per_sec == pytest.approx(sum(sums) / 3)
    # The interval is over the sums' samples, not over the 12 single-stream figures.
    assert result.throughput_bits == stats(list(result.throughput_bits.samples))
    assert len(result.streams) == 4
    for j, stream in enumerate(result.streams):
        assert list(stream.samples) == pytest.approx(per_run[j::4])
    assert math.fsum(s.mean for s in result.streams) == pytest.approx(result.speed_bits_per_sec)
    assert result.retransmits == sum(values(text, "LOCAL_TRANSPORT_RETRANS"))


def test_parallel_output_must_have_every_stream_of_every_sample():
    text = fixture("tcp_stream_parallel")
    with pytest.raises(ParseError, match="expected 3 samples of 5 streams, got 12 outputs"):
        parse(text, "TCP_STREAM", 3, parallel=5)
    # edit: the last sample's stream 3 missing (its process's output lost)
    cut = text[: text.index("SAMPLE=2\nSTREAM=3")]
    with pytest.raises(ParseError, match="expected 3 samples of 4 streams, got 11 outputs"):
        parse(cut, "TCP_STREAM", 3, parallel=4)
    with pytest.raises(ParseError, match="has no STREAM= line"):
        parse(fixture("tcp_stream"), "TCP_STREAM", 3, parallel=2)
    # edit: stream 2 of sample 1 failed
    failed = text.replace("SAMPLE=1\nSTREAM=2\nEXIT=0", "SAMPLE=1\nSTREAM=2\nEXIT=255", 1)
    with pytest.raises(ParseError, match="run 1 exited with 255"):
        parse(failed, "TCP_STREAM", 3, parallel=4)


def test_udp_stream_reports_received_throughput_and_no_retransmits():
    text = fixture("udp_stream")
    result = parse(text, "UDP_STREAM", 3)
    assert result.throughput_bits is not None
    assert result.throughput_bits.mean == pytest.approx(sum(values(text, "THROUGHPUT")) / 3 * 1e6)
    assert result.retransmits is None


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("no_server", ["exited with 255", "are you sure there is a netserver listening"]),
        ("unresolvable", ["exited with 255", "could not resolve"]),
    ],
)
def test_netperf_failures_carry_the_raw_output(name, fragments):
    with pytest.raises(ParseError) as err:
        parse(fixture(name), "TCP_STREAM", 2)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_zero_throughput_is_an_error():
    # edit: THROUGHPUT of run 1 set to 0.00, what colliding data ports (-- -P N) produce
    text = re.sub(r"(SAMPLE=1\nEXIT=0\nTHROUGHPUT=)[0-9.]+", r"\g<1>0.00", fixture("tcp_stream"))
    with pytest.raises(ParseError, match=r"run 1 reports throughput 0\.00"):
        parse(text, "TCP_STREAM", 3)


def test_a_dropped_selector_is_an_error():
    # edit: a key removed, as netperf drops an unknown selector in a comma list silently
    text = fixture("tcp_rr").replace("P99_LATENCY=175\n", "", 1)
    with pytest.raises(ParseError, match="lacks P99_LATENCY"):
        parse(text, "TCP_RR", 3)


def test_wrong_protocol_missing_samples_and_garbage():
    with pytest.raises(ParseError, match="used TCP, not UDP"):
        parse(fixture("tcp_stream"), "UDP_STREAM", 3)
    with pytest.raises(ParseError, match="lacks LOCAL_TRANSPORT_RETRANS"):
        parse(fixture("udp_stream"), "TCP_STREAM", 3)
    with pytest.raises(ParseError, match="expected 4 samples, got 3"):
        parse(fixture("tcp_stream"), "TCP_STREAM", 4)
    with pytest.raises(ParseError, match="no SAMPLE= block"):
        parse("Error: something else entirely", "TCP_STREAM", 1)
    with pytest.raises(ParseError, match="THROUGHPUT is not a number"):
        parse(fixture("tcp_stream").replace("THROUGHPUT=9776.46", "THROUGHPUT=fast"), "TCP_STREAM", 3)


def test_raw_text_in_errors_is_truncated():
    text = "SAMPLE=0\nEXIT=1\n" + "x" * 5000
    with pytest.raises(ParseError) as err:
        parse(text, "TCP_STREAM", 1)
    assert len(str(err.value)) < 1300 and "more characters" in str(err.value)


def test_extra_lines_are_ignored():
    text = fixture("tcp_stream").replace("EXIT=0\n", "EXIT=0\nwarning: something odd happened\n")
    assert parse(text, "TCP_STREAM", 3).throughput_bits is not None


@given(st.lists(st.floats(1, 1e11), min_size=2, max_size=10))
def test_confidence_interval_contains_the_mean_and_shrinks_with_agreement(xs):
    s = stats(xs)
    assert s.ci95_low <= s.mean <= s.ci95_high
    assert s.stddev >= 0
    same = stats([xs[0]] * len(xs))
    assert math.isclose(same.ci95_low, same.ci95_high, rel_tol=1e-9)


def test_stats_of_known_values():
    s = stats([1.0, 2.0, 3.0])
    assert (s.mean, s.stddev) == (2.0, 1.0)
    assert s.ci95_high - s.mean == pytest.approx(4.303 / math.sqrt(3))


def test_the_longest_message_fits_the_termination_message():
    """Worst case: TCP_RR, the maximum samples, every value as long as netperf prints it; with
    parallel streams (STREAM tests), samples x parallel outputs with their STREAM= lines."""
    longest = max(KEYS.values(), key=lambda keys: len("".join(keys)))
    sample = "SAMPLE=9\nEXIT=0\n" + "".join(f"{k}={'9' * 12}\n" for k in longest)
    assert len(sample.encode()) * 10 < 4096
    streams = max((KEYS[t] for t in ("TCP_STREAM", "UDP_STREAM")), key=lambda keys: len("".join(keys)))
    run = "SAMPLE=9\nSTREAM=7\nEXIT=0\n" + "".join(f"{k}={'9' * 12}\n" for k in streams)
    assert len(run.encode()) * MAX_RUNS < 4096
    assert "-k" in desired.netperf_argv({"testType": "TCP_RR"}, "10.0.0.1")


# -- any termination message ------------------------------------------------------------------
# The client's termination message is written by its image, which a Netperf may name: any text
# up to the kubelet's 4096 bytes. Parsing answers or raises ParseError (InvalidResult), never
# anything else, for every test type and sample/stream count the schema admits.

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        ["1e308", "1.7e308", "1e300", "1e15", "1e16", "-1", "0", "5e-324", "1_000", "²", "٣", "NaN"]
    ),
    st.integers(-(10**30), 10**30).map(str),
    st.text(max_size=6),
)
KEY_NAMES = st.sampled_from(
    sorted({k for keys in parsing.KEYS.values() for k in keys} | {"EXIT", "STREAM", "SAMPLE"})
)
UNITS = st.sampled_from([*parsing.BITS_PER_UNIT, "Trans/s", "bogus"])


@st.composite
def termination_messages(draw: st.DrawFn, test_type: str, samples: int, parallel: int) -> str:
    blocks = []
    for i in range(draw(st.integers(0, samples * parallel + 1))):
        lines = [f"SAMPLE={draw(st.one_of(st.just(str(i % samples)), NUMBERS))}"]
        if parallel > 1:
            lines.append(f"STREAM={draw(st.one_of(st.just(str(i // samples)), NUMBERS))}")
        lines.append(f"EXIT={draw(st.one_of(st.just('0'), NUMBERS))}")
        for key in parsing.KEYS[test_type]:
            if draw(st.integers(0, 9)) == 0:
                continue  # a dropped selector
            if key == "THROUGHPUT_UNITS":
                lines.append(f"{key}={draw(UNITS)}")
            elif key == "PROTOCOL":
                lines.append(f"{key}={draw(st.sampled_from(['TCP', 'UDP']))}")
            else:
                lines.append(f"{key}={draw(NUMBERS)}")
        lines += draw(st.lists(st.builds("{}={}".format, KEY_NAMES, NUMBERS), max_size=2))
        blocks.append("\n".join(lines))
    return draw(st.sampled_from(["", "warning\n"])) + "\n".join(blocks)


@settings(max_examples=examples(400), deadline=None)
@given(data=st.data(), test_type=st.sampled_from(sorted(parsing.KEYS)), samples=st.integers(1, 4))
def test_any_termination_message_is_a_result_or_a_parse_error(data, test_type, samples):
    parallel = 1 if test_type in parsing.RR_TYPES else data.draw(st.integers(1, 3))
    message = data.draw(termination_messages(test_type, samples, parallel))
    try:
        result = parsing.parse(message, test_type, samples, parallel)
    except parsing.ParseError:
        return
    figure = result.throughput_bits if result.throughput_bits is not None else result.transactions
    assert figure is not None
    assert all(math.isfinite(v) for v in (figure.mean, figure.stddev, figure.ci95_low, figure.ci95_high))
