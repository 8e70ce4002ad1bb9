from typing import Final

SERVICE_NAME: Final = "decision"
"""How the service names itself: in traces (``memoria-decision``), logs and metric labels."""
