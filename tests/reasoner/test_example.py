import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "approval_turn.py"


def test_the_approval_example_runs_a_full_turn() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "1. tool-only: The total is 59.97."
    assert "agent_calculator" in lines[1]
    assert "2. The client asks the person: Charge 59.97 to the card on file? -> approve" in lines
    assert lines[-1] == "3. ok: Done: the card was charged 59.97."
