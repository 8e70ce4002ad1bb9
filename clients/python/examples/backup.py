"""Back up every memory to a JSON Lines file and restore it (safe to run twice):
python backup.py export memories.jsonl | python backup.py import memories.jsonl"""

import os
import sys

from memoria_client import Memoria

command, path = sys.argv[1], sys.argv[2]
with Memoria() as memoria:
    if not memoria.token:
        memoria.login(os.environ.get("MEMORIA_USER", "demo"))
    if command == "export":
        with open(path, "w", encoding="utf-8") as sink:
            print(f"exported {memoria.export(sink)} memories")
    else:
        with open(path, encoding="utf-8") as source:
            summary = memoria.import_lines(source)
        for number, reason in summary.failures:
            print(f"line {number}: {reason}", file=sys.stderr)
        print(summary)
        sys.exit(1 if summary.failed else 0)
