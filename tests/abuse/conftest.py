from __future__ import annotations

import sys
from pathlib import Path

# The stack helpers and the test-only actions live beside the tests, not in a package
# (tests.abuse.helpers imports them).
sys.path.insert(0, str(Path(__file__).parent.parent / "support"))
