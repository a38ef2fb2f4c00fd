"""The ``tatara`` operator CLI.

Subcommands:
    local          start a local control plane (built on first use), print its
                   kubeconfig, and keep it running until Ctrl-C or SIGTERM.
    up             the whole product locally: control plane, CRDs, both reconcilers, the Flux and
                   Job runner stand-ins, NATS and an HTTP receiver for the exports, and
                   ``examples/``, shown live until they settle; until Ctrl-C. On a cluster named
                   by ``--kubeconfig``/``$KUBECONFIG``: no stand-in, only missing CRDs.
    ps             the PID tree of Processes (phase, age), like ``ps -ef --forest``.
    signal         validate a signal and write it as a Process's ``tatara.pleme.io/signal``.
    compile        tatara-lisp → Process YAML on stdout.
    crds           print every CRD tatara installs.
    control-plane  ``build`` the local control-plane binaries (no-op when cached) and
                   print where they are.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from types import FrameType

from shared import __version__
from tools.controlplane import BuildError, ControlPlaneError, LocalControlPlane, Toolchain
from tools.opscli import add_subcommands
from tools.up import add_subcommand as add_up


def _cmd_build(_: argparse.Namespace) -> int:
    toolchain = Toolchain.default()
    started = time.monotonic()
    cached = toolchain.is_built()
    path = toolchain.ensure_built()
    note = "cached" if cached else f"built in {time.monotonic() - started:.0f} s"
    print(f"control plane binaries ({note}): {path}")
    return 0


class _Stop(Exception):
    """Raised in the main thread by the SIGTERM / SIGINT handler of ``tatara local``."""


def _raise_stop(signum: int, _: FrameType | None) -> None:
    # Raising is the one thing a Python signal handler can do safely at any point; setting a
    # threading.Event from it can deadlock when the signal lands inside Event.wait's own lock.
    raise _Stop(signal.Signals(signum).name)


def _cmd_local(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    plane = LocalControlPlane(controller_manager=not args.no_controller_manager)
    started = time.monotonic()
    try:
        plane.start()
        print(f"local control plane ready in {time.monotonic() - started:.1f} s: {plane.server}", flush=True)
        print(f"export KUBECONFIG={plane.kubeconfig}", flush=True)
        if args.exit_when_ready:
            return 0
        print("Ctrl-C stops it and removes its files.", flush=True)
        while True:
            time.sleep(3600)
    except _Stop:
        return 0
    finally:
        # a second signal must not interrupt the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        plane.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (1 on a build or start failure)."""
    parser = argparse.ArgumentParser(prog="tatara", description="tatara operator CLI")
    parser.add_argument("--version", action="version", version=f"tatara {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    local = sub.add_parser("local", help="run a local kube-apiserver + etcd (+ controller-manager)")
    local.add_argument("--no-controller-manager", action="store_true", help="skip kube-controller-manager")
    local.add_argument("--exit-when-ready", action="store_true", help="stop again as soon as it is ready")
    local.set_defaults(func=_cmd_local)
    add_subcommands(sub)
    add_up(sub)
    cp = sub.add_parser("control-plane", help="manage the local control-plane binaries")
    cp_sub = cp.add_subparsers(dest="action", required=True)
    cp_sub.add_parser("build", help="build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl "
                                    "and etcd if missing").set_defaults(func=_cmd_build)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except (BuildError, ControlPlaneError) as err:
        print(f"tatara: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
