from memoria_action_worker import SERVICE_NAME
from memoria_action_worker.app import build_app
from memoria_runtime.service import run_service
from memoria_runtime.settings import ActionWorkerSettings


def main() -> None:
    run_service(SERVICE_NAME, ActionWorkerSettings, build_app)


if __name__ == "__main__":
    main()
