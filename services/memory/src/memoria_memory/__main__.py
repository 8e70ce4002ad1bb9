from memoria_memory import SERVICE_NAME
from memoria_memory.app import build_app
from memoria_runtime.service import run_service
from memoria_runtime.settings import MemoryServiceSettings


def main() -> None:
    run_service(SERVICE_NAME, MemoryServiceSettings, build_app)


if __name__ == "__main__":
    main()
