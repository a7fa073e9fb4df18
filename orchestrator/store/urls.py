"""Store URLs: normalising what users write, and showing one without its secrets.

A credential can hide in several places: `user:password@host` (the password may itself contain `@` or `:`),
query parameters (`?password=...`, libpq's `sslpassword`, tokens), or a URL malformed enough that a parser
returns a fragment of it. `display_url` masks every one of them and shows an unparseable URL not at all;
`has_credentials` says whether a URL carries any (`specsweep submit` refuses those)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

UNPARSEABLE = "<unparseable store URL>"
SECRET_PARAMS = {"password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "access_token", "api_key",
                 "apikey", "auth_token", "sslkey_password"}


def normalize_url(url: str) -> str:
    """Accept plain `postgresql://` URLs (use psycopg 3) and bare file paths (SQLite)."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _parts(url: str) -> tuple[str, str | None, str, str, list[tuple[str, str]], str]:
    """(scheme, userinfo, hostinfo, path, query pairs) of a URL, or ValueError when it does not parse cleanly."""
    from sqlalchemy.engine import make_url

    make_url(url)  # what the store will use must parse too (raises ArgumentError / ValueError)
    parts = urlsplit(url)
    if not parts.scheme:
        raise ValueError("no scheme")
    parts.port  # noqa: B018 - raises ValueError on a malformed port
    userinfo, at, hostinfo = parts.netloc.rpartition("@")  # the last @: a password may contain @
    query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    return parts.scheme, (userinfo if at else None), hostinfo, parts.path, query, parts.fragment


def display_url(url: str) -> str:
    """The URL with every credential masked (for logs, rows, reports and job metadata)."""
    try:
        scheme, userinfo, hostinfo, path, query, fragment = _parts(normalize_url(url))
    except Exception:
        return UNPARSEABLE
    netloc = hostinfo
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{hostinfo}"
    masked = [(k, "***" if k.lower() in SECRET_PARAMS else v) for k, v in query]
    out = f"{scheme}://{netloc}{path}"
    if masked:
        out += "?" + urlencode(masked, safe="*/:")
    return out + ("#***" if fragment else "")


def has_credentials(url: str) -> bool:
    """A password in the user part or a secret query parameter; an unparseable URL counts (it may hide one)."""
    try:
        _, userinfo, _, _, query, _ = _parts(normalize_url(url))
    except Exception:
        return True
    if userinfo is not None and ":" in userinfo:
        return True
    return any(k.lower() in SECRET_PARAMS for k, _ in query)


def resolve_store_url(store: str | None) -> str:
    """Which store a command uses: --store, else $SPECSWEEP_DB, else the first line of the file
    $SPECSWEEP_DB_FILE (for URLs with a password: kept out of command lines and job metadata), else SQLite under
    SPECSWEEP_HOME. The one place this order is written (the CLI and `query.dataframe` use it)."""
    import os

    from ..errors import StoreError
    from ..paths import default_store_url

    if store:
        return store
    if os.environ.get("SPECSWEEP_DB"):
        return os.environ["SPECSWEEP_DB"]
    path = os.environ.get("SPECSWEEP_DB_FILE")
    if path:
        try:
            return open(os.path.expanduser(path), encoding="utf-8").read().strip().splitlines()[0].strip()
        except (OSError, IndexError) as e:
            raise StoreError(f"SPECSWEEP_DB_FILE={path}: cannot read a store URL from it ({e})") from None
    return default_store_url()
