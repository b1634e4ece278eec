"""A throwaway Ray head for the launch tests: loopback only, fake GPUs, own temp dir.

Started by the ``ray_head`` fixture as a child process; prints one JSON line with the job
API address once it answers, then waits until its stdin closes and shuts Ray down (only the
processes it started). ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray use 127.0.0.1 as the
node address, so every Ray port binds to loopback; token auth is off (nothing else can reach it).

    python ray_head.py --gpus 2 --cpus 2 --dashboard-port 0 --temp-dir /tmp/x
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import urllib.request

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ["RAY_AUTH_MODE"] = "disabled"  # a loopback-only throwaway cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=float, default=2)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--temp-dir", required=True)
    args = parser.parse_args()

    import ray
    import ray._private.parameter as parameter

    # the dashboard agent's HTTP port defaults to a fixed 52365, which a second cluster on
    # this machine (another test session, a developer's head) cannot bind: pick a free one
    base = parameter.RayParams
    agent_port = free_port()

    class RayParams(base):  # type: ignore[misc, valid-type]
        def __init__(self, *a, **kw):
            kw.setdefault("dashboard_agent_listen_port", agent_port)
            if kw.get("dashboard_agent_listen_port") == 52365:
                kw["dashboard_agent_listen_port"] = agent_port
            super().__init__(*a, **kw)

    parameter.RayParams = RayParams
    port = free_port()
    ray.init(
        address="local",  # always a new cluster, never one already running here
        num_cpus=args.cpus,
        num_gpus=args.gpus,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=port,
        _node_ip_address="127.0.0.1",
        _temp_dir=args.temp_dir,
        configure_logging=False,
        log_to_driver=False,
    )
    address = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(address + "/api/version", timeout=5):
                pass
            with urllib.request.urlopen(address + "/api/jobs/", timeout=5):
                pass
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    # the job agent starts after the dashboard: one trivial job proves submission works
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(address)
    while True:
        try:
            job = client.submit_job(entrypoint="true")
            break
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        time.sleep(0.2)
    while (
        "GPU"
        not in json.load(urllib.request.urlopen(address + "/api/cluster_status"))["data"][
            "clusterStatus"
        ]["loadMetricsReport"]["usage"]
    ):  # the resource report lags the head's start
        time.sleep(0.5)
    print(json.dumps({"address": address}), flush=True)
    sys.stdin.read()  # until the fixture closes our stdin
    ray.shutdown()


if __name__ == "__main__":
    main()
