#!/usr/bin/env python3
"""Write a small, realistic, byte-for-byte deterministic archive of TensorBoard logs.

Layout: ``<out>/{project}/{model}/{YYYY-MM-DD_HH-MM-SS}/`` (like ``logs/{project}/{model}/{ts}/``),
two projects, two models each, two or three runs per model. Every file is written by the real
tensorboardX ``SummaryWriter``; only its clock and host name are pinned so that both the records
(wall times) and the file names (``events.out.tfevents.<10-digit ts>.example``) are fixed.

Each run holds:

* scalars ``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/throughput``,
  ``eval/loss``, ``eval/accuracy`` and the resource scalars ``sys/gpu_util``, ``sys/memory_gb``;
  hyperparameters differ per run so the curves converge differently; one run has a NaN loss
  (an fp16 overflow), another a loss spike;
* one ``add_scalars("loss", {"train", "val"})`` group, i.e. the sub-runs ``<run>/loss/train``
  and ``<run>/loss/val``;
* ``add_hparams`` (the ``<run>/<time.time()>`` sub-run), the config as JSON text
  (``hyperparameters/config``), an ``environment`` text and Markdown ``notes``;
* a few images, weight histograms over steps, one PR curve and one short audio clip.

Besides, one run of every other format sitegen reads, each written by its real writer:

* ``paddle/ernie-tiny/2024-06-20_09-00-00/``: a VisualDL run (``visualdl.LogWriter``) that was
  restarted from a checkpoint, so it holds two ``vdlrecords.<ts>.log`` files (their names get the
  session's start time; the records' ms wall times are passed explicitly, the clock is pinned
  for the rest). Scalars with a NaN, a display name, hparams, texts, images and histograms.
* ``mlflow/mlruns/``: an MLflow file store (``mlflow`` with a ``file://`` tracking URI), experiment
  ``tabular-baselines`` with two runs (params, stepped metrics, tags, a text artifact) and a nested
  child run. MLflow's random experiment/run ids, absolute artifact URIs and current times are then
  rewritten: fixed ids (folders renamed), ``./mlruns/...`` artifact paths (relative to the folder
  holding ``mlruns``, as mlflow < 1.0 wrote them) and fixed times, so the store is byte-for-byte
  deterministic and relocatable; ``MlflowClient`` still reads it.
* ``tabular/xgboost/2024-07-01_12-00-00/metrics.csv`` (wide CSV with a few empty cells) and
  ``tabular/lightgbm/2024-07-02_12-00-00/metrics.jsonl`` (JSON lines whose keys vary by line,
  with a NaN).

The projects ``hf/``, ``lightning/``, ``keras/`` and ``dvclive/`` (a Hugging Face Trainer output
folder, a Lightning CSVLogger version, a Keras CSVLogger file holding two ``fit`` calls, a DVC
repository with a dvclive run and its ``dvc.lock``) are not written here: their writers are too
heavy to install for this script. ``tests/fixtures/trackers/make_fixtures.py`` wrote them with
transformers 5.25.0, lightning 2.6.6, keras 3.15.1 and dvclive 3.49.1, and they are committed.
So is ``wandb/`` (one W&B offline run file, ``run-<id>.wandb``), written by wandb 0.31.0 with
``tests/fixtures/wandb/make_example.py``.
So are ``comet/``, ``clearml/`` and ``neptune/`` (offline runs of comet_ml, clearml and neptune 1.x,
written by ``tests/fixtures/trackers/make_offline.py``).

Usage: ``python examples/make_archive.py [OUT_DIR]`` (default: ``examples/archive`` next to
this script). Only the project folders this script writes are replaced in OUT_DIR.
"""
from __future__ import annotations

import argparse
import calendar
import csv
import hashlib
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time as _real_time
import types
import wave
from contextlib import contextmanager
from pathlib import Path

import numpy as np

HOST = "example"

# ---------------------------------------------------------------------------------------------
# Pinning tensorboardX's clock and host name.


class _Clock(types.ModuleType):
    """Stands in for the ``time`` module inside tensorboardX: ``time()`` returns ``now``."""

    def __init__(self) -> None:
        super().__init__("time")
        self.now = 0.0

    def time(self) -> float:  # noqa: D401 - mirrors time.time
        return self.now

    def __getattr__(self, name):  # everything else (sleep, monotonic, ...) is the real one
        return getattr(_real_time, name)


class _Host(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("socket")

    @staticmethod
    def gethostname() -> str:
        return HOST

    def __getattr__(self, name):
        import socket

        return getattr(socket, name)


def _install_soundfile_shim() -> None:
    """tensorboardX's ``add_audio`` encodes WAV with ``soundfile``; use the stdlib when absent.

    Writes what soundfile writes for ``format='wav'`` with its default subtype: 16-bit PCM.
    """
    try:
        import soundfile  # noqa: F401

        return
    except ImportError:
        pass

    def write(file, data, samplerate, format="wav", **_kw):  # noqa: A002 - soundfile's name
        data = np.asarray(data, dtype=np.float64)
        if data.ndim == 1:
            data = data[:, None]
        pcm = np.clip(np.round(data * 32767.0), -32768, 32767).astype("<i2")
        with wave.open(file, "wb") as w:
            w.setnchannels(data.shape[1])
            w.setsampwidth(2)
            w.setframerate(int(samplerate))
            w.writeframes(pcm.tobytes())

    shim = types.ModuleType("soundfile")
    shim.write = write
    sys.modules["soundfile"] = shim


@contextmanager
def pinned_tensorboardx():
    """Yield a clock; while inside, tensorboardX reads time and host name from the stand-ins."""
    import tensorboardX.event_file_writer as efw
    import tensorboardX.writer as wr

    _install_soundfile_shim()
    clock = _Clock()
    saved = (wr.time, efw.time, efw.socket, wr.hparams)
    wr.time, efw.time, efw.socket = clock, clock, _Host()
    wr.hparams = _sorted_hparams(wr.hparams)
    try:
        yield clock
    finally:
        wr.time, efw.time, efw.socket, wr.hparams = saved


def _sorted_hparams(hparams):
    """tensorboardX's ``hparams()`` serializes a protobuf map, whose order varies between
    processes; re-serialize the plugin content deterministically (map keys sorted)."""
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    def wrapped(hparam_dict, metric_dict):
        summaries = hparams(hparam_dict, metric_dict)
        for summary in summaries:
            for value in summary.value:
                plugin = value.metadata.plugin_data
                data = HParamsPluginData.FromString(plugin.content)
                plugin.content = data.SerializeToString(deterministic=True)
        return summaries

    return wrapped


# ---------------------------------------------------------------------------------------------
# The experiments.

ENVIRONMENTS = {
    "vision": {
        "python": "3.11.7",
        "torch": "2.3.1+cu121",
        "torchvision": "0.18.1",
        "cuda": "12.1",
        "cudnn": "8.9.2",
        "gpu": "NVIDIA A100-SXM4-40GB",
        "host": "gpu-node-03",
    },
    "nlp": {
        "python": "3.11.7",
        "torch": "2.2.2+cu118",
        "transformers": "4.41.2",
        "cuda": "11.8",
        "cudnn": "8.7.0",
        "gpu": "NVIDIA RTX A6000",
        "host": "gpu-node-11",
    },
}

# project -> model -> runs. start is a UTC timestamp; quirk is "nan", "spike" or None.
EXPERIMENTS: dict[str, dict[str, list[dict]]] = {
    "vision": {
        "resnet18": [
            dict(start="2024-05-02 09:14:07", lr=0.1, batch_size=128, optimizer="sgd",
                 weight_decay=5e-4, warmup_steps=20, amp=False, steps=300, seed=11, quirk=None,
                 note="Baseline with the standard SGD recipe."),
            dict(start="2024-05-02 14:41:55", lr=0.4, batch_size=512, optimizer="sgd",
                 weight_decay=5e-4, warmup_steps=40, amp=True, steps=300, seed=12, quirk="nan",
                 note="Large batch with linear LR scaling. **fp16 overflow** around step 140."),
            dict(start="2024-05-03 08:02:31", lr=0.003, batch_size=128, optimizer="adamw",
                 weight_decay=0.05, warmup_steps=20, amp=True, steps=300, seed=13, quirk=None,
                 note="AdamW instead of SGD; converges faster, plateaus lower."),
        ],
        "vit-small": [
            dict(start="2024-05-04 10:20:00", lr=0.001, batch_size=256, optimizer="adamw",
                 weight_decay=0.05, warmup_steps=50, amp=True, steps=400, seed=21, quirk="spike",
                 note="Loss spike at step 210 (bad batch?), recovered on its own."),
            dict(start="2024-05-05 16:45:12", lr=0.0005, batch_size=256, optimizer="adamw",
                 weight_decay=0.1, warmup_steps=50, amp=True, steps=400, seed=22, quirk=None,
                 note="Half the LR, more weight decay: slower but steadier."),
        ],
    },
    "nlp": {
        "bert-base": [
            dict(start="2024-06-10 07:30:45", lr=5e-5, batch_size=32, optimizer="adamw",
                 weight_decay=0.01, warmup_steps=30, amp=True, steps=250, seed=31, quirk=None,
                 note="Fine-tuning on SST-2, the usual recipe."),
            dict(start="2024-06-10 13:05:09", lr=2e-5, batch_size=32, optimizer="adamw",
                 weight_decay=0.01, warmup_steps=30, amp=True, steps=250, seed=32, quirk=None,
                 note="Lower LR: slower start, similar end accuracy."),
        ],
        "gpt2-small": [
            dict(start="2024-06-12 21:17:33", lr=6e-4, batch_size=64, optimizer="adamw",
                 weight_decay=0.1, warmup_steps=40, amp=True, steps=350, seed=41, quirk=None,
                 note="Pretraining on a 100M-token slice; perplexity as accuracy proxy."),
            dict(start="2024-06-13 09:48:02", lr=3e-4, batch_size=64, optimizer="adamw",
                 weight_decay=0.1, warmup_steps=40, amp=False, steps=350, seed=42, quirk=None,
                 note="fp32 run for comparison; about 2x slower per step."),
            dict(start="2024-06-14 11:11:11", lr=1.2e-3, batch_size=64, optimizer="lion",
                 weight_decay=0.2, warmup_steps=40, amp=True, steps=350, seed=43, quirk=None,
                 note="Lion optimizer trial: fast early drop, noisier."),
        ],
    },
}


def _epoch(utc: str) -> int:
    return calendar.timegm(_real_time.strptime(utc, "%Y-%m-%d %H:%M:%S"))


def _lr_at(step: int, cfg: dict) -> float:
    warm, total, peak = cfg["warmup_steps"], cfg["steps"], cfg["lr"]
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def _speed(project: str, cfg: dict) -> float:
    """Convergence rate: depends on LR relative to a per-optimizer sweet spot."""
    sweet = {"sgd": 0.1, "adamw": 1e-3 if project == "vision" else 5e-5, "lion": 3e-4}[
        cfg["optimizer"]
    ]
    if project == "nlp" and cfg["batch_size"] == 64:
        sweet = 6e-4
    ratio = math.log10(cfg["lr"] / sweet)
    return 0.018 * math.exp(-0.8 * ratio * ratio) * (1.3 if cfg["optimizer"] == "adamw" else 1.0)


def _png_frame(rng: np.random.Generator, step: int, size: int, gray: bool) -> np.ndarray:
    """A smooth synthetic 'prediction' picture (compresses well), sharper as training goes on."""
    y, x = np.mgrid[0:size, 0:size] / (size - 1)
    sharp = 2.0 + step / 40.0
    blob = np.exp(-sharp * ((x - 0.5) ** 2 + (y - 0.45) ** 2) * 8)
    noise = rng.normal(0, 0.15 / (1 + step / 100), (size, size))
    if gray:
        img = np.clip(blob + noise, 0, 1)[None]  # CHW, 1 channel
    else:
        img = np.stack([np.clip(blob + noise, 0, 1), np.clip(x * (1 - blob), 0, 1),
                        np.clip(y * 0.8, 0, 1)])
    return (img * 255).round().astype(np.uint8)


def write_run(clock: _Clock, run_dir: Path, project: str, model: str, cfg: dict) -> None:
    from tensorboardX import SummaryWriter

    rng = np.random.default_rng(cfg["seed"])
    base = float(_epoch(cfg["start"]))
    sec_per_step = (0.42 if project == "vision" else 0.67) * cfg["batch_size"] / 128
    if not cfg["amp"]:
        sec_per_step *= 1.9
    clock.now = base
    w = SummaryWriter(logdir=str(run_dir), flush_secs=3600)

    def at(step: int, offset: float = 0.0) -> float:
        """Wall time of ``step``: a fixed base plus a deterministic pace, set on the clock too."""
        clock.now = round(base + 3.5 + step * sec_per_step + offset, 6)
        return clock.now

    config = {k: cfg[k] for k in ("lr", "batch_size", "optimizer", "weight_decay",
                                  "warmup_steps", "amp", "steps", "seed")}
    config.update(project=project, model=model,
                  dataset={"vision": "cifar10", "nlp": "sst2" if "bert" in model else "openwebtext-100M"}[project])
    w.add_text("hyperparameters/config", json.dumps(config, indent=2), 0, walltime=at(0))
    env = ENVIRONMENTS[project]
    w.add_text("environment", "\n".join(f"{k}: {v}" for k, v in env.items()), 0, walltime=at(0))
    notes = (f"# {model} / {cfg['start']} UTC\n\n{cfg['note']}\n\n"
             f"| setting | value |\n|---|---|\n| optimizer | `{cfg['optimizer']}` |\n"
             f"| lr | {cfg['lr']:g} |\n| batch size | {cfg['batch_size']} |\n")
    w.add_text("notes", notes, 0, walltime=at(0))

    speed = _speed(project, cfg)
    start_loss, floor = (2.35, 0.18) if project == "vision" else (
        (0.72, 0.21) if "bert" in model else (10.9, 3.05))
    floor *= 1.0 + 0.4 * (cfg["optimizer"] == "sgd" and cfg["batch_size"] > 256)
    acc_max = 0.935 if project == "vision" else (0.925 if "bert" in model else 0.41)
    mem_base = {"resnet18": 6.2, "vit-small": 11.5, "bert-base": 9.8, "gpt2-small": 17.3}[model]
    mem_base *= cfg["batch_size"] / 128 if project == "vision" else 1.0
    mem_base *= 1.0 if cfg["amp"] else 1.6
    weights = {n: rng.normal(0, s, size) for n, s, size in
               (("layer1.weight", 0.08, 2048), ("head.weight", 0.2, 512))}
    total = cfg["steps"]
    eval_loss = start_loss
    acc = 0.1 if project == "vision" else 0.5 if "bert" in model else 0.0
    for step in range(0, total + 1):
        t = step
        progress = 1.0 - math.exp(-speed * t)
        clean = floor + (start_loss - floor) * math.exp(-speed * t)
        loss = clean * (1.0 + rng.normal(0, 0.04 + 0.06 * (cfg["optimizer"] == "lion")))
        grad_norm = abs(rng.normal(1.0 + 2.5 * math.exp(-speed * t * 0.5), 0.25))
        if cfg["quirk"] == "nan" and step == 140:
            loss, grad_norm = float("nan"), float("inf")
        if cfg["quirk"] == "spike" and step in (210, 212):
            loss = clean * (6.5 if step == 210 else 2.2)
            grad_norm = 48.0 if step == 210 else 9.5
        if cfg["quirk"] == "spike" and 210 <= step < 240:
            progress *= 0.93 + 0.07 * (step - 210) / 30
        if step % 2 == 0:
            wt = at(step)
            w.add_scalar("train/loss", loss, step, walltime=wt)
            w.add_scalar("train/lr", _lr_at(step, cfg), step, walltime=wt)
            w.add_scalar("train/grad_norm", grad_norm, step, walltime=wt)
        if step % 10 == 0 and step > 0:
            wt = at(step, 0.01)
            w.add_scalar("train/throughput", cfg["batch_size"] / sec_per_step * rng.normal(1, 0.02),
                         step, walltime=wt)
            w.add_scalar("sys/gpu_util", float(np.clip(rng.normal(93 if cfg["amp"] else 97, 2.5), 0, 100)),
                         step, walltime=wt)
            w.add_scalar("sys/memory_gb", mem_base * (1 + 0.02 * step / total) + rng.normal(0, 0.05),
                         step, walltime=wt)
        if step % 25 == 0 and step > 0:
            wt = at(step, 4.0)
            eval_loss = clean * (1.08 + 0.05 * progress) + rng.normal(0, 0.01)
            acc = acc_max * progress * (1 - 0.08 * (cfg["optimizer"] == "sgd" and cfg["batch_size"] > 256))
            acc = float(np.clip(acc + rng.normal(0, 0.006), 0, 1))
            w.add_scalar("eval/loss", eval_loss, step, walltime=wt)
            w.add_scalar("eval/accuracy", acc, step, walltime=wt)
            w.add_scalars("loss", {"train": loss if math.isfinite(loss) else clean, "val": eval_loss},
                          step, walltime=wt)
        if step % 50 == 0:
            wt = at(step, 4.5)
            for name, values in weights.items():
                w.add_histogram(f"weights/{name}", values, step, bins=30, walltime=wt)
                values *= 1.0 - 0.1 * cfg["weight_decay"]
                values += rng.normal(0, 0.01, values.shape) * (1 - progress)
        if step in (0, total // 2, total):
            wt = at(step, 5.0)
            w.add_image("samples/prediction", _png_frame(rng, step, 32, gray=project == "nlp"),
                        step, walltime=wt)

    # End of training: PR curve of the final classifier, a short audio clip.
    wt = at(total, 6.0)
    n = 400
    labels = rng.integers(0, 2, n)
    scores = np.clip(labels * (0.35 + 0.5 * acc) + rng.normal(0.3, 0.2, n), 0, 1)
    w.add_pr_curve("eval/pr_curve", labels, scores, total, num_thresholds=64, walltime=wt)
    sr = 8000
    tt = np.arange(int(0.25 * sr)) / sr
    freq = 220.0 * (1 + cfg["seed"] % 5 / 4)
    clip = 0.4 * np.sin(2 * math.pi * freq * tt) * np.exp(-6 * tt)
    w.add_audio("samples/audio", clip.astype(np.float32), total, sample_rate=sr, walltime=wt)

    at(total, 7.0)  # add_hparams uses the clock for its sub-run name and its records
    hparams = {k: cfg[k] for k in ("lr", "batch_size", "optimizer", "weight_decay",
                                   "warmup_steps", "amp")}
    w.add_hparams(hparams, {"hparam/accuracy": acc, "hparam/eval_loss": eval_loss})
    at(total, 7.5)
    w.close()

# ---------------------------------------------------------------------------------------------
# One run of every other format.

#: project folders of OUT_DIR written by the functions below (replaced on every run)
OTHER_PROJECTS = ("paddle", "mlflow", "tabular")


@contextmanager
def _cwd(path: Path):
    saved = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


@contextmanager
def pinned_visualdl():
    """Yield a clock; while inside, ``visualdl.LogWriter`` reads its time from it (only used for
    the wall time of the meta record ``LogWriter(display_name=...)`` writes on creation)."""
    import visualdl.writer.writer as vw

    clock = _Clock()
    saved = vw.time
    vw.time = clock
    try:
        yield clock
    finally:
        vw.time = saved


VISUALDL_RUN = "paddle/ernie-tiny/2024-06-20_09-00-00"


def write_visualdl(out: Path) -> None:
    """ERNIE-tiny fine-tuned on ChnSentiCorp, preempted after the step-160 checkpoint and resumed:
    two LogWriter sessions, two ``vdlrecords`` files in one run folder."""
    from visualdl import LogWriter

    rng = np.random.default_rng(51)
    total, lr, warm = 400, 5e-5, 40
    sessions = [  # (start UTC, first step, last step)
        ("2024-06-20 09:00:00", 0, 160),
        ("2024-06-20 10:12:30", 162, total),
    ]
    hparams = {"lr": lr, "batch_size": 32, "max_seq_len": 128, "scheduler": "linear", "fp16": "true"}
    weights = rng.normal(0, 0.05, 4096)
    sec_per_step = 1.37
    acc = 0.5
    # The writer puts md5(its file path) into hparam records: write with relative paths from
    # OUT_DIR so that the bytes do not depend on where OUT_DIR is.
    with pinned_visualdl() as clock, _cwd(out):
        for session, (start, first, last) in enumerate(sessions):
            base = float(_epoch(start))
            clock.now = base
            name = f"vdlrecords.{int(base):010d}.log"
            w = LogWriter(logdir=VISUALDL_RUN, file_name=name, display_name="ernie-tiny · ChnSentiCorp")

            def ms(step: int, offset: float = 0.0) -> int:
                return int(round((base + 8.0 + (step - first) * sec_per_step + offset) * 1000))

            w.add_hparams(hparams, ["eval/accuracy", "train/loss"], walltime=ms(first))
            if session == 0:
                config = {**hparams, "model": "ernie-3.0-tiny-medium-v2-zh", "dataset": "ChnSentiCorp",
                          "epochs": 2, "seed": 51, "paddle": "2.6.1", "paddlenlp": "2.8.0"}
                w.add_text("config", json.dumps(config, indent=2, ensure_ascii=False), 0, walltime=ms(0))
            else:
                w.add_text("notes", "# 续训 / resumed\n\nThe first job was preempted after the step-160 "
                           "checkpoint; this session resumed from it (same data order, same seed).",
                           first, walltime=ms(first))
            for step in range(first, last + 1, 2):
                clean = 0.19 + (0.69 - 0.19) * math.exp(-0.012 * step)
                loss = clean * (1.0 + rng.normal(0, 0.05))
                if step == 118:
                    loss = float("nan")  # fp16 loss-scale overflow, skipped by the optimizer
                cur_lr = lr * (step + 1) / warm if step < warm else lr * (total - step) / (total - warm)
                w.add_scalar("train/loss", loss, step, walltime=ms(step))
                w.add_scalar("train/lr", cur_lr, step, walltime=ms(step))
                if step % 40 == 0 and step > 0:
                    acc = float(np.clip(0.5 + 0.44 * (1 - math.exp(-0.011 * step)) + rng.normal(0, 0.004), 0, 1))
                    w.add_scalar("eval/accuracy", acc, step, walltime=ms(step, 6.0))
                    w.add_scalar("eval/loss", clean * 1.1 + rng.normal(0, 0.005), step, walltime=ms(step, 6.0))
                if step % 100 == 0 or step == last:
                    w.add_histogram("weights/encoder.layers.0.linear1", weights, step, buckets=24,
                                    walltime=ms(step, 6.5))
                    weights = weights * 0.995 + rng.normal(0, 0.002, weights.size)
                if step in (0, 200, total):
                    y, x = np.mgrid[0:24, 0:24] / 23.0
                    sharp = 1.0 + step / 60.0
                    att = np.exp(-sharp * 6 * (x - y) ** 2) + rng.normal(0, 0.08 / sharp, x.shape)
                    img = (np.clip(att / att.max(), 0, 1) * 255).round().astype(np.uint8)
                    w.add_image("attention/layer0_head0", np.stack([img, img // 2, 255 - img], axis=2), step,
                                walltime=ms(step, 7.0))
            w.close()


MLFLOW_STORE = "mlflow/mlruns"
MLFLOW_EXPERIMENT = ("1", "tabular-baselines")

# run name -> params, (start UTC, seconds per round, rounds), quirks
MLFLOW_RUNS = [
    dict(name="gbdt-depth4", params={"lr": 0.1, "depth": 4, "n_estimators": 120, "subsample": 0.8},
         start="2024-07-03 08:00:00", pace=0.9, rounds=120, seed=61, model_family="gbdt"),
    dict(name="gbdt-depth8", params={"lr": 0.05, "depth": 8, "n_estimators": 160, "subsample": 0.8},
         start="2024-07-03 08:30:00", pace=2.1, rounds=160, seed=62, model_family="gbdt",
         child=dict(name="gbdt-depth8-cv", start_after=30.0, folds=5)),
]


def _run_id(name: str) -> str:
    """A fixed 32-hex-digit id in place of mlflow's random uuid4().hex."""
    return hashlib.md5(f"{MLFLOW_EXPERIMENT[1]}/{name}".encode()).hexdigest()


def write_mlflow(out: Path) -> None:
    """Write the store with the real mlflow client into a scratch folder, make it deterministic
    and relocatable, then move it to ``out/mlflow/mlruns``."""
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    import mlflow

    times: dict[str, tuple[int, int]] = {}  # run name -> (start ms, end ms)
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "mlruns"
        mlflow.set_tracking_uri(store.as_uri())
        try:
            mlflow.set_experiment(MLFLOW_EXPERIMENT[1])
            ids: dict[str, str] = {}  # mlflow's random run id -> fixed id
            for cfg in MLFLOW_RUNS:
                rng = np.random.default_rng(cfg["seed"])
                start = _epoch(cfg["start"]) * 1000
                context = {"mlflow.user": "example", "mlflow.source.name": "train_gbdt.py",
                           "mlflow.source.type": "LOCAL"}
                with mlflow.start_run(run_name=cfg["name"], tags=context) as run:
                    ids[run.info.run_id] = _run_id(cfg["name"])
                    mlflow.log_params(cfg["params"])
                    mlflow.set_tag("model_family", cfg["model_family"])
                    mlflow.set_tag("dataset", "adult-income")
                    p = cfg["params"]
                    speed = 0.9 * p["lr"] * (1 + p["depth"] / 8)
                    floor = 0.295 - 0.004 * p["depth"]
                    auc = 0.5
                    t = start
                    for r in range(cfg["rounds"]):
                        t = start + int(round((4.0 + r * cfg["pace"]) * 1000))
                        train = floor * (1 - 0.01 * p["depth"]) + (0.69 - floor) * math.exp(-speed * r)
                        mlflow.log_metric("train/logloss", round(train * (1 + rng.normal(0, 0.004)), 6),
                                          step=r, timestamp=t)
                        if r % 5 == 4:
                            valid = floor + (0.69 - floor) * math.exp(-speed * r) + 0.0008 * max(0, r - 100)
                            auc = 0.5 + (0.905 + 0.003 * p["depth"] - 0.5) * (1 - math.exp(-speed * r * 1.2))
                            auc = round(auc + rng.normal(0, 0.0015), 6)
                            mlflow.log_metric("valid/logloss", round(valid + rng.normal(0, 0.002), 6),
                                              step=r, timestamp=t + 150)
                            mlflow.log_metric("valid/auc", auc, step=r, timestamp=t + 150)
                    mlflow.set_tag("best_iteration", str(cfg["rounds"] - 1))
                    mlflow.log_text(
                        f"# {cfg['name']}\n\nbest valid AUC {auc:.4f} after {cfg['rounds']} rounds\n"
                        f"params: {json.dumps(p, sort_keys=True)}\n",
                        "notes/summary.md",
                    )
                    end = t + 2000
                    if "child" in cfg:
                        c = cfg["child"]
                        c_start = end + int(c["start_after"] * 1000)
                        with mlflow.start_run(run_name=c["name"], nested=True, tags=context) as child:
                            ids[child.info.run_id] = _run_id(c["name"])
                            mlflow.log_params({**p, "folds": c["folds"]})
                            for fold in range(c["folds"]):
                                at = c_start + (fold + 1) * 41_000
                                fold_auc = round(auc + rng.normal(0, 0.004), 6)
                                # one step per cross-validation fold
                                mlflow.log_metrics({"valid/auc": fold_auc,
                                                    "valid/logloss": round(0.3 - 0.8 * (fold_auc - 0.9), 6),
                                                    "train/fit_seconds": round(38.5 + rng.normal(0, 1.5), 2)},
                                                   step=fold, timestamp=at)
                        c_end = c_start + c["folds"] * 41_000 + 1000
                        times[c["name"]] = (c_start, c_end)
                        end = c_end + 500
                    times[cfg["name"]] = (start, end)
        finally:
            mlflow.set_tracking_uri(None)
        _normalize_mlflow(store, ids, times)
        target = out / MLFLOW_STORE
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(store, target)


def _normalize_mlflow(store: Path, ids: dict[str, str], times: dict[str, tuple[int, int]]) -> None:
    """Rewrite what mlflow made up (ids, absolute paths, current times) in place."""
    import re

    first_start = min(start for start, _ in times.values())
    created = first_start - 60_000
    exp_ids: dict[str, str] = {}
    for exp_dir in sorted(p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")):
        meta = (exp_dir / "meta.yaml").read_text("utf-8")
        name = re.search(r"^name: (.*)$", meta, re.M).group(1)
        exp_ids[exp_dir.name] = "0" if name == "Default" else MLFLOW_EXPERIMENT[0]
    old_uri = store.resolve().as_uri()  # file:///<scratch>/mlruns

    def fix(text: str) -> str:
        text = text.replace(old_uri, "./mlruns")
        for old, new in exp_ids.items():
            text = text.replace(f"'{old}'", f"'{new}'").replace(f"/mlruns/{old}", f"/mlruns/{new}")
        for old, new in ids.items():
            text = text.replace(old, new)
        return text

    for exp_old, exp_new in exp_ids.items():
        exp_dir = store / exp_old
        meta = fix((exp_dir / "meta.yaml").read_text("utf-8"))
        meta = re.sub(r"^(creation_time|last_update_time): \d+$", rf"\1: {created}", meta, flags=re.M)
        (exp_dir / "meta.yaml").write_text(meta, "utf-8")
        for run_dir in sorted(p for p in exp_dir.iterdir() if p.is_dir() and p.name in ids):
            meta = fix((run_dir / "meta.yaml").read_text("utf-8"))
            run_name = re.search(r"^run_name: (.*)$", meta, re.M).group(1)
            start, end = times[run_name]
            meta = re.sub(r"^start_time: \d+$", f"start_time: {start}", meta, flags=re.M)
            meta = re.sub(r"^end_time: \d+$", f"end_time: {end}", meta, flags=re.M)
            (run_dir / "meta.yaml").write_text(meta, "utf-8")
            for tag in sorted((run_dir / "tags").rglob("*")):
                if tag.name.startswith("mlflow.source.git."):
                    tag.unlink()  # the commit of whatever repository this script ran in
                elif tag.is_file():
                    tag.write_text(fix(tag.read_text("utf-8")), "utf-8")
            run_dir.rename(exp_dir / ids[run_dir.name])
        if exp_new != exp_old:
            exp_dir.rename(store / exp_new)
    leftovers = [p for p in store.rglob("*") if p.is_file() and (
        any(old in p.read_text("utf-8", errors="replace") for old in [*ids, old_uri, str(store.resolve())])
    )]
    if leftovers:
        raise RuntimeError(f"mlflow store not fully normalized: {leftovers}")


TABULAR_CSV = "tabular/xgboost/2024-07-01_12-00-00/metrics.csv"
TABULAR_JSONL = "tabular/lightgbm/2024-07-02_12-00-00/metrics.jsonl"


def write_tabular(out: Path) -> None:
    """A wide CSV (as ``xgboost``'s ``evals_result`` dumped by hand) and JSON lines of LightGBM
    callbacks whose keys differ from line to line."""
    rng = np.random.default_rng(71)
    path = out / TABULAR_CSV
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["step", "train_loss", "valid_auc"])
    for step in range(150):
        train = 0.262 + (0.693 - 0.262) * math.exp(-0.035 * step) + rng.normal(0, 0.002)
        auc = 0.5 + 0.412 * (1 - math.exp(-0.05 * step)) + rng.normal(0, 0.0015)
        row = [step, f"{train:.6f}", f"{auc:.6f}"]
        if step in (57, 58):  # the eval set was skipped for two rounds (an interrupted callback)
            row[2] = ""
        if step == 100:
            row[1] = ""
        w.writerow(row)
    path.write_bytes(buf.getvalue().encode("utf-8"))

    path = out / TABULAR_JSONL
    path.parent.mkdir(parents=True, exist_ok=True)
    base = float(_epoch("2024-07-02 12:00:00"))
    lines = []
    for step in range(120):
        rec: dict = {"step": step, "timestamp": round(base + 2.0 + step * 0.35, 3)}
        if step == 0:
            rec.update(lr=0.05, num_leaves=31)
        loss = 0.27 + (0.693 - 0.27) * math.exp(-0.04 * step) + rng.normal(0, 0.002)
        rec["train_loss"] = float("nan") if step == 77 else round(loss, 6)
        if step % 10 == 9:
            rec["valid_loss"] = round(loss * 1.04 + rng.normal(0, 0.002), 6)
            rec["valid_auc"] = round(0.5 + 0.405 * (1 - math.exp(-0.045 * step)) + rng.normal(0, 0.0015), 6)
        lines.append(json.dumps(rec))  # NaN is written as a bare NaN, as Python's json does
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(Path(__file__).resolve().parent / "archive"),
                        help="output directory (default: examples/archive)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for project in (*EXPERIMENTS, *OTHER_PROJECTS):
        if (out / project).exists():
            shutil.rmtree(out / project)
    with pinned_tensorboardx() as clock:
        for project, models in EXPERIMENTS.items():
            for model, runs in models.items():
                for cfg in runs:
                    stamp = _real_time.strftime("%Y-%m-%d_%H-%M-%S",
                                                _real_time.strptime(cfg["start"], "%Y-%m-%d %H:%M:%S"))
                    write_run(clock, out / project / model / stamp, project, model, cfg)
    write_visualdl(out)
    write_mlflow(out)
    write_tabular(out)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in files)
    print(f"wrote {len(files)} files, {size / 1024:.1f} KiB, to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
