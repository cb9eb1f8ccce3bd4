"""Entry point: `python -m operators.webserver [--namespace NS ...]`."""

from operators.webserver.description import DESCRIPTION
from operators.webserver.reconciler import WebServerReconciler
from shared.controller.builder import run

if __name__ == "__main__":
    run(DESCRIPTION, WebServerReconciler)
