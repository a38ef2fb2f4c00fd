"""The sandbox holder's setup script (mounts, the node's network, the Service VIP's DNAT, ready, then pause as
PID 1) and how commands and paths are mapped into a running sandbox; nothing is executed."""

from __future__ import annotations

import ipaddress
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.controlplane.nodenet import API_NODE_PORT, NODE_BRIDGE, NODE_CIDR, NODE_IP, SERVICE_VIP
from tools.controlplane.sandbox import Sandbox, setup_script


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path / "run dir"  # a space: every path must survive the shell's word splitting


def _commands(script: str) -> list[list[str]]:
    return [shlex.split(line) for line in script.splitlines() if line.strip()]


def _index(commands: list[list[str]], command: list[str]) -> int:
    assert command in commands, f"{shlex.join(command)!r} is not in the script"
    return commands.index(command)


def _mounts(commands: list[list[str]]) -> dict[str, list[str]]:
    """Mount target -> the whole mount command (the target is the last word)."""
    return {cmd[-1]: cmd for cmd in commands if cmd[0] == "mount"}


def _option(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_the_script_is_valid_sh_and_stops_at_the_first_error(work: Path) -> None:
    script = setup_script(work, Path("/opt/pause"), work / "ready")
    assert script.endswith("\n")
    assert _commands(script)[0] == ["set", "-eu"]
    sh = shutil.which("sh")
    if sh is None:
        pytest.skip("no sh")
    parsed = subprocess.run([sh, "-n", "-c", script], capture_output=True, text=True, check=False, timeout=10)
    assert parsed.returncode == 0, parsed.stderr


@pytest.mark.parametrize("target", ["/run", "/var/log"])
def test_run_and_var_log_are_fresh_tmpfs(work: Path, target: str) -> None:
    mount = _mounts(_commands(setup_script(work, Path("/opt/pause"), work / "ready")))[target]
    assert _option(mount, "-t") == "tmpfs"


def test_var_lib_is_an_overlay_on_the_hosts_var_lib_writing_into_a_tmpfs_under_the_work_dir(work: Path) -> None:
    commands = _commands(setup_script(work, Path("/opt/pause"), work / "ready"))
    mounts = _mounts(commands)
    overlay = mounts["/var/lib"]
    assert _option(overlay, "-t") == "overlay"
    options = dict(opt.split("=", 1) for opt in _option(overlay, "-o").split(","))
    assert set(options) == {"lowerdir", "upperdir", "workdir"}
    assert options["lowerdir"] == "/var/lib"  # the host's /var/lib shows through unchanged
    upper, workdir = Path(options["upperdir"]), Path(options["workdir"])
    assert upper != workdir
    assert upper.is_relative_to(work)
    assert workdir.is_relative_to(work)

    # both live on one tmpfs mounted under the work dir (overlayfs needs them on the same file system) ...
    tmpfs = [Path(target) for target, cmd in mounts.items()
             if _option(cmd, "-t") == "tmpfs" and Path(target).is_relative_to(work)]
    assert len(tmpfs) == 1
    assert upper.parent == tmpfs[0]
    assert workdir.parent == tmpfs[0]
    # ... which is in place, with both folders made, before the overlay is mounted
    overlay_at = commands.index(overlay)
    assert commands.index(mounts[str(tmpfs[0])]) < overlay_at
    made = [Path(p) for cmd in commands[:overlay_at] if cmd[0] == "mkdir" for p in cmd[1:] if p != "-p"]
    assert upper in made
    assert workdir in made


def test_the_network_is_lo_and_the_node_bridge_with_the_node_ip_and_no_route_out(work: Path) -> None:
    commands = _commands(setup_script(work, Path("/opt/pause"), work / "ready"))
    prefix = ipaddress.IPv4Network(NODE_CIDR).prefixlen
    assert _index(commands, ["ip", "link", "set", "lo", "up"]) >= 0
    added = _index(commands, ["ip", "link", "add", NODE_BRIDGE, "type", "bridge"])
    addressed = _index(commands, ["ip", "addr", "add", f"{NODE_IP}/{prefix}", "dev", NODE_BRIDGE])
    up = _index(commands, ["ip", "link", "set", NODE_BRIDGE, "up"])
    assert added < addressed < up
    assert not [cmd for cmd in commands if cmd[:2] == ["ip", "route"]]  # no default route: nothing leaves


@pytest.mark.parametrize("chain", ["PREROUTING", "OUTPUT"], ids=["from the pods", "from the node itself"])
def test_the_service_vip_is_dnated_to_the_api_servers_forward(work: Path, chain: str) -> None:
    commands = _commands(setup_script(work, Path("/opt/pause"), work / "ready"))
    rules = [cmd for cmd in commands if cmd[0] == "iptables" and cmd[cmd.index("-A") + 1] == chain]
    assert len(rules) == 1
    rule = rules[0]
    assert _option(rule, "-t") == "nat"
    assert "-w" in rule  # wait for the xtables lock rather than fail
    assert ipaddress.IPv4Network(_option(rule, "-d")) == ipaddress.IPv4Network(f"{SERVICE_VIP}/32")
    assert _option(rule, "-p") == "tcp"
    assert _option(rule, "--dport") == "443"
    assert _option(rule, "-j") == "DNAT"
    assert _option(rule, "--to-destination") == f"{NODE_IP}:{API_NODE_PORT}"


def test_ready_is_touched_after_everything_and_pause_is_execed_last(work: Path) -> None:
    pause, ready = work / "bin" / "pause", work / "sandbox.ready"
    commands = _commands(setup_script(work, pause, ready))
    assert commands[-1] == ["exec", str(pause)]  # exec: pause becomes PID 1 of the new PID namespace
    assert commands[-2] == ["touch", str(ready)]
    assert sum(cmd[0] == "exec" for cmd in commands) == 1
    assert sum(cmd[0] == "touch" for cmd in commands) == 1


def test_commands_and_paths_are_mapped_into_the_holders_namespaces(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path, Path("/opt/pause"), holder_pid=4242)
    assert sandbox.netns == Path("/proc/4242/ns/net")
    assert sandbox.path("/run/containerd/containerd.sock") == Path("/proc/4242/root/run/containerd/containerd.sock")
    assert sandbox.path(Path("/var/log/pods")) == Path("/proc/4242/root/var/log/pods")
    assert sandbox.command(["ctr", "version"]) == [
        "nsenter", "--target=4242", "--mount", "--net", "--pid", "--", "ctr", "version"]


def test_a_relative_path_has_no_place_in_the_sandbox(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="relative"):
        Sandbox(tmp_path, Path("/opt/pause"), holder_pid=1).path("run/containerd")

