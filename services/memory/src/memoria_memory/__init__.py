from typing import Final

SERVICE_NAME: Final = "memory"
"""How the service names itself: in traces (``memoria-memory``), logs and metric labels."""
