"""The one commit a run records, normalised: trend pages order runs by it.

Runs record their commit in many places: a tracker's git fields (W&B, Comet and ClearML readers
give ``tag:git.commit``/``git.branch``, MLflow ``mlflow.source.git.commit``), a CI's environment
variables (``GITHUB_SHA``, ``CI_COMMIT_SHA``, ...) in an environment file or text, or a
hyperparameter such as ``git_commit``. The first source in :data:`COMMIT_KEYS` order wins; a value
counts only when it is a hex hash (7 to 64 digits; a ``git describe`` string gives its hash).
Everything here is text from logs: nothing is executed or used as a path.
"""

from __future__ import annotations

import re

from sitegen.model import Commit, Environment, HParamValue

#: keys naming a commit, most specific first (compared lower-case, ``.``/``-``/space as ``_``;
#: a bare ``revision`` is left out: a model's or data set's revision is a hash too)
COMMIT_KEYS = (
    "git_commit",
    "mlflow_source_git_commit",
    "github_sha",
    "ci_commit_sha",
    "circle_sha1",
    "travis_commit",
    "bitbucket_commit",
    "buildkite_commit",
    "drone_commit_sha",
    "build_sourceversion",
    "build_vcs_number",
    "git_sha",
    "git_hash",
    "git_rev",
    "git_revision",
    "commit_sha",
    "commit_hash",
    "commit_id",
    "commit",
    "vcs_revision",
)
TAG_KEYS = ("git_tag", "mlflow_source_git_tag", "ci_commit_tag", "buildkite_tag", "travis_tag", "circle_tag", "drone_tag")
BRANCH_KEYS = (
    "git_branch",
    "mlflow_source_git_branch",
    "ci_commit_branch",
    "github_head_ref",
    "circle_branch",
    "travis_branch",
    "buildkite_branch",
    "drone_branch",
    "bitbucket_branch",
    "build_sourcebranchname",
    "ci_commit_ref_name",
    "branch",
)
HEX = re.compile(r"[0-9a-f]{7,64}")
DESCRIBE = re.compile(r".*-g([0-9a-f]{7,64})")  # git describe: <tag>-<n>-g<hash>
DIRTY = re.compile(r"[-+.](dirty|modified)$")
MAX_NAME = 200


def _norm(key: str) -> str:
    return re.sub(r"[.\-/ ]+", "_", key.strip().lower())


def _names(key: str) -> list[str]:
    """The key as compared: whole, then its last two and its last ``.``/``/``-separated parts
    (``env.GITHUB_SHA``, ``mlflow.source.git.commit``; ``model_revision`` is one part)."""
    parts = [p for p in re.split(r"[./]+", key) if p]
    return list(dict.fromkeys([_norm(key), _norm("_".join(parts[-2:])), _norm(parts[-1] if parts else "")]))


def _hash(value: str) -> str | None:
    v = DIRTY.sub("", value.strip().lower())
    if HEX.fullmatch(v):
        return v
    m = DESCRIBE.fullmatch(v)
    return m.group(1) if m else None


def _name(value: str) -> str | None:
    v = value.strip()
    for prefix in ("refs/heads/", "refs/tags/"):
        if v.startswith(prefix):
            v = v[len(prefix) :]
    return v[:MAX_NAME] if v and "\n" not in v else None


def candidates(meta: dict[str, str], env: Environment | None, hparams: dict[str, HParamValue]) -> list[list[tuple[str, str]]]:
    """``(key, text)`` pairs where a run may name its commit, in tiers of trust: the tracker's
    own fields (``tag:`` keys of the reader), the environment and provenance, the hyperparameters."""
    tiers = [[(k[4:], v) for k, v in sorted(meta.items()) if k.startswith("tag:") and isinstance(v, str)]]
    tiers.append([] if env is None else sorted(env.provenance.items()) + sorted(env.items.items()))
    tiers.append([(k, v) for k, v in sorted(hparams.items()) if isinstance(v, str)])
    return tiers


def _first(tiers: list[list[tuple[str, str]]], keys: tuple[str, ...], parse) -> tuple[str, str] | None:
    """In the first tier that has one, the pair whose key comes first in ``keys`` and whose value
    ``parse`` accepts: ``(key, parsed value)``."""
    for pairs in tiers:
        found: dict[str, tuple[str, str]] = {}
        for k, v in pairs:
            for name in _names(k):
                if name in keys and name not in found:
                    got = parse(v)
                    if got is not None:
                        found[name] = (k, got)
        for name in keys:
            if name in found:
                return found[name]
    return None


def commit_of(meta: dict[str, str], env: Environment | None = None, hparams: dict[str, HParamValue] | None = None) -> Commit | None:
    """The commit the run records, its tag and branch when known; None when it names none."""
    tiers = candidates(meta, env, hparams or {})
    got = _first(tiers, COMMIT_KEYS, _hash)
    if got is None:
        return None
    tag = _first(tiers, TAG_KEYS, _name)
    branch = _first(tiers, BRANCH_KEYS, _name)
    ref = next((v.strip() for pairs in tiers for k, v in pairs if _norm(k).endswith("github_ref") and v.strip().startswith("refs/")), "")
    if tag is None and ref.startswith("refs/tags/"):
        tag = ("GITHUB_REF", _name(ref) or "")
    if branch is None and ref.startswith("refs/heads/"):
        branch = ("GITHUB_REF", _name(ref) or "")
    return Commit(got[1], tag[1] if tag else None, branch[1] if branch else None, got[0])
