"""Entry point: `python -m operators.tdset [--namespace NS ...]`."""

from operators.tdset.description import DESCRIPTION
from operators.tdset.reconciler import TDSetReconciler
from shared.controller.builder import run

if __name__ == "__main__":
    run(DESCRIPTION, TDSetReconciler)
