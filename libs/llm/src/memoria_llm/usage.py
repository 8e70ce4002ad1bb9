"""Token usage: every provider reports each response's tokens here, and callers collect them
(the record and its collector are shared vocabulary, in ``memoria_contracts.usage``, so the
cycle's accounting in ``memoria_runtime`` reads them without depending on the providers)."""

from memoria_contracts.usage import Usage, collecting, report

__all__ = ["Usage", "collecting", "report"]
