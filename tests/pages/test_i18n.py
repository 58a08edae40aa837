"""Message catalogs: both languages complete, every key used exists; a zh-CN build shows Chinese
interface strings and Chinese tag and run names, escaped, everywhere."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import ROOT

MESSAGES = ROOT / "templates" / "messages"
T_CALL = re.compile(r"""\bt\(\s*["']([A-Za-z0-9_.]+)["']""")
T_PREFIX = re.compile(r"""\bt\(\s*["']([A-Za-z0-9_.]+)["']\s*~""")
JS_CALL = re.compile(r"""\bmsg\(\s*["']([A-Za-z0-9_]+)["']""")
JS_PREFIX = re.compile(r"""\bmsg\(\s*["']([A-Za-z0-9_]+_)["']\s*\+""")


def _catalog(lang: str) -> dict[str, str]:
    return json.loads((MESSAGES / f"{lang}.json").read_text("utf-8"))


def test_both_languages_hold_the_same_keys_and_placeholders():
    en, zh = _catalog("en"), _catalog("zh-CN")
    assert set(en) == set(zh), set(en) ^ set(zh)
    for key in en:
        assert set(re.findall(r"\{(\w+)\}", en[key])) == set(re.findall(r"\{(\w+)\}", zh[key])), key
        assert zh[key].strip(), key


def test_every_key_used_is_in_the_catalog():
    en = _catalog("en")
    used: set[str] = set()
    prefixes: set[str] = set()
    for path in sorted((ROOT / "templates").glob("*.html")):
        text = path.read_text("utf-8")
        used |= set(T_CALL.findall(text))
        prefixes |= set(T_PREFIX.findall(text))
    for path in sorted((ROOT / "sitegen").glob("*.py")):
        used |= set(T_CALL.findall(path.read_text("utf-8")))
    assert len(used) > 80
    missing = sorted(k for k in used if k not in en and k not in prefixes)
    assert missing == []
    for prefix in prefixes:
        assert any(k.startswith(prefix) for k in en), prefix
    js = "".join(p.read_text("utf-8") for p in sorted((ROOT / "templates" / "static").glob("*.js")))
    js_used = set(JS_CALL.findall(js)) - set(JS_PREFIX.findall(js))
    assert js_used and sorted(k for k in js_used if "js." + k not in en) == []
    for prefix in JS_PREFIX.findall(js):
        assert any(k.startswith("js." + prefix) for k in en)


def test_templates_hold_no_untranslated_english(example_site: Path):
    """Text nodes of the templates themselves are markup or expressions only."""
    allowed = {"SHA-"}  # the hash's name, the same in every language
    for path in sorted((ROOT / "templates").glob("*.html")):
        text = re.sub(r"{%.*?%}|{{.*?}}|{#.*?#}", " ", path.read_text("utf-8"), flags=re.S)
        text = re.sub(r"<[^>]*>", " ", text)
        words = [w for w in re.findall(r"[A-Za-z][A-Za-z-]{2,}", text) if w not in allowed]
        assert words == [], (path.name, words)


@pytest.fixture(scope="module")
def zh_site(tmp_path_factory) -> Path:
    from tensorboardX import SummaryWriter

    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import scalar_event, version_event

    root = tmp_path_factory.mktemp("zh")
    for i, lr in enumerate((0.1, 0.01)):
        w = SummaryWriter(str(root / "archive" / "视觉" / "残差网络" / f"实验{i}"))
        w.add_text("hyperparameters/config", json.dumps({"学习率": lr, "optimizer": "sgd", "备注": "<b>粗</b>"}, ensure_ascii=False), 0)
        w.add_text("environment", "python: 3.11.7\ntorch: 2.3.1\ncuda: 12.1\ngpu: A100", 0)
        for step in range(30):
            w.add_scalar("损失/训练", 1.0 / (step + 1 + i), step)
        w.close()
        # tensorboardX would sanitise this tag; other writers do not
        hostile = version_event(1.7e9) + b"".join(scalar_event("准确率</script><b>", step, 1.7e9 + step, step / 30) for step in range(30))
        (Path(w.logdir) / "events.out.tfevents.1700000000.raw").write_bytes(hostile)
    out = root / "site"
    build(root / "archive", out, BuildOptions(config=Config(title="训练记录", language="zh-CN"), use_cache=False))
    return out


def test_zh_cn_build_has_chinese_interface_and_escaped_names(zh_site: Path):
    index = (zh_site / "index.html").read_text("utf-8")
    assert '<html lang="zh-CN">' in index
    for s in ("运行", "开始时间（UTC）", "最后一步", "对比运行", "搜索"):
        assert s in index, s
    for s in ("Last step", "Start (UTC)", "Made with", "Compare runs"):
        assert s not in index, s
    assert "实验0" in index and "视觉" in index
    run = next((zh_site / "runs").glob("*/index.html"))
    html = run.read_text("utf-8")
    assert "损失/训练" in html and "超参数" in html and "学习率" in html
    assert "准确率&lt;/script&gt;&lt;b&gt;" in html and "准确率</script>" not in html
    assert "<b>粗</b>" not in html  # hparam values are text, not markup
    assert all(ord(c) < 128 for c in run.parent.name), run.parent.name
    compare_html = (zh_site / "compare" / "all" / "index.html").read_text("utf-8")
    assert "对比：全部运行" in compare_html and "平滑" in compare_html
    block = compare_html.split('<script type="application/json" id="sitegen-page">', 1)[1].split("</script>", 1)[0]
    assert "损失/训练" in block and "准确率\\u003c/script\\u003e\\u003cb\\u003e" in block
    assert "准确率</script>" not in compare_html
    msgs = next((zh_site / "assets").glob("messages-*.js")).read_text("utf-8")
    assert "相对时间" in msgs
    specs = next((zh_site / "assets").glob("specs-*.js")).read_text("utf-8")
    assert "步数" in specs


def test_zh_cn_pages_render_in_chromium(page, zh_site: Path):
    page.goto((zh_site / "compare" / "all" / "index.html").as_uri())
    page.wait_for_selector(".chart.overlay svg g.smooth_marks path", timeout=20000)
    titles = page.eval_on_selector_all("figure.card[data-tag] figcaption", "fs => fs.map(f => f.firstChild.textContent.trim())")
    assert "损失/训练" in titles and "准确率</script><b>" in titles
    axis = page.eval_on_selector_all(".chart.overlay svg .role-axis-title text", "ts => ts.map(t => t.textContent)")
    assert "步数" in axis
    run = next((zh_site / "runs").glob("*/index.html"))
    page.goto(run.as_uri())
    page.wait_for_selector(".chart.drawn svg", timeout=20000)
    assert page.log.errors == [], page.log.errors
    assert all(u.startswith("file://") for u in page.log.requests)
