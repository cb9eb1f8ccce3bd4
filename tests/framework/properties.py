"""The suite's Hypothesis profiles, and how many examples a property test tries under each.

``full`` is what ``make test`` and CI run: every test tries the count it names (Hypothesis's 100
when it names none), no deadline (speed belongs to the benchmarks, not to a test on a busy
machine). ``dev`` is the inner loop's (``make unit``): a tenth of each count, at least one, on
the same settings otherwise. A test names its count as ``examples(300)``, never as a bare number,
so that the profile scales it; ``--hypothesis-profile=NAME`` picks the profile, ``full`` unless
asked. A profile registered with other ``max_examples`` scales every test the same way.
"""

from __future__ import annotations

from hypothesis import settings

FULL = "full"
DEV = "dev"
# Hypothesis's own default: the count of a test that names none, under the full profile.
FULL_EXAMPLES = 100

settings.register_profile(FULL, deadline=None, print_blob=True, max_examples=FULL_EXAMPLES)
settings.register_profile(DEV, settings.get_profile(FULL), max_examples=FULL_EXAMPLES // 10)


def examples(full: int) -> int:
    """The examples to try for a test that tries ``full`` under the full profile."""
    return max(1, full * settings.default.max_examples // FULL_EXAMPLES)
