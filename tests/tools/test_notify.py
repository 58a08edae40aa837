"""``sitegen notify`` against a recording HTTP server on 127.0.0.1: each kind's payload byte for
byte, the signatures, retries on 5xx and timeouts, no retry on 4xx, an unreachable host, and
the webhook's token never printed."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.parse
from pathlib import Path

import pytest

from sitegen.tools.notify import LIMITS, Message, NotifyError, redact, send
from tests.support.cli import free_port, run_sitegen
from tests.support.webhook import Recorder

MSG = Message(
    "T: 1 new",
    [("New run a/b/<c>", "https://x.org/r/runs/a/index.html"), ("Removed a/b/d", "")],
    "https://x.org/r/index.html",
    {"counts": {"added": 1}},
)
NOW = 1_700_000_000.25


EXPECTED = {
    "slack": b'{"text":"*T: 1 new*\\n\xe2\x80\xa2 <https://x.org/r/runs/a/index.html|New run a/b/&lt;c&gt;>\\n'
             b'\xe2\x80\xa2 Removed a/b/d\\n<https://x.org/r/index.html|Open the site>"}',
    "feishu": b'{"content":{"text":"T: 1 new\\n- New run a/b/<c> https://x.org/r/runs/a/index.html\\n- Removed a/b/d\\n'
              b'https://x.org/r/index.html"},"msg_type":"text"}',
    "dingtalk": b'{"markdown":{"text":"### T: 1 new\\n- [New run a/b/\\\\<c\\\\>](https://x.org/r/runs/a/index.html)\\n'
                b'- Removed a/b/d\\n[Open the site](https://x.org/r/index.html)","title":"T: 1 new"},"msgtype":"markdown"}',
    "wecom": b'{"markdown":{"content":"### T: 1 new\\n- [New run a/b/\\\\<c\\\\>](https://x.org/r/runs/a/index.html)\\n'
             b'- Removed a/b/d\\n[Open the site](https://x.org/r/index.html)"},"msgtype":"markdown"}',
    "generic": b'{"counts":{"added":1},"items":[{"text":"New run a/b/<c>","url":"https://x.org/r/runs/a/index.html"},'
               b'{"text":"Removed a/b/d","url":""}],"link":"https://x.org/r/index.html","text":"New run a/b/<c>\\nRemoved a/b/d",'
               b'"title":"T: 1 new"}',
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_posts_its_payload_byte_for_byte(kind: str):
    with Recorder() as server:
        assert send(server.url(), MSG, kind=kind, now=NOW, sleep=lambda s: None) == 1
    ((path, headers, body),) = server.requests
    assert path == "/hook/SECRETTOKEN" and headers["Content-Type"] == "application/json; charset=utf-8"
    assert body == EXPECTED[kind]


def test_dingtalk_signs_in_the_query_and_feishu_in_the_body():
    secret = "SEC-abc123"
    with Recorder() as server:
        send(server.url("/robot/send?access_token=TOKEN"), MSG, kind="dingtalk", secret=secret, now=NOW)
        send(server.url(), MSG, kind="feishu", secret=secret, now=NOW)
    (ding_path, _, ding_body), (_, _, feishu_body) = server.requests
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(ding_path).query))
    ts = "1700000000250"  # milliseconds
    want = base64.b64encode(hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()).decode()
    assert query == {"access_token": "TOKEN", "timestamp": ts, "sign": want}
    assert ding_body == EXPECTED["dingtalk"]  # the body is not touched by the signature
    doc = json.loads(feishu_body)
    want = base64.b64encode(hmac.new(f"1700000000\n{secret}".encode(), b"", hashlib.sha256).digest()).decode()
    assert (doc["timestamp"], doc["sign"]) == ("1700000000", want)
    assert doc["content"] == json.loads(EXPECTED["feishu"])["content"]


def test_a_5xx_is_retried_with_backoff_and_a_4xx_is_not():
    waits: list[float] = []
    with Recorder((500, b"busy", 0.0), (200, b"ok", 0.0)) as server:
        assert send(server.url(), MSG, kind="slack", backoff=0.5, sleep=waits.append) == 2
    assert waits == [0.5] and len(server.requests) == 2 and server.requests[0][2] == server.requests[1][2]
    with Recorder((503, b"", 0.0)) as server:
        with pytest.raises(NotifyError, match=r"not delivered after 3 attempts: HTTP 503") as exc:
            send(server.url(), MSG, kind="slack", retries=2, backoff=0.5, sleep=waits.append)
    assert waits == [0.5, 0.5, 1.0] and len(server.requests) == 3 and "SECRETTOKEN" not in str(exc.value)
    with Recorder((400, b"invalid_payload", 0.0), (200, b"ok", 0.0)) as server:
        with pytest.raises(NotifyError, match=r"HTTP 400 .*\(not retried\)") as exc:
            send(server.url(), MSG, kind="slack", sleep=waits.append)
    assert len(server.requests) == 1 and "SECRETTOKEN" not in str(exc.value) and "/hook/***" in str(exc.value)


OK = {"slack": b"ok", "feishu": b'{"code":0,"msg":"success"}', "dingtalk": b'{"errcode":0,"errmsg":"ok"}',
      "wecom": b'{"errcode":0,"errmsg":"ok"}', "generic": b""}  # what each service answers on success


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_retries_a_500_then_delivers_and_fails_on_a_400_a_timeout_or_no_host(kind: str):
    """The floor, kind by kind: 500 then 200 (two identical posts), 400 (one post, not retried),
    no answer in time (every attempt made), nothing listening; the token never in the error."""
    secret = "s" if kind in ("dingtalk", "feishu") else ""
    waits: list[float] = []
    with Recorder((500, b"busy", 0.0), (200, OK[kind], 0.0)) as server:
        assert send(server.url(), MSG, kind=kind, secret=secret, now=NOW, backoff=0.5, sleep=waits.append) == 2
    assert waits == [0.5] and len(server.requests) == 2 and server.requests[0][2] == server.requests[1][2]
    failures = []
    with Recorder((400, b"bad request", 0.0), (200, OK[kind], 0.0)) as server:
        with pytest.raises(NotifyError, match=r"HTTP 400 .*\(not retried\)") as exc:
            send(server.url(), MSG, kind=kind, secret=secret, sleep=waits.append)
        failures.append(str(exc.value))
    assert len(server.requests) == 1
    with Recorder((200, OK[kind], 1.0)) as server:
        with pytest.raises(NotifyError, match=r"not delivered after 2 attempts: no answer within 0.2 s") as exc:
            send(server.url(), MSG, kind=kind, secret=secret, timeout=0.2, retries=1, sleep=lambda s: None)
        failures.append(str(exc.value))
    assert len(server.requests) == 2
    with pytest.raises(NotifyError, match=r"not delivered after 2 attempts: cannot connect") as exc:
        send(f"http://127.0.0.1:{free_port()}/hook/SECRETTOKEN", MSG, kind=kind, secret=secret, retries=1, sleep=lambda s: None)
    failures.append(str(exc.value))
    assert all("SECRETTOKEN" not in f and "\n" not in f for f in failures)


def test_a_refusal_in_a_200_answer_is_a_failure_without_retry():
    refusal = json.dumps({"errcode": 310000, "errmsg": "sign not match"}).encode()
    with Recorder((200, refusal, 0.0)) as server:
        with pytest.raises(NotifyError, match="refused the message: 310000 sign not match"):
            send(server.url("/robot/send?access_token=TOKEN"), MSG, kind="dingtalk", secret="s", sleep=lambda s: None)
    assert len(server.requests) == 1


def test_a_timeout_is_retried_then_fails():
    with Recorder((200, b"ok", 1.0)) as server:
        with pytest.raises(NotifyError, match=r"not delivered after 2 attempts: no answer within 0.2 s"):
            send(server.url(), MSG, kind="generic", timeout=0.2, retries=1, sleep=lambda s: None)
    assert len(server.requests) == 2


def test_an_unreachable_host_fails_with_one_line():
    url = f"http://127.0.0.1:{free_port()}/hook/SECRETTOKEN"  # nothing listens there
    with pytest.raises(NotifyError) as exc:
        send(url, MSG, kind="wecom", retries=1, sleep=lambda s: None)
    text = str(exc.value)
    assert "not delivered after 2 attempts: cannot connect" in text and "\n" not in text and "SECRETTOKEN" not in text


def test_long_messages_are_cut_to_each_kinds_limit():
    many = Message("T", [(f"New run project/model/run-{i:04d}", f"https://x.org/r/runs/{i}/index.html") for i in range(400)])
    with Recorder() as server:
        send(server.url(), many, kind="wecom")
        send(server.url(), many, kind="slack")
    wecom = json.loads(server.requests[0][2])["markdown"]["content"]
    assert len(wecom.encode()) <= LIMITS["wecom"] and wecom.endswith("more") and "run-0000" in wecom
    slack = json.loads(server.requests[1][2])["text"]
    assert len(slack) <= LIMITS["slack"] and "run-0399" in slack  # (all of it fits Slack's)


def test_redact_hides_tokens():
    assert redact("https://oapi.dingtalk.com/robot/send?access_token=abc&x=1") == "https://oapi.dingtalk.com/robot/***?access_token=***&x=***"
    assert redact("https://hooks.slack.com/services/T0/B0/XYZ") == "https://hooks.slack.com/services/***"
    assert redact("https://open.feishu.cn/open-apis/bot/v2/hook/uuid") == "https://open.feishu.cn/open-apis/***"


def test_the_command_posts_a_sites_changes_and_exits_5_when_it_cannot(tmp_path: Path):
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.corpus import write_metrics

    logs, out = tmp_path / "logs", tmp_path / "site"
    write_metrics(logs / "vision" / "resnet" / "r0", 0, 5, seed=0)
    build(logs, out, BuildOptions(config=Config(title="Nightly"), cache=tmp_path / "cache"))
    config = tmp_path / "sitegen.toml"
    config.write_text('title = "Nightly"\nbase_url = "https://reports.example.org/reports/"\n[notify]\nkind = "dingtalk"\n')
    with Recorder() as server:
        ok = run_sitegen("notify", out, "--config", config, env={"SITEGEN_WEBHOOK": server.url("/robot/send?access_token=TOKEN"),
                                                                   "SITEGEN_WEBHOOK_SECRET": "s3cret"})
    assert ok.returncode == 0, ok.stderr
    ((path, _, body),) = server.requests
    text = json.loads(body)["markdown"]["text"]
    assert text.startswith("### Nightly: 1 new, 0 grew, 0 finished, 0 removed\n")
    assert "(https://reports.example.org/reports/runs/vision-resnet-r0-" in text
    assert "[Compare vision/resnet](https://reports.example.org/reports/compare/vision-resnet-" in text
    assert "sign=" in path and "s3cret" not in ok.stderr and "TOKEN" not in ok.stderr
    with Recorder((400, b"bad", 0.0)) as server:
        bad = run_sitegen("notify", out, "--webhook", server.url(), "--kind", "slack", "--config", config)
    assert bad.returncode == 6 and len(server.requests) == 1
    assert bad.stderr.strip().count("\n") == 0 and "HTTP 400" in bad.stderr and "SECRETTOKEN" not in bad.stderr
