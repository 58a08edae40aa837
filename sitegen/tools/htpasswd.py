"""``sitegen htpasswd USER``: a password line nginx's ``auth_basic_user_file`` accepts.

The default hash is Apache's apr1 variant of the FreeBSD MD5-crypt scheme (``$apr1$salt$digest``),
written from its description: nginx supports it everywhere, on its own, without the system's
crypt(). It is fast, not strong: pair it with TLS, long random passwords and the kit's rate
limit. ``--scheme bcrypt`` (the ``bcrypt`` package; nginx checks it with the system's crypt())
makes a stolen password file far slower to attack, at a price nginx pays on *every* request:
docs/publishing.md gives the cost measured per request and the cost we suggest.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import secrets
import sys

from sitegen.errors import UsageError

log = logging.getLogger(__name__)
ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MAGIC = b"$apr1$"
# digest bytes packed three at a time (the scheme's fixed shuffle), then the last byte alone
_GROUPS = ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5))


def _b64(value: int, chars: int) -> str:
    out = []
    for _ in range(chars):
        out.append(ITOA64[value & 0x3F])
        value >>= 6
    return "".join(out)


def apr1(password: str | bytes, salt: str) -> str:
    """The ``$apr1$<salt>$<22 chars>`` hash of ``password`` (salt: up to 8 characters of ITOA64)."""
    pw = password.encode("utf-8") if isinstance(password, str) else bytes(password)
    salt = salt[:8]
    if not salt or any(c not in ITOA64 for c in salt):
        raise UsageError(f"apr1 salt must be 1-8 characters of [./0-9A-Za-z], got {salt!r}")
    sb = salt.encode("ascii")

    alternate = hashlib.md5(pw + sb + pw).digest()
    ctx = hashlib.md5(pw + MAGIC + sb)
    remaining = len(pw)
    while remaining > 0:
        ctx.update(alternate[: min(16, remaining)])
        remaining -= 16
    bits = len(pw)
    while bits:  # one byte per bit of the length: a NUL for 1, the password's first byte for 0
        ctx.update(b"\0" if bits & 1 else pw[:1])
        bits >>= 1
    digest = ctx.digest()

    for i in range(1000):  # key stretching, mixing in password and salt on a fixed pattern
        round_ = hashlib.md5(pw if i & 1 else digest)
        if i % 3:
            round_.update(sb)
        if i % 7:
            round_.update(pw)
        round_.update(digest if i & 1 else pw)
        digest = round_.digest()

    encoded = "".join(_b64((digest[a] << 16) | (digest[b] << 8) | digest[c], 4) for a, b, c in _GROUPS)
    encoded += _b64(digest[11], 2)
    return f"$apr1${salt}${encoded}"


def check(password: str | bytes, hashed: str) -> bool:
    """Whether ``password`` matches an ``$apr1$`` hash."""
    parts = hashed.split("$")
    if len(parts) != 4 or parts[1] != "apr1":
        return False
    return secrets.compare_digest(apr1(password, parts[2]), hashed)


def new_salt() -> str:
    return "".join(secrets.choice(ITOA64) for _ in range(8))


#: bcrypt's work factor: 2**cost rounds; nginx pays it on every request (docs/publishing.md)
BCRYPT_COST = 8
BCRYPT_COSTS = range(4, 18)


def bcrypt_hash(password: str, cost: int = BCRYPT_COST) -> str:
    """``$2b$<cost>$...``; needs the ``bcrypt`` package (``pip install "sitegen[bcrypt]"``)."""
    if cost not in BCRYPT_COSTS:
        raise UsageError(f"bcrypt cost must be {BCRYPT_COSTS.start}-{BCRYPT_COSTS.stop - 1}, got {cost}")
    pw = password.encode("utf-8")
    if len(pw) > 72:  # bcrypt reads 72 bytes; the rest would be ignored silently
        raise UsageError("bcrypt uses only the first 72 bytes of a password; use a shorter one or apr1")
    try:
        import bcrypt  # an optional dependency, needed only here
    except ImportError:
        raise UsageError('--scheme bcrypt needs the bcrypt package: pip install "sitegen[bcrypt]"') from None
    return bcrypt.hashpw(pw, bcrypt.gensalt(rounds=cost)).decode("ascii")


def htpasswd_line(user: str, password: str, *, salt: str | None = None, scheme: str = "apr1", cost: int = BCRYPT_COST) -> str:
    if not user or any(c in user for c in ":\r\n") or user != user.strip():
        raise UsageError(f"user name must be non-empty, without ':' or line breaks or surrounding spaces: {user!r}")
    if not password:
        raise UsageError("empty password")
    if scheme == "bcrypt":
        return f"{user}:{bcrypt_hash(password, cost)}"
    if scheme != "apr1":
        raise UsageError(f"unknown scheme {scheme!r}: expected apr1 or bcrypt")
    return f"{user}:{apr1(password, salt or new_salt())}"


def read_password(*, from_stdin: bool) -> str:
    """The first line of stdin (``--password-stdin``), else asked twice on the terminal."""
    if from_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    if not sys.stdin.isatty():
        raise UsageError("no terminal to ask the password on; use --password-stdin")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Again: ") != first:
        raise UsageError("the passwords differ")
    return first
