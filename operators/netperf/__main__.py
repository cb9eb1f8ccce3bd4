"""Entry point: `python -m operators.netperf [--namespace NS ...]`."""

from operators.netperf.description import DESCRIPTION
from operators.netperf.reconciler import NetperfReconciler
from shared.controller.builder import run

if __name__ == "__main__":
    run(DESCRIPTION, NetperfReconciler)
