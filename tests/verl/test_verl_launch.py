"""Launch: locally and on a real loopback Ray head (fake GPUs), queued, stoppable, resumable."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from verl_testlib import FAKE_VERL

from bayesscale import names
from bayesscale.verl import manifest as mf
from bayesscale.verl.ingest import ingest_sweep
from bayesscale.verl.launch import (
    LaunchError,
    LocalBackend,
    RayBackend,
    job_id_of,
    launch,
    sweep_uid,
)


def fake(tmp_path: Path, sleep: float = 0.0, fail_first: tuple[str, ...] = ()) -> tuple[str, Path]:
    """Entrypoint that replaces verl, and the events file it appends to."""
    events = tmp_path / "events.jsonl"
    control = tmp_path / "control.json"
    control.write_text(
        json.dumps({"sleep": sleep, "fail_first": list(fail_first), "events": str(events)})
    )
    return f"{sys.executable} {FAKE_VERL} --control {control}", events


def read_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def max_overlap(events: list[dict]) -> int:
    level = peak = 0
    for e in sorted(events, key=lambda e: (e["t"], e["kind"] == "start")):
        level += 1 if e["kind"] == "start" else -1
        peak = max(peak, level)
    return peak


def status_of(sweep: Path) -> dict[str, tuple[str, int]]:
    frame = mf.read_manifest(sweep)
    return {r[names.RUN_ID]: (r[names.STATUS], int(r[names.ATTEMPT])) for _, r in frame.iterrows()}


def test_local_runs_retries_and_resumes(small_sweep: Path, tmp_path: Path) -> None:
    runs = list(mf.read_manifest(small_sweep)[names.RUN_ID][:3])
    entry, events = fake(tmp_path, fail_first=(runs[1],))
    summary = launch(small_sweep, LocalBackend(), entrypoint=entry, runs=runs, poll_s=0)
    states = status_of(small_sweep)
    assert [states[r] for r in runs] == [(mf.SUCCEEDED, 1), (mf.SUCCEEDED, 2), (mf.SUCCEEDED, 1)]
    assert summary.retried == [runs[1]]
    assert (small_sweep / mf.attempt_log(runs[1], 1)).exists()  # the failed attempt's log is kept
    assert (small_sweep / mf.attempt_log(runs[1], 2)).exists()
    assert len(read_events(events)) == 2 * 4
    again = launch(small_sweep, LocalBackend(), entrypoint=entry, runs=runs, poll_s=0)
    assert again.submitted == [] and len(read_events(events)) == 2 * 4  # nothing resubmitted
    assert len(ingest_sweep(small_sweep).rows) == 3


def test_local_launcher_crash_mid_run_is_retried(small_sweep: Path, tmp_path: Path) -> None:
    frame = mf.read_manifest(small_sweep)
    run = frame[names.RUN_ID][0]
    frame.loc[0, [names.STATUS, names.JOB_ID]] = [mf.RUNNING, "x"]  # launcher killed mid-run
    mf.write_manifest(frame, small_sweep)
    entry, _ = fake(tmp_path)
    launch(small_sweep, LocalBackend(), entrypoint=entry, runs=[run], poll_s=0)
    assert status_of(small_sweep)[run] == (mf.SUCCEEDED, 2)
    assert mf.read_manifest(small_sweep)[names.MESSAGE][0] == (
        "attempt 1 failed: launcher exited during the run"
    )


def test_max_attempts_stops_retrying(small_sweep: Path, tmp_path: Path) -> None:
    run = mf.read_manifest(small_sweep)[names.RUN_ID][0]
    entry, events = fake(tmp_path, fail_first=(run,))
    launch(small_sweep, LocalBackend(), entrypoint=entry, runs=[run], max_attempts=1, poll_s=0)
    assert status_of(small_sweep)[run] == (mf.FAILED, 1)
    assert len(read_events(events)) == 2


def test_a_failed_attempt_says_what_failed_once(small_sweep: Path, tmp_path: Path) -> None:
    """The manifest keeps the run's own error (its last output line), never "attempt 2 failed:
    attempt 1 failed"; every attempt used, the summary lists the run with that reason."""
    run = mf.read_manifest(small_sweep)[names.RUN_ID][0]
    entry = f"{sys.executable} -c 'import sys; sys.exit(\"boom: no GPU here\")'"
    summary = launch(
        small_sweep, LocalBackend(), entrypoint=entry, runs=[run], max_attempts=3, poll_s=0
    )
    assert status_of(small_sweep)[run] == (mf.FAILED, 3)
    assert mf.read_manifest(small_sweep)[names.MESSAGE][0] == "exit status 1: boom: no GPU here"
    assert summary.gave_up == {run: "attempt 3 failed: exit status 1: boom: no GPU here"}
    frame = mf.read_manifest(small_sweep)  # a message left nested by an older launcher
    frame.loc[0, [names.STATUS, names.ATTEMPT, names.MESSAGE]] = [
        mf.FAILED,
        1,
        "attempt 1 failed: x",
    ]
    mf.write_manifest(frame, small_sweep)
    launch(small_sweep, LocalBackend(), entrypoint=entry, runs=[run], max_attempts=2, poll_s=0)
    assert mf.read_manifest(small_sweep)[names.MESSAGE][0] == "exit status 1: boom: no GPU here"


def test_a_missing_verl_fails_before_any_attempt(
    small_sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m MODULE` whose package that Python cannot import (verl not installed): one
    line, exit 2, no attempt made (it took three attempts and exit 0 before)."""
    from bayesscale.cli import main

    run = mf.read_manifest(small_sweep)[names.RUN_ID][0]
    missing = f"{sys.executable} -m no_such_verl_pkg.trainer.main_ppo"
    argv = ["launch", str(small_sweep), "--local", "--run", run, "--poll", "0"]
    assert main([*argv, "--entrypoint", missing]) == 2
    err = capsys.readouterr().err
    assert "cannot import 'no_such_verl_pkg'" in err and "nothing was run" in err
    assert status_of(small_sweep)[run] == (mf.PLANNED, 1)
    assert not (small_sweep / mf.attempt_log(run, 1)).parent.exists()
    assert main([*argv, "--entrypoint", "no-such-program-x --help"]) == 2
    assert "'no-such-program-x' is not on PATH" in capsys.readouterr().err
    # every attempt used: exit 1, the reason and what reruns it on standard error
    failing = f"{sys.executable} -c 'raise SystemExit(\"boom\")'"
    assert main([*argv, "--entrypoint", failing, "--max-attempts", "1"]) == 1
    err = capsys.readouterr().err
    assert f"e.g. {run}: attempt 1 failed: exit status 1: boom" in err
    assert "--max-attempts 2 runs them again" in err


def test_ray_queues_against_free_gpus(ray_head: str, small_sweep: Path, tmp_path: Path) -> None:
    """2 fake GPUs, 1 GPU per run: never more than 2 at once; a crash gets attempt 2."""
    runs = list(mf.read_manifest(small_sweep)[names.RUN_ID][:4])
    entry, events = fake(tmp_path, sleep=1.5, fail_first=(runs[0],))
    backend = RayBackend(ray_head)
    assert backend.cluster_gpus() == (0.0, 2.0)
    summary = launch(small_sweep, backend, entrypoint=entry, runs=runs, poll_s=0.3, timeout_s=120)
    states = status_of(small_sweep)
    assert [states[r] for r in runs] == [(mf.SUCCEEDED, 2)] + [(mf.SUCCEEDED, 1)] * 3
    seen = read_events(events)
    assert len(seen) == 2 * 5  # 4 runs + 1 retry, each start and end
    assert max_overlap(seen) <= 2
    assert len(summary.submitted) == 5 and len(set(summary.submitted)) == 5
    uid = sweep_uid(small_sweep)
    frame = mf.read_manifest(small_sweep).set_index(names.RUN_ID)
    assert frame.loc[runs[0], names.JOB_ID] == job_id_of(uid, runs[0], 2)
    assert len(ingest_sweep(small_sweep).rows) == 4


def test_ray_stop_and_resume_never_duplicates(
    ray_head: str, small_sweep: Path, tmp_path: Path
) -> None:
    frame = mf.read_manifest(small_sweep)
    runs = list(frame[names.RUN_ID][4:7])
    entry, events = fake(tmp_path, sleep=1.0)
    backend = RayBackend(ray_head)
    # a crash right after submitting runs[2]: the job exists, the manifest still says planned
    from bayesscale.verl.commands import run_command
    from bayesscale.verl.sweep import load_sweep_spec

    spec = load_sweep_spec(small_sweep / mf.SPEC_COPY)
    row = frame[frame[names.RUN_ID] == runs[2]].iloc[0].to_dict()
    orphan = job_id_of(sweep_uid(small_sweep), runs[2], 1)
    backend.submit(orphan, run_command(row, spec.verl, small_sweep, entrypoint=entry), small_sweep)
    # first call: submit what fits and return at once (the user stops the launcher)
    first = launch(small_sweep, backend, entrypoint=entry, runs=runs, wait=False)
    assert orphan not in first.submitted  # adopted, not resubmitted
    assert len(first.submitted) == 1  # 2 GPUs: the orphan holds one
    # resume until done
    launch(small_sweep, backend, entrypoint=entry, runs=runs, poll_s=0.3, timeout_s=120)
    assert [status_of(small_sweep)[r] for r in runs] == [(mf.SUCCEEDED, 1)] * 3
    starts = [e["run"] for e in read_events(events) if e["kind"] == "start"]
    assert sorted(starts) == sorted(runs)  # each run ran exactly once
    jobs = [
        j.submission_id
        for j in backend.client().list_jobs()
        if j.submission_id and runs[0] in j.submission_id
    ]
    assert jobs == [job_id_of(sweep_uid(small_sweep), runs[0], 1)]


def test_ray_run_larger_than_cluster(ray_head: str, small_sweep: Path) -> None:
    frame = mf.read_manifest(small_sweep)
    frame[names.N_GPUS] = 4
    mf.write_manifest(frame, small_sweep)
    with pytest.raises(LaunchError, match="needs 4 GPUs; the cluster has 2 in all"):
        launch(small_sweep, RayBackend(ray_head), runs=[frame[names.RUN_ID][0]])


def test_unreachable_cluster(small_sweep: Path) -> None:
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"127\.0\.0\.1:9"):
        launch(
            small_sweep,
            RayBackend("http://127.0.0.1:9"),
            runs=[mf.read_manifest(small_sweep)[names.RUN_ID][0]],
        )
    assert time.monotonic() - start < 60


def test_a_cluster_that_wants_a_token_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's own AuthenticationError (a head started with token authentication, Ray's default
    since 2.5x) becomes one line that says what to set, not a traceback."""
    import ray.exceptions
    import ray.job_submission

    def refuse(address: str, headers: dict[str, str] | None = None) -> None:
        raise ray.exceptions.AuthenticationError("Missing authentication token")

    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", refuse)
    with pytest.raises(LaunchError) as refused:
        RayBackend("http://127.0.0.1:8265").client()
    said = str(refused.value)
    assert "127.0.0.1:8265 requires an authentication token" in said
    assert "set RAY_AUTH_TOKEN" in said and "RAY_AUTH_MODE=disabled" in said


def test_local_interrupt_marks_stopped(small_sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = mf.read_manifest(small_sweep)[names.RUN_ID][0]

    def interrupted(*_: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalBackend, "submit", interrupted)
    with pytest.raises(KeyboardInterrupt):  # an entrypoint that exists: checked before runs
        launch(small_sweep, LocalBackend(), runs=[run], entrypoint=f"{sys.executable} -c pass")
    assert status_of(small_sweep)[run] == (mf.STOPPED, 1)  # resumed later as attempt 2
