"""TensorBoard's data server (RustBoard, the ``tensorboard-data-server`` binary TensorBoard runs by
default) as a reference reader: every scalar it serves for a log folder, read over its gRPC API.
It preempts per series: a record drops every kept record of its tag from its step on."""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path


def rustboard_scalars(logdir: Path, *, timeout: float = 60.0) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    """``{(run, tag): [(step, wall_time, value)]}`` as the data server serves them, every point
    (``scalars=all``). The server loads the folder once; it is asked until two answers agree."""
    return _served(logdir, "scalars", timeout)


def rustboard_histograms(logdir: Path, *, timeout: float = 60.0) -> dict[tuple[str, str], list[tuple[int, float, list]]]:
    """``{(run, tag): [(step, wall_time, buckets as [left, right, count] rows)]}``, every one."""
    return _served(logdir, "histograms", timeout)


def _served(logdir: Path, plugin: str, timeout: float) -> dict:
    import grpc
    import tensorboard_data_server
    from tensorboard import context
    from tensorboard.data import grpc_provider
    from tensorboard.data.proto import data_provider_pb2_grpc

    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        server = subprocess.Popen(
            [tensorboard_data_server.server_binary(), f"--logdir={logdir}", "--reload=once", f"--samples-per-plugin={plugin}=all",
             "--port=0", f"--port-file={port_file}", "--die-after-stdin"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + timeout
            while not (os.path.exists(port_file) and Path(port_file).read_text().endswith("\n")):
                assert server.poll() is None and time.monotonic() < deadline, "the data server did not start"
                time.sleep(0.05)
            addr = f"localhost:{int(Path(port_file).read_text())}"
            with grpc.insecure_channel(addr) as channel:
                provider = grpc_provider.GrpcDataProvider(addr, data_provider_pb2_grpc.TensorBoardDataProviderStub(channel))
                ctx, last = context.RequestContext(), None
                while time.monotonic() < deadline:
                    if plugin == "scalars":
                        got = provider.read_scalars(ctx, experiment_id="", plugin_name=plugin, downsample=10**9)
                        now = {(run, tag): [(d.step, d.wall_time, d.value) for d in points]
                               for run, tags in got.items() for tag, points in tags.items()}
                    else:
                        got = provider.read_tensors(ctx, experiment_id="", plugin_name=plugin, downsample=10**9)
                        now = {(run, tag): [(d.step, d.wall_time, d.numpy.tolist()) for d in points]
                               for run, tags in got.items() for tag, points in tags.items()}
                    if now and now == last:
                        return now
                    last = now
                    time.sleep(0.3)
                raise AssertionError("the data server's answers did not settle")
        finally:
            server.stdin.close()  # (--die-after-stdin)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
