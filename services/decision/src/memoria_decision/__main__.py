from memoria_decision import SERVICE_NAME
from memoria_decision.app import build_app
from memoria_runtime.service import run_service
from memoria_runtime.settings import DecisionSettings


def main() -> None:
    run_service(SERVICE_NAME, DecisionSettings, build_app)


if __name__ == "__main__":
    main()
