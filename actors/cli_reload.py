"""`mcp-gateway reload --config F`: check F whole, then have every gateway serving F load it again, and say
what each applied (runtime/control_peers.py finds and checks them; reload.py does the work).

One gateway: its outcome's lines as they are. Several: each line labelled `pid N: `. A pid file whose
process is not a gateway of this user's is never signalled: the command says why. Everything a gateway
wrote is printed with its control characters escaped. Exit 0 when every gateway reloaded; 2 when the file
was refused (here or by a gateway); 1 when no gateway was reached or one did not answer.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Final

from actors.admin.status_command import missing_config
from actors.config.errors import ConfigError
from actors.config.load import load_config
from actors.runtime.control import control_folders
from actors.runtime.control_peers import Peer, find_peers, read_outcome, signal_peer
from actors.runtime.log import escape_controls

EXIT_REFUSED: Final = 2  # the file has problems (here, or as the gateway loaded it)
EXIT_NO_GATEWAY: Final = 1
POLL_S: Final = 0.1


def say(line: str, *, error: bool = True) -> None:
    print(escape_controls(line), file=sys.stderr if error else sys.stdout)


def reload_command(config_path: str, timeout_s: float) -> int:
    missing = missing_config(config_path, "reload")
    if missing is not None:
        say(missing)
        return EXIT_NO_GATEWAY
    try:
        load_config(config_path)
    except ConfigError as exc:
        for problem in exc.problems:
            say(str(problem))
        say("mcp-gateway: not reloaded: the running gateway keeps its config")
        return EXIT_REFUSED
    resolved = Path(config_path).resolve()
    peers = find_peers(resolved)
    code, waiting = 0, []
    for peer in peers:
        before = read_outcome(peer.files)  # its serial: the answer to this SIGHUP has a greater one
        problem = peer.problem or signal_peer(peer, signal.SIGHUP)
        if problem is None:
            waiting.append((peer, before.serial if before is not None else 0))
        else:
            say(f"mcp-gateway: pid {peer.pid} not signalled: {problem}")
            code = EXIT_NO_GATEWAY
    if not waiting:
        if not peers:
            folders = ", ".join(str(folder) for folder in control_folders(create=False)) or "none usable"
            say(
                f"mcp-gateway: no gateway is serving {resolved} (control files looked for in: {folders}); "
                "if the gateway serves another file, pass --config with it" + _as_service_hint()
            )
        return EXIT_NO_GATEWAY
    return max(code, await_outcomes(waiting, timeout_s))


def _as_service_hint() -> str:
    """Run as root, the command looks in root's folders, never in a service user's: say how to look there."""
    if os.geteuid() != 0:
        return ""
    return (
        "; a gateway run as a service user keeps its control files in that user's runtime folder: run"
        " `systemctl reload mcp-gateway`, or this command as that user with its XDG_RUNTIME_DIR (for the"
        " systemd unit: runuser -u mcp-gateway -- env XDG_RUNTIME_DIR=/run/mcp-gateway"
        " /opt/mcp-gateway/bin/mcp-gateway reload --config ...)"
    )


def await_outcomes(peers: list[tuple[Peer, int]], timeout_s: float) -> int:
    """Print each peer's new outcome as it comes; the worst exit code."""
    labelled, code = len(peers) > 1, 0
    deadline = time.monotonic() + timeout_s
    pending = {peer.pid: (peer, serial) for peer, serial in peers}
    while pending and time.monotonic() < deadline:
        for peer, serial in list(pending.values()):
            outcome = read_outcome(peer.files)
            if outcome is None or outcome.serial <= serial:
                continue
            del pending[peer.pid]
            label = f"pid {peer.pid}: " if labelled else ""
            for line in outcome.lines:
                say(label + line, error=not outcome.ok)
            code = max(code, 0 if outcome.ok else EXIT_REFUSED)
        if pending:
            time.sleep(POLL_S)
    for pid in pending:
        say(f"mcp-gateway: asked pid {pid} to reload; no outcome within {timeout_s}s (see its log)")
        code = max(code, EXIT_NO_GATEWAY)
    return code
