"""server/htpasswd.py without a server: the users of `seglog serve --auth-basic-file`, checked with the hashes
Pulsar's AuthenticationProviderBasic checks (APR1-MD5 and DES crypt), against hashes other programs made, and
every way a file is refused (naming the line, never echoing a hash)."""

from __future__ import annotations

import pytest
from passlib.hash import apr_md5_crypt, des_crypt

from seglog.errors import ConfigFileError, InvalidArgumentError
from seglog.server.htpasswd import Htpasswd

# Made by Apache's htpasswd -m for admin / 123456: pulsar-client-python's tests/test-conf/.htpasswd
APACHE_APR1 = "$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf."
# crypt(3) of glibc (libxcrypt) for "secret" with salt "ab", as htpasswd -d makes it
GLIBC_DES = "abNANd1rDfiNc"


def test_hashes_made_by_apache_and_glibc_check():
    users = Htpasswd.parse(f"admin:{APACHE_APR1}\nbob:{GLIBC_DES}\n", "users")
    assert users.check("admin", "123456")
    assert not users.check("admin", "1234567") and not users.check("admin", "")
    assert users.check("bob", "secret")
    assert not users.check("bob", "secreT")
    assert not users.check("nobody", "123456")
    assert not users.check("bob", "sec\0ret")  # DES crypt cannot take NUL: a wrong password, not an error


def test_passwords_with_colons_and_des_cryptes_eight_characters():
    users = Htpasswd.parse(f"carol:{apr_md5_crypt.hash('pa:ss:word')}\ndave:{des_crypt.hash('password')}", "f")
    assert users.check("carol", "pa:ss:word") and not users.check("carol", "pa")
    assert users.check("dave", "password") and users.check("dave", "password and more")  # as crypt(3): 8 count


def test_comments_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / ".htpasswd"
    path.write_text(f"# users of the test service\n\nadmin:{APACHE_APR1}\n   \n")
    users = Htpasswd.read(path)
    assert users.source == str(path) and list(users.hashes) == ["admin"]


@pytest.mark.parametrize(("text", "said"), [
    ("admin", "line 1: invalid entry 'admin'; accepted: user:hash"),
    (f"# x\n:{GLIBC_DES}", "line 2: invalid entry \"a line without 'user:'\""),
    ("admin:", "line 1: invalid entry 'admin'"),
    (f"admin:{GLIBC_DES}:extra", "line 1: invalid entry 'admin:...'"),
    (f"a:{GLIBC_DES}\nb:{GLIBC_DES}\na:{APACHE_APR1}", "lines 1 and 3: invalid user 'a'; accepted: each user on one"),
    ("a:$2y$05$c4WoMPo3SXsafkva.HHa6uXQZWr7oboPiC2bT/r7q1BB8I2s0BRqC", "'bcrypt (htpasswd -B)'"),
    ("a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "'SHA-1 (htpasswd -s)'"),
    ("a:$6$salt$hash", "'SHA-512 crypt (htpasswd -5)'"),
    ("a:$1$salt$uPGMG/b3UteTK/XIYeUpb1", "MD5 crypt ($1$, not Apache's $apr1$)"),
    ("a:plaintext", "'a 9-character value that is no hash of either form (plain text, htpasswd -p?)'"),
    ("a:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUk", "'$apr1$...': malformed apr_md5_crypt hash"),
])
def test_lines_pulsar_could_not_check_are_refused_naming_them(text, said):
    with pytest.raises(ConfigFileError) as refused:
        Htpasswd.parse(text, "users.htpasswd")
    message = str(refused.value)
    assert message.startswith("users.htpasswd, ") and said in message
    assert "accepted" in message
    for secret in ("W6ph5Mm5Pz8GgiULbPgzG37mj9g", "c4WoMPo3SXsafkva", "plaintext", "KGYPuMoLUou3i6vUk"):
        assert secret not in message  # a hash (or a password written as one) is never echoed


def test_files_that_name_no_one_or_cannot_be_read(tmp_path):
    with pytest.raises(InvalidArgumentError, match="it names no user; accepted: an htpasswd file with at least"):
        Htpasswd.parse("# nobody yet\n", "f")
    with pytest.raises(InvalidArgumentError, match="--auth-basic-file '.*missing': No such file.*htpasswd -c -m"):
        Htpasswd.read(tmp_path / "missing", argument="--auth-basic-file")
    (tmp_path / "latin1").write_bytes(b"j\xf6rg:" + GLIBC_DES.encode())
    with pytest.raises(InvalidArgumentError, match="byte 1 is not UTF-8; accepted: an htpasswd file in UTF-8"):
        Htpasswd.read(tmp_path / "latin1")
