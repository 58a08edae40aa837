"""``sitegen htpasswd``: apr1 lines nginx's auth_basic accepts, equal to OpenSSL's."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from sitegen.tools.htpasswd import apr1, check, htpasswd_line
from tests.support.cli import run_sitegen


def test_apr1_matches_openssl():
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to check the apr1 implementation")
    for password, salt in [("secret", "X"), ("pässwörd", "12345678"), ("a" * 40, "Zz./9"), ("x" * 16, "s"), ("y", "saltsaltEXTRA")]:
        ref = subprocess.run(["openssl", "passwd", "-apr1", "-salt", salt, "-stdin"], input=password.encode(),
                             capture_output=True, check=True).stdout.decode().strip()
        assert apr1(password, salt) == ref
        assert check(password, ref) and not check(password + "!", ref)


def test_htpasswd_command():
    r = run_sitegen("htpasswd", "alice", "--password-stdin", input="s3cret pass\n")
    assert r.returncode == 0, r.stderr
    user, hashed = r.stdout.strip().split(":", 1)
    assert user == "alice" and re.fullmatch(r"\$apr1\$[./0-9A-Za-z]{8}\$[./0-9A-Za-z]{22}", hashed)
    assert check("s3cret pass", hashed)
    assert run_sitegen("htpasswd", "a:b", "--password-stdin", input="x\n").returncode == 2
    assert run_sitegen("htpasswd", "alice", "--password-stdin", input="").returncode == 2
    assert htpasswd_line("bob", "pw", salt="abc") == "bob:" + apr1("pw", "abc")


def test_htpasswd_bcrypt():
    import bcrypt

    r = run_sitegen("htpasswd", "alice", "--password-stdin", "--scheme", "bcrypt", "--cost", "5", input="s3cret pass\n")
    assert r.returncode == 0, r.stderr
    user, hashed = r.stdout.strip().split(":", 1)
    assert user == "alice" and re.fullmatch(r"\$2b\$05\$[./0-9A-Za-z]{53}", hashed)
    assert bcrypt.checkpw(b"s3cret pass", hashed.encode()) and not bcrypt.checkpw(b"s3cret pas", hashed.encode())
    for bad in (["--cost", "3"], ["--cost", "18"], ["--scheme", "md5"]):
        assert run_sitegen("htpasswd", "alice", "--password-stdin", "--scheme", "bcrypt", *bad, input="x\n").returncode == 2
    assert run_sitegen("htpasswd", "alice", "--password-stdin", "--scheme", "bcrypt", input="x" * 73 + "\n").returncode == 2
