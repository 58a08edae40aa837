"""One index column per hyperparameter, even when runs log it under two names.

The rule: a key's *canonical name* is the key without a wrapper namespace (``hparams/``,
``hparam/``, ``params.``, ``config.``, ``args.``, ``hp.``, ``hyperparameters.``), in
snake_case and lower case, then mapped through a short table of common spellings
(``lr`` -> ``learning_rate``, ``bs`` -> ``batch_size``, ...). Keys with one canonical name
share a column unless one run logs two of them with different values (then they are
different things and keep their own columns). The column is headed by the spelling most runs
use (ties: the shorter, then the first alphabetically); its other spellings go in the header's
title.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from sitegen.model import HParamValue, text_value

WRAPPERS = re.compile(r"^(?:(?:hparams?|hyper_?params?|hyperparameters|params|config|args|hp)[/.])+", re.I)
ALIASES = {
    "lr": "learning_rate",
    "learningrate": "learning_rate",
    "bs": "batch_size",
    "batchsize": "batch_size",
    "wd": "weight_decay",
    "weightdecay": "weight_decay",
    "epochs": "num_epochs",
    "n_epochs": "num_epochs",
    "max_epochs": "num_epochs",
    "num_train_epochs": "num_epochs",
    "optim": "optimizer",
    "seed_value": "seed",
    "random_seed": "seed",
}


@dataclass
class HParamColumn:
    name: str  # the header
    keys: list[str]  # the spellings it gathers, the header's first

    def value(self, hp: dict[str, HParamValue]) -> HParamValue | None:
        for k in self.keys:
            if k in hp:
                return hp[k]
        return None

    def has(self, hp: dict[str, HParamValue]) -> bool:
        return any(k in hp for k in self.keys)


def canonical(key: str) -> str:
    """The name a key is compared by (see the module's rule)."""
    bare = WRAPPERS.sub("", key) or key
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", bare)
    norm = re.sub(r"[\s\-]+", "_", snake).lower()
    return ALIASES.get(norm, norm)


def columns(hps: list[dict[str, HParamValue]]) -> list[HParamColumn]:
    """Every hyperparameter key of ``hps`` gathered into columns, in the order of their headers."""
    uses = Counter(k for h in hps for k in h)
    by_name: dict[str, list[str]] = {}
    for k in sorted(uses, key=str):
        by_name.setdefault(canonical(k), []).append(k)
    out: list[HParamColumn] = []
    for keys in by_name.values():
        clashing = len(keys) > 1 and any(len({text_value(h[k]) for k in keys if k in h}) > 1 for h in hps if sum(k in h for k in keys) > 1)
        groups = [[k] for k in keys] if clashing else [keys]
        for g in groups:
            g.sort(key=lambda k: (-uses[k], len(k), k))
            out.append(HParamColumn(g[0], g))
    return sorted(out, key=lambda c: c.name)
