from typing import Final

SERVICE_NAME: Final = "gateway"
"""How the service names itself: in traces (``memoria-gateway``), logs and metric labels."""
