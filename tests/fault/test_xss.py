"""Hostile content: tags, run folder names, text, hparams and file names that try to run script.

A site is built from such an archive and every page is opened in headless Chromium over file://;
every button, tab and link is clicked. Nothing may set ``window.__xss``, open a dialog, or write
outside the output folder.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from sitegen.config import Config
from sitegen.pipeline.build import BuildOptions, build

P1 = "<script>window.__xss=1</script>"
P2 = '"><img src=x onerror="window.__xss=2">'
P3 = '[click me](javascript:window.__xss=3) [also](JaVaScRiPt:window.__xss=3) <a href="javascript:window.__xss=3">raw</a>'
P4 = "</script><script>window.__xss=4</script>"
SEP = "a\u2028b\u2029c"
TPL = "{{7*7}}"
NAMES = [P1, P2, f"x{SEP}", TPL, "x..", "a_b", " .hidden-ish", "CON"]  # folder names (no "/" possible)


def _archive(root: Path) -> Path:
    from tensorboardX import SummaryWriter

    arch = root / "arch"
    for i, name in enumerate(NAMES):
        d = arch / "proj" / name
        w = SummaryWriter(str(d))
        for step in range(3):
            for tag in (P1, P2, P4, f"loss{SEP}", TPL, "ok/loss"):
                w.add_scalar(tag, float(step + i), step, walltime=1.7e9 + step)
        w.add_text(P4, f"# {P1}\n\n{P2}\n\n{P3}\n\n{P4} {SEP} {TPL}\n\n<img src=x onerror=window.__xss=5>", 1)
        w.add_text("notes", "[ok](https://example.com) [rel](other.html)", 1)
        w.add_image(P2, np.zeros((3, 4, 4), np.uint8), 1)
        w.add_hparams({P1: P2, P4: 1.0, TPL: SEP}, {"hparam/" + P2: 1.0}, name=P2)
        w.close()
    # a nested a/b next to a_b: slugs must not collide
    w = SummaryWriter(str(arch / "proj" / "a" / "b"))
    w.add_scalar("loss", 1.0, 0)
    w.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from visualdl import LogWriter
    with LogWriter(logdir=str(arch / "vdl" / P2)) as lw:
        lw.add_scalar(P1, 1.0, 1)
        lw.add_text(P4, P3, 1)
        lw.add_hparams({P1: P4}, [P2])
        lw.add_image(P1, np.zeros((4, 4, 3), np.uint8), 1)
    # a non-image payload in an image summary must never become a file shown as an image
    _trackers(arch)
    return arch


def _trackers(arch: Path) -> None:
    """Hostile names and values in a HF Trainer state, Lightning and Keras CSV files and a dvclive folder."""
    import csv
    import json

    hf = arch / "hf" / P2
    (hf / "checkpoint-2").mkdir(parents=True)
    state = {
        "global_step": 2,
        "best_metric": 1.0,
        "best_model_checkpoint": P3,
        "trial_name": P4,
        "trial_params": {P1: TPL},
        "log_history": [{"step": 1, P1: 1.0, "eval_" + P2: 2.0}, {"step": 2, "train_runtime": 1.0, P4: P1, TPL: SEP}],
    }
    (hf / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(state))
    (hf / "config.json").write_text(json.dumps({P1: P2, "nested": {P4: TPL}}))
    for folder, header in ((arch / "pl" / "version_0", ["step", P1, P2, P4, TPL]), (arch / "keras", ["epoch", P1, P2, P4, f"x{SEP}"])):
        folder.mkdir(parents=True)
        with open(folder / ("metrics.csv" if header[0] == "step" else "h.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows([[i] + [float(i)] * 4 for i in range(3)])
    (arch / "pl" / "version_0" / "hparams.yaml").write_text(
        f"{json.dumps(P1)}: {json.dumps(P4)}\nact: !!python/name:{P1} ''\n{json.dumps(TPL)}: {json.dumps(P3)}\n"
    )
    dv = arch / "dv" / "dvclive"
    (dv / "plots" / "metrics").mkdir(parents=True)
    (dv / "plots" / "metrics" / f"{P2}.tsv").write_text(f"step\t{P2}\n0\t1.0\n1\t2.0\n")
    (dv / "metrics.json").write_text(json.dumps({P1: 1.0, P4: P2}))
    (dv / "params.yaml").write_text(f"{json.dumps(P1)}: {json.dumps(P4)}\n")
    from tests.support.wandbgen import hand_made

    hand_made(arch / "wb" / "wandb" / "offline-run-20240101_000000-hostile" / "run-hostile.wandb", [P1, P2, P3, P4, TPL, SEP])
    (dv.parent / "dvc.lock").write_text(
        f"schema: '2.0'\nstages:\n  {json.dumps(P2)}:\n    cmd: {json.dumps(P1)}\n    deps:\n    - path: {json.dumps(P4)}\n      md5: {json.dumps(TPL)}\n"
    )


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("xss")
    arch = _archive(root)
    out = root / "site"
    result = build(arch, out, BuildOptions(config=Config(title=P1 + TPL), use_cache=False))
    return out, result


def test_every_file_stays_inside_the_output(hostile_site):
    out, result = hostile_site
    root = out.resolve()
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            assert not p.is_symlink(), p
            assert p.resolve().is_relative_to(root), p
            assert "<" not in name and ">" not in name and '"' not in name and "\u2028" not in name, p
            files.append(p)
    assert len(files) > 10
    # every run got its own page: the nested a/b and a_b did not collide
    pages = [p for p in files if p.name == "index.html" and p.parent.parent.name == "runs"]
    assert len(pages) == result.runs == len(NAMES) + 2 + 5  # + the tracker runs


def _hostile_scripts(text: str) -> list[str]:
    bad = []
    for needle in ("<script>window.__xss", "<img src=x onerror", 'href="javascript:', "href='javascript:", "href=javascript:"):
        if needle.lower() in text.lower():
            bad.append(needle)
    return bad


def test_no_payload_survives_unescaped_in_any_file(hostile_site):
    out, _ = hostile_site
    for p in out.resolve().rglob("*"):
        if p.suffix in (".html", ".js") and not p.is_relative_to(out.resolve() / "assets"):
            text = p.read_text("utf-8")
            assert not _hostile_scripts(text), (p, _hostile_scripts(text))
            if p.suffix == ".js":
                assert "\u2028" not in text and "\u2029" not in text and "</script" not in text.lower(), p


def test_pages_in_chromium(hostile_site, page):
    out, _ = hostile_site
    root = out.resolve()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pages = sorted(p for p in root.rglob("*.html") if not p.is_relative_to(root / "assets"))
    assert any(p.parent.parent.name == "runs" for p in pages)
    seen_template = False
    for html in pages:
        page.goto(html.as_uri())
        page.wait_for_load_state("load")
        # a comparison page puts its hyperparameter table in after the first charts
        page.wait_for_function("() => !document.getElementById('hp-table-later')", timeout=20000)
        assert page.evaluate("typeof window.__xss") == "undefined", html
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
        for h in hrefs:
            scheme = h.strip().lower().split(":", 1)[0] if ":" in h else ""
            assert scheme in ("", "http", "https", "mailto"), (html, h)
        seen_template = seen_template or TPL in page.inner_text("body")
        # click every button, tab, summary, header cell and in-page link (links to other pages
        # need no click: their targets are all visited, and their schemes are checked above)
        page.evaluate("""() => {
            const sel = 'button, [role=tab], summary, th, a[href^="#"], input[type=checkbox], select';
            for (const el of Array.from(document.querySelectorAll(sel)).slice(0, 200)) {
                try { el.click(); } catch (e) {}
            }
        }""")
        page.wait_for_timeout(50)
        assert page.evaluate("typeof window.__xss") == "undefined", html
    assert not dialogs
    assert seen_template  # {{7*7}} shown as text, not evaluated
    assert not [e for e in page.log.errors if "__xss" in e]
