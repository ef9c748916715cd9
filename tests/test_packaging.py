"""What the wheel and the sdist ship: the licence, classifiers; built in-process with hatchling."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from hatchling.builders.sdist import SdistBuilder
from hatchling.builders.wheel import WheelBuilder

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_and_the_sdist_ship_the_mit_license(tmp_path: Path) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License")
    wheel = next(iter(WheelBuilder(str(ROOT)).build(directory=str(tmp_path))))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (shipped,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(shipped).decode() == license_text
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = archive.read(metadata).decode().split("\n\n", 1)[0]
    assert "License-Expression: MIT" in headers
    assert "License-File: LICENSE" in headers
    assert "Classifier: Programming Language :: Python :: 3.11" in headers
    assert "aptix/console/static/index.html" in names
    sdist = next(iter(SdistBuilder(str(ROOT)).build(directory=str(tmp_path))))
    with tarfile.open(sdist) as archive:
        top = {Path(n).name for n in archive.getnames() if n.count("/") == 1}
    assert {"LICENSE", "CHANGELOG.md", "README.md"} <= top
