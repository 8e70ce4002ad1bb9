from typing import Final

SERVICE_NAME: Final = "action-worker"
"""How the service names itself: in traces (``memoria-action-worker``), logs and metric labels."""
