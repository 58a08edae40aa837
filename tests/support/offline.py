"""Offline runs written by the real Comet, ClearML and Neptune 1.x clients, in a child process.

Each writer gets a spec (what to log, as JSON) and its own HOME, TMPDIR and working folder (a
fresh git repository with one commit and a remote, so the clients record a known commit); the
spec is the oracle the tests compare the decoded values with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

COMET = r"""
import json, sys
import comet_ml
spec = json.load(open(sys.argv[1]))
exp = comet_ml.OfflineExperiment(project_name=spec["project"], workspace="ws", offline_directory=".cometml-runs",
    auto_metric_logging=False, auto_param_logging=False, auto_output_logging=False, log_code=False, log_graph=False,
    log_env_details=True, log_env_gpu=False, log_env_cpu=False, log_env_network=False, log_env_disk=False,
    log_git_metadata=True, log_git_patch=False, display_summary_level=0)
exp.set_name(spec["name"])
exp.add_tags(spec["tags"])
exp.log_parameters(spec["params"])
for name, value in spec["others"].items():
    exp.log_other(name, value)
for name, value, step, epoch, context in spec["metrics"]:
    if context:
        with exp.context_manager(context):
            exp.log_metric(name, float(value), step=step, epoch=epoch)
    else:
        exp.log_metric(name, float(value), step=step, epoch=epoch)
exp.end()
"""

CLEARML = r"""
import json, sys
from clearml import Task
if not json.load(open(sys.argv[1])).get("detect_repository", True):
    from clearml.backend_interface.task.task import Task as _Task
    _Task._update_repository = lambda self: None  # its scan of the working tree is slow
spec = json.load(open(sys.argv[1]))
Task.set_offline(offline_mode=True)
task = Task.init(project_name=spec["project"], task_name=spec["name"], tags=spec["tags"], auto_connect_frameworks=False,
                 auto_resource_monitoring=False, auto_connect_arg_parser=False)
task.connect(spec["params"])
logger = task.get_logger()
for metric, variant, value, it in spec["metrics"]:
    logger.report_scalar(metric, variant, value=float(value), iteration=it)
task.close()
"""

NEPTUNE = r"""
import json, sys
import neptune
spec = json.load(open(sys.argv[1]))
run = neptune.init_run(mode="offline", project="ws/proj", name=spec["name"], tags=spec["tags"], capture_stdout=spec.get("capture", False),
                       capture_stderr=False, capture_hardware_metrics=False, capture_traceback=False, source_files=[])
run["parameters"] = spec["params"]
for path, value, step in spec["metrics"]:
    if step is None:
        run[path].append(float(value))
    else:
        run[path].append(float(value), step=step)
for path, value, step in spec["texts"]:
    run[path].append(value, step=step)
run.stop()
"""

WRITERS = {"comet": COMET, "clearml": CLEARML, "neptune": NEPTUNE}


def git_repo(folder: Path) -> str:
    """A git repository with one commit and a remote; returns the commit."""
    folder.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "."], check=True)
    (folder / "train.py").write_text("print('train')\n")
    subprocess.run([*git, "add", "train.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    subprocess.run([*git, "remote", "add", "origin", "https://example.com/team/repo.git"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def write(fmt: str, folder: Path, spec: dict, timeout: float = 300) -> None:
    """Run the real writer of ``fmt`` in ``folder`` on ``spec``."""
    home = folder.parent / f".{folder.name}-home"
    tmp = folder.parent / f".{folder.name}-tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMET_", "CLEARML_", "NEPTUNE_", "GIT_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), CLEARML_CACHE_DIR=str(folder / "clearml-cache"), PYTHONDONTWRITEBYTECODE="1")
    (folder / "write_run.py").write_text(WRITERS[fmt])  # a file: ClearML finds the repository from the script's path
    proc = subprocess.run(
        [sys.executable, "write_run.py", "spec.json"], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
