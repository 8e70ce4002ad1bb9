"""`memoria token`'s signer: the secret of the Memoria the token is for, or a refusal.

A token signed with any other secret is refused by that Memoria's gateway (401). Without
MEMORIA_AUTH_SECRET the secret is the one kept in the data directory, which the gateway
creates when it first starts: a directory that has none was never used by a Memoria (a
mistyped MEMORIA_DATA_DIR, or none set where the instance runs elsewhere), and a secret made
there now would sign tokens nobody accepts.
"""

from __future__ import annotations

from memoria_runtime.auth import SECRET_FILE, TokenIssuer
from memoria_runtime.instance import resolved_data_dir
from memoria_runtime.settings import AuthSettings


class TokenRefused(Exception):
    """No token can be made that the intended gateway would accept; the message says why."""


def issuer_for(settings: AuthSettings, ttl: int | None, *, create_secret: bool) -> TokenIssuer:
    longest = settings.token_ttl_seconds
    if ttl is not None and ttl > longest:
        raise TokenRefused(
            f"--ttl {ttl} is longer than MEMORIA_TOKEN_TTL_SECONDS ({longest}), the longest a "
            "gateway honours a token: raise that setting where the gateway runs (and here)"
        )
    data_dir = resolved_data_dir(settings)
    kept = data_dir / SECRET_FILE
    if settings.auth_secret is None and not kept.exists() and not create_secret:
        raise TokenRefused(
            f"no Memoria has used {data_dir} (it holds no {SECRET_FILE}), so no gateway would "
            "accept a token signed here. Set MEMORIA_DATA_DIR to the data directory of the "
            "running Memoria (or MEMORIA_AUTH_SECRET to its secret); or, for a Memoria that "
            "will use this directory, pass --create-secret"
        )
    return TokenIssuer.from_settings(settings, ttl)
