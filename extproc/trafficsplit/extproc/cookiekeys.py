"""`--cookie-key-file`, re-read while the processor runs: the keys sticky.mode persistent seals cookies with.

The file is a mounted Secret (a Gateway's, which the operator rotates; or the chart's `cookieKeysSecret`). The kubelet
updates a Secret volume in place (an atomic swap of the directory the file links to), so the processor reads the file
again every `KEY_FILE_POLL_SECONDS` and, when its bytes changed, seals with the new current key from then on. The
file is a few hundred bytes: comparing the bytes costs less than trusting a stat. A changed file that does not parse
(a hand edit) keeps the loaded keys and is logged, as the publish TLS files are (tls.py); a file that cannot be read at
start stops the processor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.persistent import CookieSigner

log = logging.getLogger(__name__)

KEY_FILE_POLL_SECONDS = 5.0
MAX_KEY_FILE_BYTES = 4096  # two keys of at most a few hundred bytes; a bigger file is not ours


class CookieKeyFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._bytes = self._read()
        self.signer = CookieSigner.from_text(self._bytes)  # SpecError, OSError: the caller stops

    def _read(self) -> bytes:
        with self.path.open("rb") as f:
            data = f.read(MAX_KEY_FILE_BYTES + 1)
        if len(data) > MAX_KEY_FILE_BYTES:
            raise SpecError([f"cookie key file: over {MAX_KEY_FILE_BYTES} bytes"])
        return data

    def reload(self) -> CookieSigner | None:
        """The new signer when the file changed and parses; None when unchanged, unreadable or invalid (the loaded
        keys stay)."""
        try:
            data = self._read()
            if data == self._bytes:
                return None
            signer = CookieSigner.from_text(data)
        except (OSError, SpecError) as exc:
            log.warning("%s: keeping the loaded cookie keys: %s", self.path, exc)
            return None
        self._bytes, self.signer = data, signer
        log.info("%s changed: cookies are sealed with its current key from now on", self.path)
        return signer

    async def watch(self, on_change: Callable[[CookieSigner], None], interval: float = KEY_FILE_POLL_SECONDS) -> None:
        """Until cancelled: every `interval` seconds, `on_change(signer)` when the file changed."""
        while True:
            await asyncio.sleep(interval)
            signer = await asyncio.to_thread(self.reload)
            if signer is not None:
                on_change(signer)
