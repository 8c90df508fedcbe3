"""Approver keys (rule R13): where they live, what makes one usable, and what a seal
proves. Real files in a private directory; the CLI's ``clearance approvers`` too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clearance.errors import ConfigError
from clearance.harness.approvers import HOST, Approvers, Credential, approvers_directory


def test_a_key_is_private_and_named(tmp_path: Path) -> None:
    keyring = Approvers(tmp_path / "conf")
    alice = keyring.add("alice")
    key = tmp_path / "conf" / "approvers" / "alice.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "conf").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "conf" / "approvers").stat().st_mode & 0o777 == 0o700
    assert keyring.credential("alice") == alice and len(alice.key) == 32
    assert alice.key.hex() not in repr(alice)
    assert keyring.names() == ["alice"]
    with pytest.raises(ConfigError, match="exists"):
        keyring.add("alice")
    for bad in ("", "@host", "../x", "a/b", "-x", "x" * 65, "al ice"):
        with pytest.raises(ConfigError, match="approver's name"):
            keyring.add(bad)
    assert keyring.remove("alice") and not keyring.remove("alice")
    assert keyring.credential("alice") is None and keyring.names() == []


def test_a_key_others_could_read_or_swap_is_no_key(tmp_path: Path) -> None:
    keyring = Approvers(tmp_path / "conf")
    keyring.add("alice")
    key = tmp_path / "conf" / "approvers" / "alice.key"
    key.chmod(0o640)
    assert keyring.credential("alice") is None
    key.chmod(0o600)
    assert keyring.credential("alice") is not None
    (tmp_path / "conf" / "approvers").chmod(0o777)
    assert keyring.credential("alice") is None
    (tmp_path / "conf" / "approvers").chmod(0o700)
    # A link to a key is not a key (an agent could point it at a file it wrote).
    planted = tmp_path / "planted.key"
    planted.write_text("00" * 32 + "\n")
    planted.chmod(0o600)
    (tmp_path / "conf" / "approvers" / "mallory.key").symlink_to(planted)
    assert keyring.credential("mallory") is None
    assert keyring.names() == ["alice"]
    # Not a key's shape.
    short = tmp_path / "conf" / "approvers" / "bob.key"
    short.write_text("abcd\n")
    short.chmod(0o600)
    assert keyring.credential("bob") is None


def test_a_seal_verifies_under_its_own_key_only(tmp_path: Path) -> None:
    keyring = Approvers(tmp_path / "conf")
    alice, bob = keyring.add("alice"), keyring.add("bob")
    seal = alice.seal(b"message")
    assert keyring.verify(seal, b"message")
    assert not keyring.verify(seal, b"messagE")
    assert not keyring.verify(type(seal)("bob", seal.mac), b"message")
    assert not keyring.verify(bob.seal(b"other"), b"message")
    stranger = Credential("alice", os.urandom(32))  # the right name, another key
    assert not keyring.verify(stranger.seal(b"message"), b"message")
    assert not keyring.knows(stranger) and keyring.knows(alice)
    keyring.remove("alice")
    assert not keyring.verify(seal, b"message")  # removed: their seals stop counting


def test_the_host_key_is_made_once_and_shared_by_processes(tmp_path: Path) -> None:
    keyring = Approvers(tmp_path / "conf")
    host = keyring.host()
    assert host.name == HOST and host.is_host
    assert (tmp_path / "conf" / "host.key").stat().st_mode & 0o777 == 0o600
    assert Approvers(tmp_path / "conf").host() == host
    assert keyring.verify(host.seal(b"m"), b"m")
    assert keyring.names() == []  # the host is no approver
    memory = Approvers(None)
    assert memory.host() != host and memory.host() == memory.host()
    assert not memory.verify(host.seal(b"m"), b"m")
    with pytest.raises(ConfigError):
        memory.add("alice")


def test_the_directory_is_the_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CLEARANCE_APPROVERS_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert approvers_directory() == tmp_path / "xdg" / "clearance"
    monkeypatch.setenv("CLEARANCE_APPROVERS_DIR", str(tmp_path / "explicit"))
    assert approvers_directory() == tmp_path / "explicit"
