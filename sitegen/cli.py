"""Command line: ``sitegen build | check | notify | report | export | verify | serve | htpasswd``.

Errors become one line and an exit code, so a nightly CI job can tell what happened:
0 built (or verified), 1 built with problems under ``--strict`` (or ``verify`` found a mismatch),
2 bad usage or config (argparse errors too), 3 the build failed (I/O or internal error, a full
disk too; the live site is unchanged), 4 another build holds the site or its cache (the message
names it; ``--wait``), 5 a gate failed (``build --gate``, ``check``; the site is published),
6 the notification was not delivered (``notify``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from sitegen import __version__
from sitegen.config import Config, find_config, load_config
from sitegen.errors import SitegenError, UsageError, notice, still_writing
from sitegen.pipeline import stamp as stamps
from sitegen.pipeline.executors import tune_process
from sitegen.pipeline.locks import BuildBusy, held
from sitegen.publish.staging import tidy
from sitegen.resources import default_cache_dir

log = logging.getLogger("sitegen")

EXIT_OK, EXIT_WARNINGS, EXIT_USAGE, EXIT_FAILED, EXIT_BUSY, EXIT_GATES, EXIT_NOTIFY = 0, 1, 2, 3, 4, 5, 6


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sitegen", description="Turn an archive of ML training logs into a static website.")
    p.add_argument("--version", action="version", version=f"sitegen {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the site of an archive")
    b.add_argument("archive", type=_path_or_url, help="archive folder, or a URL (s3://bucket/logs, gs://..., file://...)")
    b.add_argument("--out", type=Path, required=True, help="site folder (replaced atomically)")
    b.add_argument("--config", type=Path, help="sitegen.toml (default: ARCHIVE/sitegen.toml, else ./sitegen.toml)")
    b.add_argument("--strict", action="store_true", help="exit 1 when anything was damaged or skipped")
    b.add_argument("--no-verify", action="store_true", help="skip payload checksums (faster)")
    b.add_argument("--cache", type=_path_or_url, help="decode cache folder or URL (default ~/.cache/sitegen; keep it between CI runs)")
    b.add_argument("--no-cache", action="store_true", help="decode everything again and write no cache")
    b.add_argument("--jobs", type=int, default=0, help="worker processes for decoding (default: one per core)")
    b.add_argument("--executor", choices=("local", "dask"), help="where runs are decoded: this machine (default) or a Dask cluster")
    b.add_argument(
        "--scheduler", metavar="ADDR", help="Dask scheduler address (tcp://host:8786); with --executor dask (default: a local cluster)"
    )
    b.add_argument(
        "--keep", type=int, default=3, metavar="N", help="builds kept beside the live one for rollback, including it (default 3)"
    )
    b.add_argument(
        "--fsync",
        action="store_true",
        help="write the new build to storage before it goes live, so it survives a power cut (waits for the disk)",
    )
    b.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="wait up to SECONDS for another build of the same site or cache to end (default: do not wait for one of the "
        "same site, exit 4 at once; wait up to 15 minutes for one of another site that uses the same cache)",
    )
    b.add_argument("--gate", action="store_true", help="exit 5 when a [gates] rule fails on a run new since the last build")
    b.add_argument("--quiet", action="store_true", help="print errors only")
    c = sub.add_parser("check", help="the [gates] of a site's new runs (from SITE/changes.json); exit 5 when one fails")
    c.add_argument("site", type=Path)
    c.add_argument("--config", type=Path, help="sitegen.toml whose [gates] to evaluate (default: the results the build recorded)")
    c.add_argument("--quiet", action="store_true")
    n = sub.add_parser("notify", help="post a site's changes since the last build to a chat webhook")
    n.add_argument("site", type=Path)
    n.add_argument("--webhook", metavar="URL", help="the webhook (default: [notify] webhook, else $SITEGEN_WEBHOOK)")
    n.add_argument("--kind", choices=("slack", "feishu", "dingtalk", "wecom", "generic"), help="payload shape (default: [notify] kind)")
    n.add_argument("--config", type=Path, help="sitegen.toml ([notify], base_url, title, language)")
    n.add_argument("--base-url", help="where the site is served, for the links (default: base_url of the config)")
    n.add_argument("--always", action="store_true", help="post even when nothing changed")
    n.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each attempt (default 10)")
    n.add_argument("--quiet", action="store_true")
    r = sub.add_parser("report", help="one run's or model's summary (metrics, baselines, gates, links) as .md or .html")
    r.add_argument("target", metavar="RUN_OR_GROUP", help="a run's name, or a model or project (e.g. vision/resnet50)")
    r.add_argument("--site", type=Path, required=True, help="the built site (its changes.json)")
    r.add_argument("--out", type=Path, required=True, help="FILE.md or FILE.html")
    r.add_argument("--config", type=Path, help="sitegen.toml (base_url for the links, title, language)")
    r.add_argument("--quiet", action="store_true")
    v = sub.add_parser("verify", help="re-check a site (and its archive) against SITE/manifest.json")
    v.add_argument("site", type=Path)
    v.add_argument("--archive", type=Path, help="also re-check the source log files")
    v.add_argument("--quiet", action="store_true", help="print mismatches only")
    s = sub.add_parser("serve", help="preview a site on 127.0.0.1 with the nginx kit's headers")
    s.add_argument("site", type=Path)
    s.add_argument("--port", type=int, default=8000, help="port (0: any free one; default 8000)")
    s.add_argument("--quiet", action="store_true", help="no request log")
    h = sub.add_parser(
        "htpasswd",
        help="print an htpasswd line (apr1, or bcrypt) for nginx auth_basic",
        description="Print USER:HASH for an nginx auth_basic_user_file: apr1-md5 (default), or bcrypt, which makes a stolen "
        "file much slower to attack but costs nginx its work factor on every request (see docs/publishing.md).",
    )
    h.add_argument("user")
    h.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    h.add_argument("--scheme", choices=("apr1", "bcrypt"), default="apr1", help="hash scheme (default apr1)")
    h.add_argument("--cost", type=int, default=8, help="bcrypt cost, 4-17: 2**COST rounds on every request (default 8)")
    e = sub.add_parser("export", help="write every scalar of an archive to .parquet or .csv")
    e.add_argument("archive", type=Path)
    e.add_argument("--out", type=Path, required=True, help="FILE.parquet or FILE.csv")
    e.add_argument("--no-verify", action="store_true")
    e.add_argument("--quiet", action="store_true")
    return p


def _path_or_url(s: str) -> Path | str:
    """A URL stays a string (``Path`` would turn ``s3://b/k`` into ``s3:/b/k``)."""
    if "://" not in s:
        return Path(s)
    from sitegen.tools.remote import is_url

    return s if is_url(s) else Path(s)


def _executor(args: argparse.Namespace, config: Config) -> Any:
    """The executor the flags name, else ``[executor]`` in sitegen.toml, else the default (None)."""
    from sitegen.pipeline.executors import executor_for

    section = config.executor
    kind = args.executor or ("dask" if args.scheduler else None) or section.kind or "local"
    scheduler = args.scheduler or (section.scheduler if kind == "dask" else None) or None
    if scheduler and kind != "dask":
        raise UsageError("--scheduler needs --executor dask")
    if kind == "local" and not args.jobs:
        return None
    return executor_for(kind, workers=args.jobs, scheduler=scheduler)


def _build(args: argparse.Namespace) -> int:
    if args.config is None:  # sitegen.toml at the archive's root, else here
        args.config = find_config(args.archive)
    log.info("config: %s", args.config if args.config is not None else "none found (defaults)")
    config = load_config(args.config)
    if args.keep < 1:
        raise UsageError(f"--keep must be at least 1, got {args.keep}")
    if isinstance(args.archive, Path) and not args.archive.is_dir():
        raise UsageError(f"{args.archive}: no such archive folder")
    if args.wait is not None and not 0 <= args.wait < 1e9:
        raise UsageError(f"--wait must be a number of seconds (0 or more), got {args.wait}")
    local_cache = None if args.no_cache or isinstance(args.cache, str) else args.cache or default_cache_dir()
    # held from before the fast path reads the live build until the stamp is written: another
    # build's half-published state is never read, and never published over
    with held(args.out, local_cache, args.wait):
        return _build_held(args, config)


def _build_held(args: argparse.Namespace, config: Config) -> int:
    sde = source_date_epoch()
    stamp = cache = None
    if isinstance(args.archive, Path) and not args.no_cache and not isinstance(args.cache, str):
        # the no-change fast path: answered before numpy and pyarrow are imported
        cache = args.cache or default_cache_dir()
        stamp = stamps.inputs(args.archive, {"verify": not args.no_verify, "cache": str(cache), "sde": sde}, args.config)
        same = stamps.unchanged(args.out, cache, stamp)
        if same is not None:
            tidy(args.out, args.keep)
            return _gated(args, config, None, _built(args, same.runs, same.files, args.out, same.problems))
    from sitegen.pipeline.build import BuildOptions, build

    progress = _Progress(enabled=not args.quiet)
    options = BuildOptions(
        config=config,
        verify=not args.no_verify,
        cache=args.cache,
        use_cache=not args.no_cache,
        keep=args.keep,
        source_date_epoch=sde,
        durable=args.fsync,
        executor=_executor(args, config),
        progress=progress,
        wait=args.wait,
    )
    try:
        result = build(args.archive, args.out, options)
    finally:
        progress.done()
    if stamp is not None and cache is not None:
        stamps.write(args.out, cache, stamp, folders=result.folders, runs=result.runs, files=result.files)
    return _gated(args, config, result.changes, _built(args, result.runs, result.files, result.out, result.problems))


def _gated(args: argparse.Namespace, config: Config, changes: dict | None, code: int) -> int:
    """With ``--gate``: exit 5 when a gate failed on the runs this build brought (a kept live
    build brought none); the step summary for GitHub Actions either way."""
    if not args.gate:
        return code
    return _report_gates(changes, config, code, kept=changes is None)


def _report_gates(changes: dict | None, config: Config, code: int, *, kept: bool = False) -> int:
    from sitegen.pages import changes as news
    from sitegen.pages.i18n import translator

    t = translator(config.language)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if changes is None:
        log.info("nothing changed since the last build: no new run to gate")
        if summary:
            _append(summary, f"# {t('changes.title')}\n\n{t('changes.none')}\n")
        return code
    bad = news.failures(changes)
    for r in bad:
        line = f" (sitegen.toml line {r['line']})" if r.get("line") else ""
        log.error("gate failed: %s: %s%s: %s", r["run"], r["rule"], line, r["detail"])
    if summary:
        _append(summary, news.markdown(changes, t, base_url=config.base_url))
    gates = changes.get("gates") or {}
    if gates:
        log.info("gates: %d results on %d new runs, %d failed", len(gates.get("results", [])), len(gates.get("evaluated", [])), len(bad))
    return EXIT_GATES if bad else code


def _append(path: str, text: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY (a file the runner shows as the job's summary)."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        log.warning("cannot write the step summary %s: %s", path, exc.strerror or exc)


def _read_changes(site: Path) -> dict:
    import json

    path = Path(site) / "changes.json"
    try:
        doc = json.loads(path.read_bytes())
        if not isinstance(doc, dict) or doc.get("schema") != "sitegen/changes" or not isinstance(doc.get("changes"), dict):
            raise ValueError("not a sitegen changes document")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file (a site built before sitegen wrote changes.json?)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable: {exc}") from None
    return doc


def _check(args: argparse.Namespace) -> int:
    doc = _read_changes(args.site)
    config = load_config(args.config)
    if args.config is not None:  # evaluate the config's gates now, on the runs the build brought
        from sitegen.prepare import changes, gates

        states = [s for s in map(changes.from_json, doc.get("runs", [])) if s is not None]
        fresh = [c["name"] for k in ("added", "grown", "finished") for c in doc["changes"][k]]
        doc = {**doc, "gates": gates.evaluate(config.gates, fresh, states)}
    if not doc.get("gates"):
        log.info("%s: no gate configured", args.site)
    return _report_gates(doc, config, EXIT_OK)


def _notify(args: argparse.Namespace) -> int:
    from sitegen.pages import changes as news
    from sitegen.pages.i18n import translator
    from sitegen.tools.notify import Message, NotifyError, redact, send

    config = load_config(args.config)
    doc = _read_changes(args.site)
    url = args.webhook or config.notify.webhook or os.environ.get("SITEGEN_WEBHOOK", "")
    if not url:
        raise UsageError("no webhook: give --webhook URL, [notify] webhook or $SITEGEN_WEBHOOK")
    if not args.always and news.empty(doc) and not news.failures(doc):
        log.info("%s: nothing changed since the last build; nothing posted", args.site)
        return EXIT_OK
    base = args.base_url if args.base_url is not None else config.base_url
    if not base:
        log.warning("no base URL (--base-url or base_url in the config): the message has no links")
    elif not base.endswith("/"):
        base += "/"
    title, items, link = news.notice(doc, translator(config.language), title=config.title, base_url=base)
    counts = {"counts": doc["counts"], "gates": (doc.get("gates") or {}).get("counts")}
    kind = args.kind or config.notify.kind
    try:
        attempts = send(url, Message(title, items, link, counts), kind=kind, secret=os.environ.get(config.notify.secret_env, ""),
                        timeout=args.timeout)  # fmt: skip
    except NotifyError as exc:
        print(f"sitegen: error: {exc}", file=sys.stderr)
        return EXIT_NOTIFY
    log.info("posted the changes to %s (%s, %d attempt(s))", redact(url), kind, attempts)
    return EXIT_OK


def _built(args: argparse.Namespace, runs: int, files: int, out: Path, problems: list) -> int:
    writing = [p for p in problems if still_writing(p)]
    resumed = [p for p in problems if notice(p) and not still_writing(p)]
    problems = [p for p in problems if not notice(p)]
    log.info("built %d runs, %d files into %s; %d problems", runs, files, out, len(problems))
    # notices: a live archive has runs being written and runs resumed, and --strict must pass on them
    if writing:
        log.info("%d log files end in a record still being written (left for the next build)", len(writing))
    if resumed:
        log.info("%d tags have steps that go back (resumed runs: their charts show the newest records)", len(resumed))
    if args.strict and problems:
        log.error("%d problems while reading (--strict)", len(problems))
        return EXIT_WARNINGS
    return EXIT_OK


def source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` (reproducible-builds.org): the one time allowed in the output."""
    raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise UsageError(f"SOURCE_DATE_EPOCH must be a whole number of seconds, got {raw!r}")
    return int(raw)


class _Progress:
    """Stage progress: a rewritten line when stdout is a terminal, plain log lines otherwise."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = enabled and sys.stdout.isatty()
        self.shown = False

    def __call__(self, stage: str, step: int, steps: int) -> None:
        if not self.enabled:
            return
        if self.tty:
            sys.stdout.write(f"\r\033[K[{step}/{steps}] {stage}...")
            sys.stdout.flush()
            self.shown = True
        else:
            log.info("[%d/%d] %s", step, steps, stage)

    def done(self) -> None:
        if self.shown:
            sys.stdout.write("\r\033[K")
            sys.stdout.flush()
            self.shown = False


def _report(args: argparse.Namespace) -> int:
    from sitegen.fileio import atomic_write
    from sitegen.pages.i18n import translator
    from sitegen.pages.report import report_html, report_markdown
    from sitegen.prepare import changes, report

    config = load_config(args.config)
    suffix = args.out.suffix.lower()
    if suffix not in (".md", ".html"):
        raise UsageError(f"{args.out}: the report must end in .md or .html")
    doc = _read_changes(args.site)
    states = [s for s in map(changes.from_json, doc.get("runs", [])) if s is not None]
    metrics = [m for m in doc.get("metrics", []) if isinstance(m, str)]
    run = next((s for s in states if s.name == args.target), None)
    if run is not None:
        rep = report.run_report(run, states, metrics, doc.get("gates"))
    else:
        rep = report.group_report(args.target.strip("/"), states, metrics, doc.get("gates"))
        if not rep["runs"]:
            raise UsageError(f"{args.target}: no such run, model or project in {args.site}")
    md = report_markdown(rep, translator(config.language), title=config.title, base_url=config.base_url)
    text = md if suffix == ".md" else report_html(md, title=f"{config.title}: {args.target}", language=config.language)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, text.encode("utf-8"))
    log.info("wrote the report of %s to %s", args.target, args.out)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from sitegen.publish.manifest import verify

    bad = verify(args.site, archive=args.archive)
    for line in bad:
        print(line)
    if bad:
        log.error("%s: %d files do not match the manifest", args.site, len(bad))
        return EXIT_WARNINGS
    log.info("%s: every file matches the manifest%s", args.site, " and the archive" if args.archive else "")
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from sitegen.tools.serve import serve

    serve(args.site, port=args.port, quiet=args.quiet)
    return EXIT_OK


def _htpasswd(args: argparse.Namespace) -> int:
    from sitegen.tools.htpasswd import htpasswd_line, read_password

    password = read_password(from_stdin=args.password_stdin)
    print(htpasswd_line(args.user, password, scheme=args.scheme, cost=args.cost))
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from sitegen.ingest.api import read_scalars
    from sitegen.model import ReadOptions

    table = read_scalars(args.archive, options=ReadOptions(verify=not args.no_verify))
    out: Path = args.out
    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise SitegenError(f"{out}: the output must end in .parquet or .csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if suffix == ".parquet":
        pq.write_table(table, tmp)
    else:
        pacsv.write_csv(table, tmp)
    tmp.replace(out)
    log.info("wrote %d scalars to %s", table.num_rows, out)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """The command line, callable from Python: it changes nothing process-wide but logging's
    configuration (see :func:`run` for the console script)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.ERROR if getattr(args, "quiet", False) else logging.INFO,
        format="%(levelname)s: %(message)s" if sys.stderr.isatty() else "sitegen: %(levelname)s: %(message)s",
    )
    try:
        commands = {
            "build": _build,
            "check": _check,
            "notify": _notify,
            "report": _report,
            "export": _export,
            "verify": _verify,
            "serve": _serve,
            "htpasswd": _htpasswd,
        }
        return commands[args.command](args)
    except BuildBusy as exc:
        print(f"sitegen: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except SitegenError as exc:
        print(f"sitegen: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        after = "; nothing was published, the live site is unchanged" if args.command == "build" else ""
        print(f"sitegen: error: {where}{exc.strerror or exc}{after}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("sitegen: interrupted", file=sys.stderr)
        return 130
    except Exception:  # a bug: show it, but never as exit 1 ("built with warnings")
        import traceback

        traceback.print_exc()
        print("sitegen: internal error (please report it); the live site is unchanged", file=sys.stderr)
        return EXIT_FAILED


def run() -> None:
    """The ``sitegen`` console script (and ``python -m sitegen``): this process is sitegen's
    alone, so it is tuned for a build first (:func:`sitegen.pipeline.executors.tune_process`)."""
    tune_process()
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
