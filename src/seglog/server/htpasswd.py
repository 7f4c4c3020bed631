"""The users of HTTP basic authentication (`seglog serve --auth-basic-file`): an Apache htpasswd file, read as
Pulsar's AuthenticationProviderBasic reads its `basicAuthConf`, and checked with the same password hashes.

One `user:hash` a line. Pulsar accepts two hash forms, and so does seglog: APR1-MD5 (`$apr1$salt$hash`,
`htpasswd -m`, Apache's default) and DES crypt (13 characters, `htpasswd -d`; it reads only the first 8
characters of a password). The other forms htpasswd writes (bcrypt `-B`, SHA-1 `-s`, SHA-256/512 crypt, plain
text `-p`) are refused when the file is read, naming the line: Pulsar would refuse every password checked
against them. Blank lines and `#` comments are skipped, as Apache httpd skips them (Pulsar refuses them). A
user named twice is refused (Pulsar keeps the last line silently).

The hashes are checked with libpass, the maintained fork of passlib: pure Python, so the same on every
platform. The standard library's crypt module wraps the system's crypt(3), which has no APR1-MD5; it is
deprecated and gone in Python 3.13."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passlib.hash import apr_md5_crypt, des_crypt  # libpass

from seglog.errors import ConfigFileError, InvalidArgumentError

APR1_PREFIX = "$apr1$"
ACCEPTED = ("APR1-MD5 ($apr1$..., htpasswd -m) or DES crypt (13 characters, htpasswd -d), the forms Pulsar's "
            "AuthenticationProviderBasic checks")
# hash forms htpasswd (or other tools) write that Pulsar does not check, named in the error
_OTHER_FORMS = (("$2y$", "bcrypt (htpasswd -B)"), ("$2a$", "bcrypt"), ("$2b$", "bcrypt"),
                ("{SHA}", "SHA-1 (htpasswd -s)"), ("$5$", "SHA-256 crypt (htpasswd -2)"),
                ("$6$", "SHA-512 crypt (htpasswd -5)"), ("$1$", "MD5 crypt ($1$, not Apache's $apr1$)"))


def _scheme(hash_: str) -> Any:
    """The libpass handler of a hash in a form Pulsar checks (by its look alone), or None."""
    if hash_.startswith(APR1_PREFIX):
        return apr_md5_crypt
    return des_crypt if des_crypt.identify(hash_) else None


def _check_form(hash_: str, user: str) -> None:
    """InvalidArgumentError naming the form of a hash Pulsar could not check (never the hash itself)."""
    argument = f"password hash of user {user!r}"
    scheme = _scheme(hash_)
    if scheme is None:
        form = next((name for prefix, name in _OTHER_FORMS if hash_.startswith(prefix)),
                    f"a {len(hash_)}-character value that is no hash of either form (plain text, htpasswd -p?)")
        raise InvalidArgumentError(argument, form, ACCEPTED)
    try:
        scheme.from_string(hash_)
    except ValueError as error:
        raise InvalidArgumentError(argument, f"{hash_[:len(APR1_PREFIX)]}...", ACCEPTED, detail=str(error)) from None


@dataclass(frozen=True)
class Htpasswd:
    """The users of an htpasswd file and their password hashes, checked as they were read."""

    source: str  # the file, for messages
    hashes: Mapping[str, str]  # user → hash

    @classmethod
    def read(cls, path: str | Path, *, argument: str = "htpasswd file") -> Htpasswd:
        """The users of the htpasswd file at `path`; InvalidArgumentError (ConfigFileError for a line, with its
        number) when it cannot be read or holds a line Pulsar could not check."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidArgumentError(argument, str(path), "a readable htpasswd file (htpasswd -c -m FILE USER "
                                       "writes one)", detail=error.strerror or str(error)) from None
        except UnicodeDecodeError as error:
            raise InvalidArgumentError(argument, str(path), "an htpasswd file in UTF-8",
                                       detail=f"byte {error.start} is not UTF-8") from None
        return cls.parse(text, str(path), argument=argument)

    @classmethod
    def parse(cls, text: str, source: str, *, argument: str = "htpasswd file") -> Htpasswd:
        """The users of htpasswd text read from `source` (named in the errors)."""
        hashes: dict[str, str] = {}
        lines: dict[str, int] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            user, _, hash_ = line.partition(":")
            if not user or not hash_ or ":" in hash_:
                shown = "a line without 'user:'" if not user else f"{user}:..." if hash_ else user
                raise ConfigFileError(source, [number], InvalidArgumentError(
                    "entry", shown, "user:hash, one user a line, as htpasswd writes them"))
            if user in lines:
                raise ConfigFileError(source, [lines[user], number], InvalidArgumentError(
                    "user", user, "each user on one line only"))
            try:
                _check_form(hash_, user)
            except InvalidArgumentError as error:
                raise ConfigFileError(source, [number], error) from None
            hashes[user] = hash_
            lines[user] = number
        if not hashes:
            raise InvalidArgumentError(argument, source, "an htpasswd file with at least one user:hash line",
                                       detail="it names no user")
        return cls(source, hashes)

    def check(self, user: str, password: str) -> bool:
        """Whether `password` is `user`'s (False for a user the file does not name)."""
        hash_ = self.hashes.get(user)
        if hash_ is None:
            return False
        try:
            return bool(_scheme(hash_).verify(password, hash_))
        except ValueError:  # a password the hash cannot take (DES crypt refuses NUL characters)
            return False
